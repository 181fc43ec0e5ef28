"""The course's weeks, read from one place: ``chapters/syllabus.yml`` (instructors' page, "A possible syllabus").

- :func:`read_syllabus`: each week's number, sections, theme and deadline, checked against the chapters;
- :func:`week_book` and :func:`week_student`: a week's sections as one notebook (the book's, with solutions, from
  which scripts/grading.py writes the week's autograder; and the student edition, which students hand in): otter
  grades one notebook per submission, so a week of three sections is one notebook of three sections;
- :func:`syllabus_table` and :func:`write_page`: the instructors' page's syllabus table and its table of weekly
  autograders, written between markers from the syllabus and from what ``scripts/grading.py --all-weeks`` measured
  (``chapters/grading_measurements.json``); ``tests/tools/test_course.py`` fails when the page differs;
- :func:`release_solutions`: the answer key of each week whose deadline has passed, into the student folder.

    python -m scripts.course            # rewrite the instructors' page's generated blocks
    python -m scripts.course --check    # exit 1 if they differ from what this script writes
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.course")
from scripts import exercise_index, student_edition  # noqa: E402

CHAPTERS = ROOT / "chapters"
SYLLABUS = CHAPTERS / "syllabus.yml"
MEASURED = CHAPTERS / "grading_measurements.json"
PAGE = CHAPTERS / "instructors.md"
LINK = re.compile(r"\]\((?P<target>[^)\s#]+\.(?:ipynb|md))(?P<anchor>#[^)\s]*)?\)")


@dataclass(frozen=True)
class Week:
    """One week of the syllabus: its sections ("3.5"), their notebooks, its theme and its deadline (or None)."""

    number: int
    sections: tuple[str, ...]
    theme: str
    deadline: datetime.date | None

    @property
    def notebooks(self) -> list[Path]:
        return [section_notebook(section) for section in self.sections]

    @property
    def name(self) -> str:
        return f"week_{self.number}"


def section_notebook(section: str, chapters: Path = CHAPTERS) -> Path:
    """The notebook of a numbered section: ``"3.5"`` is ``chapters/3_*/5_*.ipynb``."""
    match = re.fullmatch(r"(\d+)\.(\d+)", str(section))
    found = sorted(chapters.glob(f"{match[1]}_*/{match[2]}_*.ipynb")) if match else []
    if len(found) != 1:
        raise ValueError(f"the syllabus names section {section!r}, and chapters/ has "
                         f"{'no' if not found else len(found)} notebook for it: write sections as chapter.section, "
                         "e.g. \"3.5\" for chapters/3_head_roles/5_induction_heads.ipynb")
    return found[0]


def section_of(notebook: Path) -> str:
    """``chapters/3_head_roles/5_induction_heads.ipynb`` is section ``"3.5"``."""
    return f"{notebook.parent.name.split('_')[0]}.{notebook.name.split('_')[0]}"


def read_syllabus(path: Path = SYLLABUS) -> list[Week]:
    """The weeks of ``path``, numbered 1, 2, ... in order, each section in one week at most; ValueError naming the
    week that breaks this."""
    weeks, seen = [], {}
    for position, entry in enumerate(yaml.safe_load(path.read_text())["weeks"], 1):
        if entry.get("week") != position:
            raise ValueError(f"{path.name}: the weeks are numbered 1, 2, ... in order; entry {position} says week "
                             f"{entry.get('week')!r}")
        deadline = entry.get("deadline")
        if deadline is not None and not isinstance(deadline, datetime.date):
            raise ValueError(f"{path.name}: week {position}'s deadline {deadline!r} is not a date: write YYYY-MM-DD")
        sections = tuple(str(section) for section in entry["sections"])
        for section in sections:
            section_notebook(section)
            if section in seen:
                raise ValueError(f"{path.name}: section {section} is in week {seen[section]} and week {position}")
            seen[section] = position
        weeks.append(Week(position, sections, str(entry["theme"]), deadline))
    return weeks


def week(number: int, weeks: list[Week] | None = None) -> Week:
    weeks = read_syllabus() if weeks is None else weeks
    if not 1 <= number <= len(weeks):
        raise ValueError(f"the syllabus has weeks 1 to {len(weeks)}, not {number}")
    return weeks[number - 1]


def relinked(text: str, source: Path, target: Path) -> str:
    """``text``'s relative links to notebooks and pages, written from ``source``'s folder, rewritten for a file in
    ``target``'s folder (both paths in the same tree)."""
    def move(match: re.Match) -> str:
        if "://" in match["target"]:
            return match[0]
        where = os.path.normpath(source.parent / match["target"])
        return f"]({PurePosixPath(os.path.relpath(where, target.parent))}{match['anchor'] or ''})"

    return LINK.sub(move, text)


def _concatenate(week: Week, parts: list[dict]) -> dict:
    """The week's notebooks as one: a title cell, then each notebook's cells, their ids made unique by section."""
    combined = copy.deepcopy(parts[0])
    listing = ", ".join(week.sections)
    combined["cells"] = [{"cell_type": "markdown", "id": f"{week.name}-title", "metadata": {}, "source": [
        f"# Week {week.number}: {week.theme}\n", "\n",
        f"Sections {listing}, one after the other. Hand in this notebook: it is graded as one assignment.\n"]}]
    for section, part in zip(week.sections, parts, strict=True):
        for cell in copy.deepcopy(part["cells"]):
            if "id" in cell:
                cell["id"] = f"s{section.replace('.', '-')}-{cell['id']}"
            combined["cells"].append(cell)
    return combined


def week_book(week: Week) -> dict:
    """The book's notebooks of the week (solutions in), as one notebook: what the week's autograder is written from."""
    return _concatenate(week, [json.loads(path.read_text()) for path in week.notebooks])


def week_student(week: Week, where: Path) -> dict:
    """The student edition of the week as one notebook, to be saved at ``where`` in the student folder (beside its
    chapters/): readable outside JupyterLab, as scripts/student_edition.py writes each section, its links to other
    notebooks rewritten for its own folder."""
    parts = []
    for path in week.notebooks:
        book = json.loads(path.read_text())
        student, _ = student_edition.split_notebook(book)
        student = student_edition.with_answer_cells(student, student_edition.exercises(book))
        part = student_edition.readable_edition(student, book, path)
        for cell in part["cells"]:
            if cell["cell_type"] == "markdown":
                text = relinked("".join(cell["source"]), path.relative_to(ROOT), where)
                cell["source"] = text.splitlines(keepends=True)
        parts.append(part)
    return _concatenate(week, parts)


def write_weeks(out: Path, weeks: list[Week] | None = None) -> list[Path]:
    """Each week's student notebook as ``out/weeks/week_N.ipynb``; their paths."""
    written = []
    for each in read_syllabus() if weeks is None else weeks:
        path = out / "weeks" / f"{each.name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        notebook = week_student(each, path.relative_to(out))
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    return written


# ---- releasing the answer key after the deadline ----

def due_weeks(weeks: list[Week], through: int | None = None, today: datetime.date | None = None) -> list[Week]:
    """The weeks whose solutions may be released: weeks 1 to ``through``, or else every week whose deadline is
    before ``today``. ValueError when no week qualifies and none has a deadline, saying what to set."""
    if through is not None:
        return [each for each in weeks if each.number <= week(through, weeks).number]
    today = today or datetime.date.today()
    if all(each.deadline is None for each in weeks):
        raise ValueError("no week of chapters/syllabus.yml has a deadline: set them (YYYY-MM-DD), or name the last "
                         "week whose deadline has passed: --release-solutions 3")
    return [each for each in weeks if each.deadline is not None and each.deadline < today]


def week_answer_key(week: Week, where: Path) -> str:
    """The answer key of a week's sections as one markdown page, readable outside the book (glued numbers as text,
    links rewritten for ``where``, the page's path in the student folder)."""
    lines = [f"# Solutions of week {week.number}: {week.theme}", ""]
    for path in week.notebooks:
        book = json.loads(path.read_text())
        _, solutions = student_edition.split_notebook(book)
        key = student_edition.answer_key(student_edition.notebook_title(book, path), solutions)
        key = re.sub(r"^(#+) ", r"#\1 ", key, flags=re.M)  # each section one level below the page's title
        readable = student_edition.readable_markdown(key, student_edition.shown_expressions(book), path)
        lines += [relinked(readable, path.relative_to(ROOT), where).rstrip(), ""]
    return "\n".join(lines)


def release_solutions(out: Path, released: list[Week]) -> list[Path]:
    """Write ``out/solutions/week_N.md`` for each released week; their paths. A week not released has no page: one
    written by an earlier release is taken away."""
    folder = out / "solutions"
    folder.mkdir(parents=True, exist_ok=True)
    names = {f"{each.name}.md" for each in released}
    for old in folder.glob("week_*.md"):
        if old.name not in names:
            old.unlink()
    written = []
    for each in released:
        path = folder / f"{each.name}.md"
        path.write_text(week_answer_key(each, path.relative_to(out)))
        written.append(path)
    return written


# ---- what the weekly autograders measure ----

def describe_week(week: Week, folder: Path) -> dict:
    """A week's autograder as the instructors' page lists it: sections, exercises, points and the zip's size."""
    points = [points_in(path) for path in sorted((folder / "tests").glob("*.py"))]
    return {"sections": list(week.sections), "exercises": len(points), "points": sum(points),
            "zip_mib": round((folder / "autograder.zip").stat().st_size / 2**20, 2)}


def points_in(path: Path) -> float:
    """The points of an otter test file that scripts/grading.py writes."""
    return float(re.search(r"^points = (\S+)$", path.read_text(), re.M)[1])


def record_measurements(measured: dict) -> None:
    """Add ``measured`` to chapters/grading_measurements.json, with this machine's description, and rewrite the
    instructors' page's table from it."""
    from scripts.bench_head_cost import cpu_model

    record = json.loads(MEASURED.read_text()) if MEASURED.exists() else {"weeks": {}}
    for number, entry in measured.get("weeks", {}).items():
        record["weeks"].setdefault(number, {}).update(entry)
    if "environment" in measured:
        record["environment"] = measured["environment"]
    record["machine"] = f"{cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    MEASURED.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    main([])


# ---- the instructors' page's generated blocks ----

def core_minutes(week: Week) -> tuple[int, int, int]:
    """(reading, core exercises, every exercise) of a week, in minutes: the exercise index's estimates, summed over
    the week's sections; the core path is the reading and the core exercises."""
    reading = core = every = 0
    for path in week.notebooks:
        notebook = json.loads(path.read_text())
        reading += exercise_index.reading_minutes(notebook)
        found = student_edition.exercises(notebook)
        core += sum(e.minutes or 0 for e in found if e.importance == "core")
        every += sum(e.minutes or 0 for e in found)
    return reading, core, every


def _hours(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60:02d}"


def syllabus_table(weeks: list[Week]) -> str:
    rows = ["| Week | Sections | Theme | Core path (reading + core exercises) | Every exercise |",
            "| --- | --- | --- | --- | --- |"]
    for each in weeks:
        reading, core, every = core_minutes(each)
        rows.append(f"| {each.number} | {', '.join(each.sections)} | {each.theme} | {_hours(reading + core)} "
                    f"({_hours(reading)} + {_hours(core)}) | {_hours(every)} |")
    return "\n".join(rows)


def measured_table(measured: dict) -> str:
    """The weekly autograders as ``scripts/grading.py --all-weeks`` measured them."""
    rows = ["| Week | Sections | Graded exercises | Points | autograder.zip | Grading the key with `otter run` |",
            "| --- | --- | --- | --- | --- | --- |"]
    for number, entry in sorted(measured["weeks"].items(), key=lambda item: int(item[0])):
        took = f"{entry['key_seconds']:.0f} s, {entry['key_score']}" if "key_seconds" in entry else "not measured"
        rows.append(f"| {number} | {', '.join(entry['sections'])} | {entry['exercises']} | {entry['points']:g} | "
                    f"{entry['zip_mib']:.1f} MiB | {took} |")
    rows += ["", f"Measured on {measured['machine']}."]
    if "environment" in measured:
        built = measured["environment"]
        rows[-1] += (f" The grading environment that {built['zip']}'s zip alone builds (Python {built['python']}, "
                     f"its environment.yml's pip list, as on Gradescope): {built['size_mib']:,.0f} MiB, installed in "
                     f"{built['install_seconds']:.0f} s.")
    return "\n".join(rows)


def _blocks(weeks: list[Week], measured: dict | None) -> dict[str, str]:
    blocks = {"syllabus": syllabus_table(weeks)}
    if measured is not None:
        blocks["weekly-autograders"] = measured_table(measured)
    return blocks


def page_text(page: str, weeks: list[Week] | None = None, measured: dict | None = None) -> str:
    """``page`` with each generated block (between ``<!-- name: written by scripts/course.py -->`` and
    ``<!-- end name -->``) rewritten."""
    weeks = read_syllabus() if weeks is None else weeks
    if measured is None and MEASURED.exists():
        measured = json.loads(MEASURED.read_text())
    for name, block in _blocks(weeks, measured).items():
        start, end = f"<!-- {name}: written by scripts/course.py; do not edit -->", f"<!-- end {name} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(page):
            raise ValueError(f"{PAGE.name} has no block {start} ... {end}")
        page = pattern.sub(lambda _, text=f"{start}\n\n{block}\n\n{end}": text, page)
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page's generated blocks are stale")
    args = parser.parse_args(argv)
    current = PAGE.read_text()
    expected = page_text(current)
    if args.check:
        if current != expected:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python -m scripts.course")
            return 1
        return 0
    if current != expected:
        PAGE.write_text(expected)
        print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
