"""The exercise index (chapters/exercise_index.md) is generated from the notebooks by
scripts/exercise_index.py, never kept by hand: the committed page is what the script writes, and every exercise of
chapters 1-4 declares what the index lists (a title, its kind, difficulty and time, and a hint apart from its
solution)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]


index = load_script("exercise_index")
BOOK_NOTEBOOKS = sorted(p for chapter in ("1_mechanism", "2_geometry", "3_head_roles", "4_caveats")
                        for p in (ROOT / "chapters" / chapter).glob("*.ipynb"))


def test_the_committed_index_is_what_the_script_writes():
    assert index.PAGE.read_text() == index.render(), \
        "chapters/exercise_index.md is out of date: run python -m scripts.exercise_index and commit the page"


def test_the_home_page_counts_the_exercises_and_their_automatic_checks_from_the_notebooks():
    home = index.HOME.read_text()
    assert home == index.home_page(home), "chapters/index.md is out of date: run python -m scripts.exercise_index"
    every = [e for _, _, found in index.collect() for e in found]
    checked = sum(e.kind == "check" for e in every)
    assert f"The book has {len(every)} exercises. {checked} of them (*write and check*) have an automatic check" in home
    assert 0 < checked < len(every) and "Every exercise has an automatic check" not in home
    try:
        index.home_page(home.replace("<!-- End of the written paragraph. -->", ""))
    except ValueError as error:
        assert "lost the comment lines" in str(error)
    else:
        raise AssertionError("a home page without its markers must be refused, not left stale")


def test_the_pages_for_instructors_name_only_exercises_that_exist():
    exercises = {e.label: (name, e.kind) for _, name, found in index.collect() for e in found}
    for page in ("instructors.md", "index.md"):
        text = (ROOT / "chapters" / page).read_text()
        named = re.findall(r"\{ref\}`(?:[^`<]*<)?(ex-[\w-]+)>?`", text)
        assert [label for label in named if label not in exercises] == [], page
    tracks = (ROOT / "chapters" / "instructors.md").read_text()
    assert "head-count sweep" not in tracks.split("## Suggested assignments by track")[1].split("\n## ")[0]
    investigations = [label for label, (name, kind) in exercises.items()
                      if kind == "investigate" and name in ("3.5", "3.6", "3.7")]
    if "these sections have no open investigation yet" in tracks:
        assert not investigations, f"the Training dynamics track should assign {investigations}"


def test_the_index_is_in_the_table_of_contents_and_lists_every_exercise():
    assert "file: chapters/exercise_index" in (ROOT / "_toc.yml").read_text()
    page = index.PAGE.read_text()
    labels = [e.label for _, _, found in index.collect() for e in found]
    notebooks = sorted((ROOT / "chapters").rglob("*.ipynb"))
    in_notebooks = [label for path in notebooks for label in re.findall(
        r"```\{exercise\}[^\n]*\n:label: ([\w-]+)", "".join(
            "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"))]
    assert sorted(labels) == sorted(in_notebooks), "an exercise is missing from the index, or a notebook from _toc.yml"
    missing = [label for label in labels if f"<{label}>`" not in page and f"{{ref}}`{label}`" not in page]
    assert not missing, missing


def test_every_exercise_of_the_book_declares_title_kind_difficulty_time_and_hint():
    for path in BOOK_NOTEBOOKS:
        for exercise in index.student_edition.exercises(json.loads(path.read_text())):
            where = f"{path.name}: {exercise.label}"
            assert exercise.title, f"{where} has no title (```{{exercise}} Title)"
            assert exercise.kind in index.KIND_NAMES, (
                f"{where}: no header line such as **Write and check** · ★ · 10 min · core"
            )
            assert exercise.difficulty in (1, 2, 3) and 0 < exercise.minutes <= 120, where
            assert exercise.importance in index.student_edition.IMPORTANCE, f"{where}: no importance (core, ...)"
            assert exercise.has_hint, f"{where} has no ```{{hint}} with :class: dropdown after its statement"
            assert (exercise.check is not None) == (exercise.kind == "check"), \
                f"{where}: a check-kind exercise calls a check on its stub, and no other kind has a stub"


# Every notebook of the book, the background pages included, has tiered hints.
BACKGROUND_NOTEBOOKS = sorted((ROOT / "chapters" / "background").glob("*.ipynb"))
TIERED_NOTEBOOKS = BOOK_NOTEBOOKS + BACKGROUND_NOTEBOOKS
LEVEL_NAMES = {2: ["a nudge", "nearly the answer"], 3: ["a nudge", "a step further", "nearly the answer"]}


def _markdown(notebook: dict) -> str:
    return "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")


def _hints_of(text: str, label: str) -> str:
    """The markdown from an exercise's first hint to the start of its solution: its hints."""
    start = text.index("```{hint}", text.index(f":label: {label}\n"))
    return text[start:text.index("{solution-start}", start)]


def test_every_exercise_has_two_or_three_hints_labelled_in_order():
    assert len(TIERED_NOTEBOOKS) >= 15
    for path in TIERED_NOTEBOOKS:
        notebook = json.loads(path.read_text())
        text = _markdown(notebook)
        for exercise in index.student_edition.exercises(notebook):
            assert exercise.hints in (2, 3), f"{path.name}: {exercise.label} has {exercise.hints} hints"
            levels = re.findall(r"\*\*Hint (\d) of (\d), ([a-z ]+)\.\*\*", _hints_of(text, exercise.label))
            names = LEVEL_NAMES[exercise.hints]
            assert levels == [(str(i), str(exercise.hints), name) for i, name in enumerate(names, 1)], exercise.label


def _given_away(hints: str, code: str) -> list[str]:
    """The inline code of ``hints`` that is a whole expression of the solution's ``code`` (spaces ignored)."""
    solution = re.sub(r"\s", "", code)
    return [span for span in re.findall(r"`([^`]+)`", hints) if len(re.sub(r"\s", "", span)) >= 20
            and re.sub(r"\s", "", span) in solution]


def test_no_hint_writes_out_an_expression_of_its_solution():
    assert _given_away("`np.argwhere(scores > threshold)` lists them", "return np.argwhere(scores>threshold)")
    assert not _given_away("a function lists the positions of the True entries", "return np.argwhere(scores>threshold)")
    for path in TIERED_NOTEBOOKS:
        notebook = json.loads(path.read_text())
        text = _markdown(notebook)
        for solution in index.student_edition.split_notebook(notebook)[1]:
            given = _given_away(_hints_of(text, solution.label), "\n".join(solution.code))
            assert not given, f"{path.name}: a hint of {solution.label} writes out its solution: {given}"


def test_the_index_counts_the_exercises_with_tiered_hints():
    every = [e for _, _, found in index.collect() for e in found]
    tiered = sum(e.hints >= 2 for e in every)
    assert tiered >= 18 and f"; {tiered} of them have two or three hints" in index.PAGE.read_text()
    one = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": (
        "```{exercise} A\n:label: ex-a\n\n**Write and check** · ★ · 5 min · core\n```\n\n"
        "```{hint}\n:class: dropdown\nFirst.\n```\n\n```{hint}\n:class: dropdown\nSecond.\n```\n\n"
        "```{solution-start} ex-a\n:class: dropdown\n```\n```{hint}\n:class: dropdown\nNot a hint of ex-a.\n```\n"
        "```{exercise} B\n:label: ex-b\n\n**Explain in words** · ★ · 5 min · optional\n```\n\n"
        "```{hint}\n:class: dropdown\nOnly one.\n```\n")}]}
    assert [e.hints for e in index.student_edition.exercises(one)] == [2, 1]


def test_every_chapter_has_each_kind_of_exercise():
    for chapter in ("1_mechanism", "2_geometry", "3_head_roles", "4_caveats"):
        kinds = {e.kind for path in (ROOT / "chapters" / chapter).glob("*.ipynb")
                 for e in index.student_edition.exercises(json.loads(path.read_text()))}
        assert kinds == set(index.KIND_NAMES), f"{chapter} has exercises of the kinds {sorted(kinds)}"


def test_time_per_section_adds_up():
    page = index.PAGE.read_text()
    total = sum(e.minutes or 0 for _, _, found in index.collect() for e in found)
    hours, minutes = divmod(total, 60)
    assert "| **All** |" in page and (f"{hours} h {minutes:02d} min" if hours else f"{minutes} min") in page


def test_reading_time_counts_the_prose_a_student_reads_at_the_stated_speed():
    words = " ".join(["attention"] * 399) + " {eval}`glue.text(\"n_heads\")`"  # 400 words, one a glued number
    one = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": words + "\n\n```{exercise} A\n:label: ex-a\n\n"
         "**Write and check** · ★ · 5 min · core\n```\n\n```{hint}\n:class: dropdown\n" + "hint " * 500 + "\n```\n"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1 " * 300},
        {"cell_type": "markdown", "metadata": {}, "source": "```{solution-start} ex-a\n:class: dropdown\n```\n"
         + "solution " * 700 + "\n```{solution-end}\n```\n"}]}
    assert index.prose_words(one) == 400 + len("A Write and check 5 min core".split())
    assert index.WORDS_PER_MINUTE == 200 and index.reading_minutes(one) == 2
    page = index.PAGE.read_text()
    assert f"at {index.WORDS_PER_MINUTE} words a minute" in page
    guide = " ".join((ROOT / "chapters" / "instructors.md").read_text().split())
    assert f"at {index.WORDS_PER_MINUTE} words a minute" in guide
    reading = index.reading_times()
    for file, name, found in index.collect():
        if found:
            row = next(line for line in page.splitlines() if line.startswith(f"| {name}: "))
            assert row.split(" | ")[4] == index._minutes(reading[file]), row
    assert sum(reading.values()) > 60  # the book's prose takes hours to read, not minutes


def test_the_learning_objectives_table_has_a_row_for_every_section_background_included():
    guide = (ROOT / "chapters" / "instructors.md").read_text()
    table = guide.split("## Learning objectives")[1].split("\n## ")[0]
    rows = re.findall(r"^\| \{doc\}`([^`]+)` \| (.+) \|$", table, re.M)
    wanted = [str(Path(file).relative_to("chapters")) for file, _ in index.sections()]
    assert sorted(doc for doc, _ in rows) == sorted(wanted)
    for doc, objectives in rows:
        notebook = json.loads((ROOT / "chapters" / f"{doc}.ipynb").read_text())
        assert "**After this section you will be able to**" in "".join(notebook["cells"][0]["source"]), doc
        assert objectives.strip(" |"), f"{doc}: say what a learner will be able to do"


def test_six_exercises_of_chapters_3_and_4_run_the_real_model_or_train_one():
    """The index lists the exercises whose checks hand the learner's code the encoder or the trainer; at least six
    are in chapters 3 and 4, each a graded check whose tools are the pretrained model's or the lab's modules."""
    from mha.exercises.grading import modules_of_checks

    found = index.exercises_on_the_model(index.collect(), modules_of_checks())
    later = [(section, exercise) for section, exercise, tools in found if section[:1] in "34"]
    assert len(later) >= 6, [exercise.label for _, exercise in later]
    for _, exercise, tools in found:
        assert exercise.kind == "check" and exercise.check, exercise.label
        assert tools and all(tool.startswith(("mha.pretrained.", "mha.lab.")) for tool in tools), exercise.label
    page = (ROOT / "chapters" / "exercise_index.md").read_text()
    assert all(f"<{exercise.label}>`" in page.split("## On the real model and real training")[1].split("## Every")[0]
               for _, exercise, _ in found)
