"""Write chapters/exercise_index.md, the book's exercise index, from the notebooks themselves.

Every exercise declares its title (the argument of ```` ```{exercise} ````), and in the first line of its body its
kind, difficulty and time (``**Write and check** · ★★ · 15 min · core``; scripts/student_edition.py reads both,
:func:`student_edition.exercises`). This script lists them all, in the order of ``_toc.yml``, with the section, the
check function a "Write and check" exercise calls, and the time each section's exercises take in all, beside the
time its prose takes to read (:func:`reading_minutes`: the words of the student's markdown, hints left out, at
:data:`WORDS_PER_MINUTE`).

It also writes the paragraph of the book's home page (chapters/index.md) that says how many exercises there are and
how many of them have an automatic check, between two comment lines that mark it.

The page is generated, never kept by hand: ``tests/tools/test_exercise_index.py`` fails when the committed page (or that
paragraph) differs from what this script writes, or when an exercise of chapters 1-4 lacks its title, header or hint.

    python -m scripts.exercise_index            # rewrite chapters/exercise_index.md and the home page's paragraph
    python -m scripts.exercise_index --check    # exit 1 if either is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.exercise_index")
from scripts import student_edition  # noqa: E402

PAGE = ROOT / "chapters" / "exercise_index.md"
HOME = ROOT / "chapters" / "index.md"
HOME_PARAGRAPH = re.compile(r"(<!-- The paragraph below is written by scripts/exercise_index.py[^\n]*-->\n).*?"
                            r"(\n<!-- End of the written paragraph. -->)", re.S)
KIND_NAMES = {kind: name for name, kind in student_edition.KINDS.items()}
# What the index calls the unnumbered background pages (the instructors' guide uses the same words).
SHORT_NAMES = {"chapters/background/transformer_in_brief": "primer",
               "chapters/background/statistics_toolkit": "toolkit"}

# A reading speed for technical prose with equations, slower than the 240 or so words a minute of plain prose.
WORDS_PER_MINUTE = 200
HINT_BLOCK = re.compile(r"```\{hint\}.*?\n```", re.S)
ROLE = re.compile(r"\{(\w[\w:-]*)\}`([^`]*)`")
FENCE_LINE = re.compile(r"^(?:```(?:\{[\w-]+\})?|:\w[\w-]*:.*)", re.M)  # a fence (its title stays), an option
WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")


def prose_words(notebook: dict) -> int:
    """How many words a reader of the student edition reads in ``notebook``'s markdown: the solutions and the hints
    (read only on demand) left out, a glued number counted as one word, a role's text as its words, a directive's
    title as its words and its fences and options as none."""
    student, _ = student_edition.split_notebook(notebook)
    text = "\n\n".join("".join(cell["source"]) for cell in student["cells"] if cell["cell_type"] == "markdown")
    text = HINT_BLOCK.sub("", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = ROLE.sub(lambda role: "0" if role[1] == "eval" else re.sub(r"<[^>]*>", "", role[2]), text)
    return len(WORD.findall(FENCE_LINE.sub("", text)))


def reading_minutes(notebook: dict) -> int:
    """The time ``notebook``'s prose takes to read, in whole minutes (at least 1), at :data:`WORDS_PER_MINUTE`."""
    return max(1, round(prose_words(notebook) / WORDS_PER_MINUTE))


def sections() -> list[tuple[str, str]]:
    """(notebook path without suffix, section name) of every notebook in ``_toc.yml``, in reading order: "1.2" in a
    numbered part, the short name (or the file's stem) elsewhere."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = []
    for part in toc.get("parts", []):
        for number, chapter in enumerate(part.get("chapters", []), 1):
            entries = [(chapter["file"], None)] + [(s["file"], f"{number}.{i}")
                                                   for i, s in enumerate(chapter.get("sections", []), 1)]
            for file, name in entries:
                if (ROOT / f"{file}.ipynb").exists():
                    if not part.get("numbered"):
                        name = SHORT_NAMES.get(file, Path(file).name)
                    found.append((file, name or Path(file).name))
    return found


def collect() -> list[tuple[str, str, list[student_edition.Exercise]]]:
    """(notebook path, section name, its exercises) for every notebook of the book, in reading order."""
    return [(file, name, student_edition.exercises(json.loads((ROOT / f"{file}.ipynb").read_text())))
            for file, name in sections()]


def reading_times() -> dict[str, int]:
    """Notebook path (without suffix) -> minutes its prose takes to read, for every notebook of the book."""
    return {file: reading_minutes(json.loads((ROOT / f"{file}.ipynb").read_text())) for file, _ in sections()}


def _stars(difficulty: int | None) -> str:
    return "★" * difficulty if difficulty else "—"


def _minutes(total: int) -> str:
    hours, minutes = divmod(total, 60)
    return f"{minutes} min" if not hours else f"{hours} h {minutes:02d} min"


def render() -> str:
    """The whole page, as markdown."""
    books = collect()
    every = [exercise for _, _, found in books for exercise in found]
    counts = {kind: sum(e.kind == kind for e in every) for kind in KIND_NAMES}
    tiered = sum(e.hints >= 2 for e in every)
    importance = {level: sum(e.importance == level for e in every) for level in student_edition.IMPORTANCE}
    lines = [
        "# Exercise index", "",
        "<!-- Generated by scripts/exercise_index.py from the notebooks: do not edit by hand; run the script. -->", "",
        f"The book has {len(every)} exercises: "
        + ", ".join(f"{counts[kind]} *{KIND_NAMES[kind].lower()}*" for kind in KIND_NAMES) + ". "
        "Each states its kind, difficulty (★ to ★★★), an estimated time and its importance in its first line, and "
        "has a hint in a "
        f"dropdown below it, apart from the solution; {tiered} of them have two or three hints, from a nudge to nearly "
        "the answer, to open one at a time.", "",
        "- **Write and check**: write a function; a check from `mha.exercises` runs it on seeded inputs, compares it "
        "with the package's reference and says what differs. These are the exercises the autograder scores.",
        "- **Predict, then check**: write down a prediction before the next cell measures the answer with the "
        "package and sets it beside yours.",
        "- **Explain in words**: answer in prose; the solution gives a model answer and a rubric for marking.",
        "- **Open investigation**: a question the book does not answer, with a suggested method to start from.", "",
        f"Importance: *core* exercises ({importance['core']}) make the core path, the least a course should set; "
        f"*recommended* ones ({importance['recommended']}) deepen it; *optional* ones ({importance['optional']}) are "
        "for those who want more. The syllabus on the instructors' page gives the core path's time each week.", "",
        "This page is written by `scripts/exercise_index.py` from the notebooks, and a test fails when it is out of "
        "date. See {doc}`instructors` for the student edition, the answer key and grading.", "",
        "## Time per section", "",
        "*Reading time* is the section's prose as the student edition shows it (its markdown, without the hints and "
        f"solutions) at {WORDS_PER_MINUTE} words a minute, a pace for technical text with equations; it leaves out "
        "running the code and studying the figures and views. *Exercise time* adds up the estimates of the section's "
        "exercises, and *core* those of its core exercises.", "",
        "| Section | Exercises | Write and check | Other kinds | Reading time | Exercise time | Core |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    reading = reading_times()
    for file, name, found in books:
        if not found:
            continue
        checked = sum(e.kind == "check" for e in found)
        total = sum(e.minutes or 0 for e in found)
        if all(e.minutes is None for e in found):
            time = "—"
        else:
            time = _minutes(total) + (" (some estimates missing)" if any(e.minutes is None for e in found) else "")
        core = _minutes(sum(e.minutes or 0 for e in found if e.importance == "core"))
        lines.append(f"| {name}: {{doc}}`{Path(file).relative_to('chapters')}` | {len(found)} | {checked} | "
                     f"{len(found) - checked} | {_minutes(reading[file])} | {time} | {core} |")
    total = sum(e.minutes or 0 for e in every)
    read = sum(reading[file] for file, _, found in books if found)
    core = _minutes(sum(e.minutes or 0 for e in every if e.importance == "core"))
    lines += [f"| **All** | {len(every)} | {counts['check']} | {len(every) - counts['check']} | {_minutes(read)} | "
              f"{_minutes(total)} | {core} |",
              "", "## Every exercise", "",
              "| Exercise | Section | Kind | Importance | Difficulty | Time | Check (`mha.exercises.…`) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    from mha.exercises.grading import modules_of_checks

    modules = modules_of_checks()
    lines[lines.index("## Every exercise"):lines.index("## Every exercise")] = model_section(books, modules)
    for _, name, found in books:
        for exercise in found:
            title = f"{{ref}}`{exercise.title} <{exercise.label}>`" if exercise.title else f"{{ref}}`{exercise.label}`"
            check = "—"
            if exercise.check:
                module = modules.get(exercise.check, "")
                check = f"`{exercise.check}`" if module == "mechanism" else f"`{module}.{exercise.check}`"
            lines.append(f"| {title} | {name} | {KIND_NAMES.get(exercise.kind, '—')} | {exercise.importance or '—'} | "
                         f"{_stars(exercise.difficulty)} | "
                         f"{f'{exercise.minutes} min' if exercise.minutes else '—'} | {check} |")
    return "\n".join(lines) + "\n"


def exercises_on_the_model(books, modules: dict[str, str]) -> list[tuple[str, student_edition.Exercise, tuple]]:
    """(section, exercise, tools) for every exercise whose check declares modules of the package that the learner's
    own code uses (``mha.exercises.checking.uses_tools``): the exercises that run the real model or train one."""
    import importlib

    found = []
    for _, name, exercises in books:
        for exercise in exercises:
            if exercise.check and exercise.check in modules:
                check = getattr(importlib.import_module(f"mha.exercises.{modules[exercise.check]}"), exercise.check)
                if getattr(check, "tools", ()):
                    found.append((name, exercise, tuple(check.tools)))
    return found


def model_section(books, modules: dict[str, str]) -> list[str]:
    """The index's list of the exercises whose own code runs the real model or trains one."""
    found = exercises_on_the_model(books, modules)
    lines = ["## On the real model and real training", "",
             f"In {len(found)} exercises the learner's own code runs the pretrained encoder or trains a tiny model: "
             "its check hands the function the package's tools (below), runs it on hidden inputs and compares its "
             "answer with the reference's. The grader lets that code import only the modules listed.", "",
             "| Exercise | Section | The code uses |", "| --- | --- | --- |"]
    for name, exercise, tools in found:
        lines.append(f"| {{ref}}`{exercise.title} <{exercise.label}>` | {name} | "
                     + ", ".join(f"`{tool}`" for tool in tools) + " |")
    return lines + [""]


def home_paragraph() -> str:
    """The home page's sentences on the exercises: how many, and how many have an automatic check."""
    every = [exercise for _, _, found in collect() for exercise in found]
    checked = sum(exercise.kind == "check" for exercise in every)
    others = [f"{sum(e.kind == kind for e in every)} *{KIND_NAMES[kind].lower()}*" for kind in KIND_NAMES
              if kind != "check" and any(e.kind == kind for e in every)]
    return (
        f"The book has {len(every)} exercises. {checked} of them (*write and check*) have an automatic check from "
        "`mha.exercises`, which runs your function on seeded inputs and says what differs from the reference; "
        f"the other {len(every) - checked} ({', '.join(others)}) are marked on their reasoning, with a model answer "
        "or a starting point. Every exercise has its solution in a dropdown, and the {doc}`exercise_index` lists "
        "them all with their time, beside each section's reading time. Instructors: see {doc}`instructors`."
    )


def home_page(text: str) -> str:
    """``text`` (chapters/index.md) with its marked paragraph rewritten; ValueError if the markers are missing."""
    if not HOME_PARAGRAPH.search(text):
        raise ValueError(f"{HOME.relative_to(ROOT)} has lost the comment lines that mark its exercise paragraph")
    return HOME_PARAGRAPH.sub(lambda match: match[1] + home_paragraph() + match[2], text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page is out of date")
    args = parser.parse_args()
    pages = {PAGE: render(), HOME: home_page(HOME.read_text())}
    if args.check:
        stale = [path for path, text in pages.items() if path.read_text() != text]
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run python -m scripts.exercise_index")
        if not stale:
            print(f"{PAGE.relative_to(ROOT)} and {HOME.relative_to(ROOT)} are up to date")
        return 1 if stale else 0
    for path, text in pages.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
