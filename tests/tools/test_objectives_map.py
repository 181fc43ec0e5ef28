"""The objectives map and the instructors' table of objectives are generated from chapters/objectives.yml and the
notebooks (scripts/objectives_map.py): both are up to date, every objective of every section has an exercise that
exists, and a broken file is refused in words that say what to fix."""

import json
import re
from pathlib import Path

import pytest
import yaml

from scripts import objectives_map

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def books():
    return objectives_map.exercise_index.collect()


def test_the_committed_pages_are_what_the_script_writes(books):
    objectives = objectives_map.load()
    assert objectives_map.PAGE.read_text() == objectives_map.render(objectives, books)
    instructors = objectives_map.INSTRUCTORS.read_text()
    assert instructors == objectives_map.instructors_page(objectives, books, instructors)


def test_every_objective_of_every_section_has_an_exercise_of_the_book(books):
    objectives = yaml.safe_load(objectives_map.OBJECTIVES.read_text())
    labels = set()
    for path in (ROOT / "chapters").rglob("*.ipynb"):  # read independently of the script: the labels in the notebooks
        cells = json.loads(path.read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        labels |= set(re.findall(r"```\{exercise\}[^\n]*\n:label: ([\w-]+)", text))
    toc_files = re.findall(r"file: (chapters/\S+)", (ROOT / "_toc.yml").read_text())
    notebooks = [file for file in toc_files if (ROOT / f"{file}.ipynb").exists()]
    assert sorted(objectives) == sorted(notebooks), "a notebook of the book lacks objectives, or one is not in the book"
    for section, items in objectives.items():
        for item in items:
            assert item["exercises"], f"{section}: no exercise for {item['objective']!r}"
            assert set(item["exercises"]) <= labels, f"{section}: {set(item['exercises']) - labels} are not exercises"
    assert sum(len(items) for items in objectives.values()) >= 50


def test_the_map_lists_every_objective_once_with_links_to_its_exercises():
    page = objectives_map.PAGE.read_text()
    objectives = yaml.safe_load(objectives_map.OBJECTIVES.read_text())
    rows = [line for line in page.splitlines() if line.startswith("| ") and "{doc}" in line]
    assert len(rows) == sum(len(items) for items in objectives.values())
    first = objectives["chapters/1_mechanism/2_multi_head_attention"][-1]
    row = next(line for line in rows if first["objective"] in line)
    assert all(f"<{label}>`" in row for label in first["exercises"])
    assert "{doc}`objectives_map`" in objectives_map.INSTRUCTORS.read_text()


def test_an_objective_without_an_exercise_or_with_an_unknown_label_is_refused(books, tmp_path):
    objectives = objectives_map.load()
    section = "chapters/1_mechanism/1_attention_from_scratch"
    empty = {**objectives, section: [{"objective": "do something", "exercises": []}]}
    with pytest.raises(objectives_map.ObjectivesError, match="no exercise practises \"do something\""):
        objectives_map.render(empty, books)
    unknown = {**objectives, section: [{"objective": "do something", "exercises": ["ex-nowhere"]}]}
    with pytest.raises(objectives_map.ObjectivesError, match="ex-nowhere .* names no exercise"):
        objectives_map.render(unknown, books)
    missing = {file: items for file, items in objectives.items() if file != section}
    with pytest.raises(objectives_map.ObjectivesError, match=f"{section} is a section of the book with no objectives"):
        objectives_map.render(missing, books)
    broken = tmp_path / "objectives.yml"
    broken.write_text(f"{section}:\n  - just text\n")
    with pytest.raises(objectives_map.ObjectivesError, match="needs `objective:`"):
        objectives_map.load(broken)


def test_the_map_is_in_the_table_of_contents():
    assert "file: chapters/objectives_map" in (ROOT / "_toc.yml").read_text()
