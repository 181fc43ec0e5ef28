"""The course's weeks (chapters/syllabus.yml, scripts/course.py): the instructors' page shows the syllabus it holds,
each week is one notebook with one autograder that grades the key at full marks and the student edition at zero,
and the answer key of a week is released only when asked.

The weekly autograder is graded here as ``otter run`` grades it, through the plugin's own function, without otter
and its kernel; ``.ci/run`` grades a week's autograder.zip through ``otter run`` (``scripts/grading.py
--check-week``).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import load_script

from mha.exercises.grading.otter_plugin import grade_test
from mha.exercises.grading.submission import read_submission

ROOT = Path(__file__).resolve().parents[2]
course = load_script("course")
grading = load_script("grading")
SECTION_NOTEBOOKS = sorted(p.relative_to(ROOT) for p in (ROOT / "chapters").glob("[0-9]_*/[0-9]_*.ipynb"))


def test_every_numbered_section_is_in_exactly_one_week():
    weeks = course.read_syllabus()
    listed = [path.relative_to(ROOT) for week in weeks for path in week.notebooks]
    assert sorted(listed) == SECTION_NOTEBOOKS and len(set(listed)) == len(listed)
    assert course.section_notebook("3.5").name == "5_induction_heads.ipynb"
    assert course.section_of(ROOT / "chapters" / "4_caveats" / "2_redundancy_and_pruning.ipynb") == "4.2"


def page_block(name: str) -> str:
    page = (ROOT / "chapters" / "instructors.md").read_text()
    found = re.search(rf"<!-- {name}: written by scripts/course.py; do not edit -->(.*?)<!-- end {name} -->", page,
                      re.S)
    assert found, f"the instructors' page has no generated {name} block"
    return found[1]


def test_the_instructors_page_shows_the_syllabus_that_the_bundles_follow():
    page = (ROOT / "chapters" / "instructors.md").read_text()
    assert course.page_text(page) == page, "the instructors' page is out of date: run python -m scripts.course"
    rows = [line.split("|")[1:-1] for line in page_block("syllabus").strip().splitlines()[2:]]
    listed = yaml.safe_load((ROOT / "chapters" / "syllabus.yml").read_text())["weeks"]
    assert [[cell.strip() for cell in row][:3] for row in rows] == [
        [str(week["week"]), ", ".join(week["sections"]), week["theme"]] for week in listed]


def test_each_week_has_a_core_path_of_two_to_three_hours_and_a_label_on_every_exercise():
    for week in course.read_syllabus():
        reading, core, every = course.core_minutes(week)
        labels = [e.importance for path in week.notebooks
                  for e in course.student_edition.exercises(json.loads(path.read_text()))]
        assert labels and all(label in ("core", "recommended", "optional") for label in labels), week.number
        # the core path is what a course sets every week: about two to three hours with the reading
        assert 105 <= reading + core <= 195, (week.number, reading, core)
        assert core < every, f"week {week.number}: everything is core; label the deeper exercises recommended"


def test_the_measured_weekly_autograders_are_those_of_the_syllabus():
    measured = json.loads(course.MEASURED.read_text())
    weeks = course.read_syllabus()
    assert sorted(measured["weeks"], key=int) == [str(week.number) for week in weeks]
    for week in weeks:
        entry = measured["weeks"][str(week.number)]
        assert entry["sections"] == list(week.sections)
        book = course.week_book(week)
        exercises = grading.exercises_of(book)
        assert entry["exercises"] == len(exercises) and entry["points"] == sum(map(grading.points_of, exercises)), (
            f"week {week.number}'s exercises changed since they were measured: run python -m scripts.grading "
            "--all-weeks --record (and --check-week N --record for the time its key takes)")
        assert 0 < entry["zip_mib"] < 8
    assert "weekly-autograders" in course.page_text((ROOT / "chapters" / "instructors.md").read_text())


@pytest.mark.parametrize("text, problem", [
    ("weeks:\n  - {week: 2, sections: ['1.1'], theme: t}\n", "numbered 1, 2"),
    ("weeks:\n  - {week: 1, sections: ['9.9'], theme: t}\n", "no notebook"),
    ("weeks:\n  - {week: 1, sections: ['1.1'], theme: t}\n  - {week: 2, sections: ['1.1'], theme: t}\n",
     "is in week 1 and week 2"),
    ("weeks:\n  - {week: 1, sections: ['1.1'], theme: t, deadline: next friday}\n", "not a date"),
])
def test_a_syllabus_that_cannot_be_followed_is_refused_with_the_reason(tmp_path, text, problem):
    (tmp_path / "syllabus.yml").write_text(text)
    with pytest.raises(ValueError, match=problem):
        course.read_syllabus(tmp_path / "syllabus.yml")


def test_a_week_is_one_notebook_of_its_sections_in_order():
    week = course.week(5)
    book = course.week_book(week)
    parts = [json.loads(path.read_text()) for path in week.notebooks]
    assert [e["label"] for e in grading.exercises_of(book)] == [
        e["label"] for part in parts for e in grading.exercises_of(part)]
    assert len(book["cells"]) == 1 + sum(len(part["cells"]) for part in parts)
    ids = [cell["id"] for cell in book["cells"]]
    assert len(set(ids)) == len(ids), "cell ids are unique in the week's notebook"
    with pytest.raises(ValueError, match="weeks 1 to 6"):
        course.week(7)


def test_the_students_week_notebook_has_no_solution_and_links_that_resolve(tmp_path):
    week = course.week(1)
    (path,) = course.write_weeks(tmp_path, [week])
    assert path == tmp_path / "weeks" / "week_1.ipynb"
    notebook = json.loads(path.read_text())
    text = json.dumps(notebook)
    assert "solution-start" not in text and not re.search(r"\bsolution_\w+", text)
    stubs = sum("NotImplementedError" in "".join(cell["source"]) for cell in notebook["cells"])
    assert stubs == len(grading.exercises_of(course.week_book(week)))
    site = load_script("readable").site_url()  # a notebook opened alone links to the website's pages
    links = [target for cell in notebook["cells"] if cell["cell_type"] == "markdown"
             for target in re.findall(r"\]\(([^)#\s]+)", "".join(cell["source"]))]
    pages = [target.removeprefix(site) for target in links if target.startswith(site + "chapters/")]
    assert pages, "the week's notebook links to other sections"
    assert not [target for target in links if "://" not in target], "a relative link, broken in a notebook alone"
    for page in pages:
        assert any((ROOT / page).with_suffix(suffix).is_file() for suffix in (".ipynb", ".md")), page


@pytest.mark.slow
def test_a_weekly_autograder_grades_its_key_at_full_marks_and_the_student_edition_at_zero(tmp_path):
    """Week 1 covers two notebooks: every exercise of both, through the plugin's function as otter run calls it."""
    week = course.week(1)
    book = course.week_book(week)
    exercises = grading.exercises_of(book)
    config = grading.otter_config(exercises)["plugins"][0]["mha.exercises.grading.otter_plugin.IsolatedGrading"]
    tests = tmp_path / "tests"
    tests.mkdir()
    for exercise in exercises:
        (tests / f"{exercise['label']}.py").write_text(grading.test_file(exercise, grading.points_of(exercise)))
    key = read_submission(grading.key_submission(book))
    student = read_submission(grading.student_edition.split_notebook(book)[0])
    first_of_each_section = [grading.exercises_of(json.loads(path.read_text()))[0]["label"]
                             for path in week.notebooks]
    assert len(first_of_each_section) == 2
    for exercise in exercises:
        cases = ["public"] + [f"hidden_seed_{seed}" for seed in grading.HIDDEN_SEEDS if grading.takes_seed_of(exercise)]
        passed = [result.passed for result in grade_test(key, exercise["label"], cases, config, tests)]
        assert passed == [True] * len(cases), exercise["label"]
        if exercise["label"] in first_of_each_section:  # a stub scores nothing, in either section
            (result,) = grade_test(student, exercise["label"], ["public"], config, tests)
            assert not result.passed and "Not attempted yet" in result.message, result.message


# ---- releasing the solutions ----

def test_solutions_are_released_for_the_weeks_named_or_whose_deadline_has_passed():
    weeks = course.read_syllabus()
    assert [week.number for week in course.due_weeks(weeks, through=2)] == [1, 2]
    with pytest.raises(ValueError, match="no week of chapters/syllabus.yml has a deadline"):
        course.due_weeks([week for week in weeks if week.deadline is None])
    mondays = [datetime.date(2027, 1, 4) + datetime.timedelta(weeks=week.number) for week in weeks]  # 11, 18 Jan...
    dated = [course.Week(week.number, week.sections, week.theme, monday)
             for week, monday in zip(weeks, mondays, strict=True)]
    assert [week.number for week in course.due_weeks(dated, today=datetime.date(2027, 1, 19))] == [1, 2]
    assert course.due_weeks(dated, today=datetime.date(2027, 1, 11)) == [], "not on the deadline's own day"


def test_releasing_writes_the_answer_key_of_those_weeks_only(tmp_path):
    assert grading.release("1", tmp_path) == 0
    assert sorted(path.name for path in (tmp_path / "solutions").iterdir()) == ["week_1.md"]
    page = (tmp_path / "solutions" / "week_1.md").read_text()
    for path in course.week(1).notebooks:  # every solution's code of both sections, readable without the book
        _, solutions = grading.student_edition.split_notebook(json.loads(path.read_text()))
        assert all(code in page for solution in solutions for code in solution.code)
    assert "{eval}" not in page and "{doc}" not in page and "{ref}" not in page
    assert "Multi-head" in page or "multi-head" in page
    assert grading.release("2", tmp_path) == 0 and grading.release("1", tmp_path) == 0
    assert sorted(path.name for path in (tmp_path / "solutions").iterdir()) == ["week_1.md"], "week 2 taken back"
    with pytest.raises(SystemExit, match="has a deadline"):
        grading.release("due", tmp_path / "other")


def test_make_release_solutions_runs_the_documented_command():
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    done = subprocess.run(["make", "-n", "release-solutions", "WEEK=3"], cwd=ROOT, capture_output=True, text=True,
                          env=environment, timeout=60)
    assert "-m scripts.grading --release-solutions 3 --student-out _build/student" in done.stdout, done.stderr
    assert "make release-solutions WEEK=" in (ROOT / "chapters" / "instructors.md").read_text()
