"""CONTRIBUTING.md's recipes are complete: each names every file that the same kind of change already reached.

A recipe ("Add a head-role score", "Add a section", "Add a view", "Add a stored measurement") is checked against an
*exemplar*, one thing of its kind that the book already has: every tracked file that mentions the exemplar is a
place a new one of that kind must reach too, so the recipe must name it, as its path or as a pattern with
placeholders (``tests/<subpackage>/test_<module>.py``). A page that a script writes is reached through the script,
so the recipe names ``python -m scripts.<name>`` instead; the few files that mention an exemplar for another
reason are listed with that reason.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")

WRITTEN_BY = {
    "chapters/exercise_index.md": "scripts.exercise_index",
    "chapters/objectives_map.md": "scripts.objectives_map",
    "chapters/instructors.md": "scripts.objectives_map",  # the stems are in its table of objectives
    "chapters/execution_statistics.json": "scripts.run_notebooks",
    "chapters/execution_statistics.md": "scripts.run_notebooks",
    "data/SHA256SUMS": "scripts.record_data_sha256",
}
"""Files a script writes (a test fails while each is stale), reached through that script."""


@dataclass(frozen=True)
class Exemplar:
    """What the book already has of a recipe's kind: the words that name it, and the files that mention it for
    another reason (path: why)."""

    recipe: str
    words: tuple[str, ...]
    incidental: dict[str, str] = field(default_factory=dict)


EXEMPLARS = (
    Exemplar("Add a head-role score", ("cls_share",), {
        "tests/analysis/test_popular_story.py": "builds a role table by hand as the input of another measurement",
        "tests/views/test_web_sources.py": "lists what each joined module exports, the sentence scores among them",
    }),
    Exemplar("Add a section", ("2_low_rank_bottleneck",), {
        "tests/tools/test_reader_edition.py": "uses the section's notebook as a sample to convert",
        "chapters/glossary.md": "cites the section for two of its terms, as it cites any section that defines one",
    }),
    Exemplar("Add a view", ("TrainingTimelineView", '"timeline"'), {
        "tests/lab/test_timeline.py": "checks the lab's recorded timeline, which the view draws, in its own tests",
    }),
    Exemplar("Add a stored measurement", ("pattern_fits",), {}),
)


def recipe_text(title: str) -> str:
    """The text of CONTRIBUTING.md's section ``## title``, up to the next heading of that level."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", GUIDE, re.M | re.S)
    assert found, f"CONTRIBUTING.md has no section '## {title}'"
    return found.group(1)


def named_patterns(text: str) -> list[re.Pattern]:
    """Each path ``text`` names in inline code, as a pattern: a placeholder such as <part> stands for one name."""
    patterns = []
    for span in re.findall(r"`([^`]+)`", text):
        for word in span.split():
            if "/" in word or "." in word:
                pieces = re.split(r"(<[^>]+>)", word.strip(".,;:()"))
                body = "".join(r"[\w.-]+" if piece.startswith("<") else re.escape(piece) for piece in pieces)
                patterns.append(re.compile(body + r"\Z"))
    return patterns


def mentions(words: tuple[str, ...]) -> set[str]:
    """Every tracked file whose text holds one of ``words``."""
    found = set()
    for word in words:
        listed = subprocess.run(["git", "grep", "-l", "-F", word], cwd=ROOT, capture_output=True, text=True)
        assert listed.returncode in (0, 1), listed.stderr
        found |= set(listed.stdout.split())
    return found


@pytest.mark.parametrize("exemplar", EXEMPLARS, ids=lambda exemplar: exemplar.recipe)
def test_each_recipe_names_every_file_its_exemplar_reaches(exemplar):
    text = recipe_text(exemplar.recipe)
    patterns = named_patterns(text)
    reached = mentions(exemplar.words) - {"CONTRIBUTING.md", "tests/test_contributing_recipes.py"}  # both name them
    assert len(reached) >= 5, reached  # the exemplar is still in the book, so the check has something to check
    missing = []
    for path in sorted(reached - set(exemplar.incidental)):
        if path in WRITTEN_BY:
            if f"python -m {WRITTEN_BY[path]}" not in text:
                missing.append(f"{path} (through `python -m {WRITTEN_BY[path]}`)")
        elif not any(pattern.match(path) for pattern in patterns):
            missing.append(path)
    assert not missing, (f"CONTRIBUTING.md's '{exemplar.recipe}' misses files that {exemplar.words} reaches "
                         f"(name each, or list it as incidental here with the reason): {missing}")
    stale = sorted(set(exemplar.incidental) - reached)
    assert not stale, f"incidental files that no longer mention {exemplar.words}: {stale}"


def test_the_section_recipe_names_the_syllabus():
    # the syllabus places a section in a week by its number ("2.2"), which other files use for other things
    assert "chapters/syllabus.yml" in recipe_text("Add a section")


def test_a_placeholder_stands_for_one_name_only():
    pattern, = named_patterns("`tests/<subpackage>/test_<module>.py`")
    assert pattern.match("tests/core/test_layouts.py")
    assert not pattern.match("tests/analysis/head_roles/test_role_table.py")  # two folders: name the deeper pattern
    assert not pattern.match("tests/core/test_layouts.pyc")
