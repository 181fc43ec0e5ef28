"""The book's timings are measured, kept in chapters/execution_statistics.json and shown on a generated page, never
typed into its prose (scripts/run_notebooks.py --record writes both)."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import yaml
from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
run_notebooks = load_script("run_notebooks")
RECORD = json.loads(run_notebooks.STATISTICS.read_text())


def test_the_page_is_what_the_kept_measurements_say():
    assert run_notebooks.STATISTICS_PAGE.read_text() == run_notebooks.statistics_page(RECORD), (
        "chapters/execution_statistics.md differs from chapters/execution_statistics.json: "
        "run python -m scripts.run_notebooks --page")


def test_every_notebook_of_the_book_has_a_row_and_every_measurement_a_notebook():
    page = run_notebooks.STATISTICS_PAGE.read_text()
    notebooks = run_notebooks.book_notebooks()
    assert len(notebooks) >= 17
    for path in notebooks:
        assert "{doc}`" + path.relative_to(ROOT / "chapters").with_suffix("").as_posix() + "`" in page, path
    assert set(RECORD["notebooks"]) <= {path.relative_to(ROOT).as_posix() for path in notebooks}


def test_the_measurements_are_plausible_and_judged_by_the_stated_budget():
    assert RECORD["notebooks"], "nothing measured: run python -m scripts.run_notebooks --record"
    for name, entry in RECORD["notebooks"].items():
        assert 0 < entry["cpu_seconds"] and 0 < entry["seconds"] and 50 < entry["peak_mb"] < 64_000, (name, entry)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry["day"]) and entry["load"] >= 0, (name, entry)
    for entry in RECORD.get("other", []):  # the budgets other tools measure: each says what, when and with what
        assert {"budget", "measured", "day", "command"} <= set(entry) and re.search(r"\d", entry["measured"]), entry
    over = sum(entry["cpu_seconds"] > 60 or entry["peak_mb"] > 1536 for entry in RECORD["notebooks"].values())
    page = run_notebooks.STATISTICS_PAGE.read_text()
    assert f"{over} of the measured notebooks" in page
    assert page.count("| no |") == over


def test_a_fresh_measurement_updates_the_file_and_the_page(tmp_path, monkeypatch):
    monkeypatch.setattr(run_notebooks, "STATISTICS", tmp_path / "statistics.json")
    monkeypatch.setattr(run_notebooks, "STATISTICS_PAGE", tmp_path / "statistics.md")
    first = run_notebooks.book_notebooks()[0]
    run_notebooks.record_statistics({first: (75.04, 900.4, 70.06)})
    kept = json.loads((tmp_path / "statistics.json").read_text())["notebooks"][first.relative_to(ROOT).as_posix()]
    assert (kept["seconds"], kept["peak_mb"], kept["cpu_seconds"]) == (75.0, 900, 70.1)
    assert kept["day"] == datetime.date.today().isoformat() and "cores" in kept["machine"]
    page = (tmp_path / "statistics.md").read_text()
    assert "| 70.1 s | 75.0 s | 900 MB | no |" in page and "1 of the measured notebooks is over it" in page


def test_the_page_is_in_the_table_of_contents_for_readers():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    readers = next(part for part in toc["parts"] if part.get("caption") == "For instructors and readers")
    assert {"file": "chapters/execution_statistics"} in readers["chapters"]


def test_the_readme_points_to_the_page_instead_of_typing_timings():
    readme = (ROOT / "README.md").read_text()
    budgets = readme.split("## Budgets", 1)[1].split("\n## ", 1)[0]
    assert "chapters/execution_statistics.md" in budgets
    # a budget is "at most 60 s"; a measurement would say what something took, or name a span of minutes and seconds
    assert not re.search(r"\btook\b|\d+ min \d+ s|\d+ to \d+ (?:ms|s)\b", readme), "move measured timings to the page"
