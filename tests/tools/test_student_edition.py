"""The student edition (``make student``, scripts/student_edition.py): every solution removed, whatever the
exercise's kind, nothing of it left behind (rubrics included), every exercise still there (a "Write and check" one
with its stub and check, a "Predict, then check" one with its prediction cell), and an answer key with every
solution.

Every check answers a stub with its "Not attempted yet" message (checked live here, and stored in the student
edition) and passes on the key's solution (the book's stored "✓", which nbval recomputes). ``.ci/run`` executes the
student edition itself under nbval, after the main suite.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest
from conftest import load_script

from mha.exercises.grading import modules_of_checks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "chapters").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)


edition = load_script("student_edition")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    counts = edition.write_edition(out)
    assert sorted(counts) == NOTEBOOKS
    return out


def cell_texts(notebook: dict) -> str:
    """Everything a student could read in a notebook: every cell's source and stored output."""
    return json.dumps(notebook, ensure_ascii=False)


def solution_and_other_lines(book: dict) -> tuple[set[str], set[str]]:
    """The lines inside the book's solution blocks and those outside, found here independently of the script: a
    block runs from a solution-start fence to the next solution-end fence, across cells."""
    inside, solution, other = False, set(), set()
    for cell in book["cells"]:
        for piece in re.split(r"(```\{solution-(?:start|end)\}[^`]*```)", "".join(cell["source"])):
            if piece.startswith("```{solution-"):
                inside = piece.startswith("```{solution-start}")
                continue
            (solution if inside else other).update(line.strip() for line in piece.splitlines()
                                                   if len(line.strip()) >= 12)
    return solution, other


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_no_solution_line_leaks_into_the_student_edition(written, path):
    book = json.loads((ROOT / path).read_text())
    student = json.loads((written / path).read_text())
    solution, other = solution_and_other_lines(book)
    secret = {line for line in solution - other if not line.startswith(("#", "```", ":"))}
    assert len(secret) >= 3, f"{path}: too few solution lines found to test ({len(secret)})"
    readable = cell_texts(student)
    leaked = [line for line in secret if json.dumps(line, ensure_ascii=False)[1:-1] in readable]
    assert not leaked, f"{path}: solution lines in the student edition: {leaked[:5]}"
    assert "solution-start" not in readable and "solution-end" not in readable


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_exercise_keeps_its_statement_stub_and_not_attempted_check(written, path):
    """Every exercise keeps its statement (and hint). A "Write and check" exercise keeps its stub, whose check says
    "Not attempted yet", and its solution passes; the other kinds are recognised by their kind: a prediction keeps
    its ``my_`` cell and the measurement below it (cleared, refusing to run without a prediction), and an explanation
    or investigation keeps its statement; each of the three gets a place for its answer, as an otter manual
    question."""
    book = json.loads((ROOT / path).read_text())
    student = json.loads((written / path).read_text())
    _, solutions = edition.split_notebook(book)
    exercises = {exercise.label: exercise for exercise in edition.exercises(book)}
    assert [s.label for s in solutions] == list(exercises), f"{path}: every exercise has one solution, in order"
    assert all(exercise.kind in edition.KINDS.values() for exercise in exercises.values()
               if "background" not in path), f"{path}: an exercise without its kind line"
    text = cell_texts(student)
    stubs = [c for c in student["cells"] if c["cell_type"] == "code" and "NotImplementedError" in "".join(c["source"])]
    checked = [label for label, exercise in exercises.items() if exercise.kind == "check"]
    assert len(stubs) == len(checked), f"{path}: {len(stubs)} stubs for {len(checked)} check-kind exercises"
    unrendered, _ = edition.split_notebook(book)  # the same cells before their markdown is made readable
    unrendered = edition.with_answer_cells(unrendered, edition.exercises(book))
    assert [e.label for e in edition.exercises(unrendered)] == list(exercises), f"{path}: an exercise is gone"
    assert re.findall(r'<a id=\\"(ex-[\w-]+)\\"></a>', text) == list(exercises), f"{path}: an exercise is gone"
    for solution in solutions:
        exercise = exercises[solution.label]
        title = json.dumps(f"**Exercise: {exercise.title}**", ensure_ascii=False)[1:-1]
        assert title in text, f"{path}: the statement of {solution.label} is gone"
        if exercise.kind == "check":
            passed = [v for v in solution.verdicts if v.startswith("✓")]
            assert passed and not any("✗" in v for v in solution.verdicts), \
                f"{path}: the key's solution to {solution.label} does not pass its check: {solution.verdicts}"
        elif exercise.kind == "predict":
            cells = [c for c in student["cells"] if c["cell_type"] == "code"
                     and re.search(rf"^{exercise.function or 'my_prediction'}\w* = ", "".join(c["source"]), re.M)]
            assert cells and exercise.function, f"{path}: {solution.label} keeps no cell for the prediction"
            measuring = student["cells"][student["cells"].index(cells[0]) + 2]  # after the question's end
            assert measuring["cell_type"] == "code" and not measuring["outputs"], f"{path}: a measurement shown"
            assert f"require_prediction({exercise.function})" in "".join(measuring["source"])
            assert "raises-exception" in measuring["metadata"]["tags"]
        else:  # explain, investigate: the rubric or starting point is in the answer key only
            assert solution.text, f"{path}: the solution of {solution.label} ({exercise.kind}) says nothing"
        if exercise.kind != "check":
            assert f"(`{solution.label}`, marked by hand" in text, f"{path}: no answer cell for {solution.label}"
    for stub in stubs:
        said = edition._output_text(stub)
        assert said.startswith("✗ Not attempted yet"), f"{path}: a stub's check says {said!r}"
    # nothing but the solutions went: every other cell is there, in order, code cells and outputs unchanged
    assert [c["cell_type"] for c in student["cells"]] == [c["cell_type"] for c in unrendered["cells"]]
    assert [c for c in student["cells"] if c["cell_type"] == "code"] == \
        [c for c in unrendered["cells"] if c["cell_type"] == "code"]
    book_cells = ["".join(c["source"]) for c in book["cells"]]
    kept = ["".join(c["source"]) for c in unrendered["cells"]]
    untouched = [k for k in kept if k in book_cells]
    assert untouched == [b for b in book_cells if b in untouched]


def test_the_answer_key_holds_every_solution_and_what_its_check_said(written):
    for path in NOTEBOOKS:
        key = (written / "answer_key" / Path(path).with_suffix(".md")).read_text()
        _, solutions = edition.split_notebook(json.loads((ROOT / path).read_text()))
        for solution in solutions:
            assert f"`{solution.label}`" in key
            for code in solution.code:
                assert code in key
        assert key.count("**The check says:**") == sum(bool(s.verdicts) for s in solutions)
        assert "{eval}`" not in key, f"{path}: the answer key shows a glued number's role, not the number"
        kinds = {e.label: e.kind for e in edition.exercises(json.loads((ROOT / path).read_text()))}
        assert all(s.verdicts for s in solutions if kinds[s.label] == "check"), path


def test_every_check_answers_its_stub_with_not_attempted_yet():
    """Live, not stored: each check the notebooks call, given a stub that raises NotImplementedError."""
    called = set()
    for path in NOTEBOOKS:
        for cell in json.loads((ROOT / path).read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "NotImplementedError" in source:
                called |= set(re.findall(r"^(check_\w+)\((my_\w+)", source, re.M))
    assert len(called) >= 35, called

    def stub(*args, **kwargs):
        raise NotImplementedError

    modules = modules_of_checks()
    for check, name in sorted(called):
        stub.__name__ = name
        result = getattr(importlib.import_module(f"mha.exercises.{modules[check]}"), check)(stub)
        assert not result.passed, check
        assert str(result).startswith("✗ Not attempted yet") and name in str(result), f"{check}: {result}"


@pytest.mark.slow
def test_the_student_edition_reads_outside_jupyterlab(tmp_path):
    """Colab, plain Jupyter and nbconvert know no MyST: the student edition shows each glued number as the text the
    book stored for it, each exercise as plain markdown and each hint folded in an HTML <details>."""
    import nbformat
    from nbconvert import HTMLExporter

    path = ROOT / "chapters" / "3_head_roles" / "1_tour_of_heads.ipynb"
    edition.write_edition(tmp_path, [path])
    book = json.loads(path.read_text())
    student = json.loads((tmp_path / path.relative_to(ROOT)).read_text())
    markdown = ["".join(c["source"]) for c in student["cells"] if c["cell_type"] == "markdown"]
    for text in markdown:
        assert "{eval}`" not in text and "{doc}`" not in text and "{ref}`" not in text, text[:200]
        assert "```{exercise" not in text and "```{hint" not in text, text[:200]
    everything = "\n".join(markdown)
    exercises = edition.exercises(book)
    hints = sum(exercise.hints for exercise in exercises)
    assert hints >= 14 and everything.count("<details>") == everything.count("</details>") == hints
    folded = re.findall(r"<details>\n<summary>(Hint \d of \d, [a-z ]+)</summary>\n\n(.+?)\n\n</details>", everything,
                        re.S)
    assert len(folded) == hints and all(body.strip() and "**Hint" not in body for _, body in folded)
    assert [f"**Exercise: {e.title}**" in everything for e in exercises] == [True] * len(exercises)
    # the numbers are the texts the book stored for JupyterLab to show
    stored = [(entry["expression"], entry["result"]["data"]["text/plain"]) for cell in book["cells"]
              for entry in cell.get("metadata", {}).get("user_expressions", [])]
    assert len(stored) >= 20
    for expression, plain in stored[:40]:
        assert ast.literal_eval(plain) in everything, expression  # text/plain holds a Python string literal
    # and nbconvert's HTML shows them: a fold per hint, with its markdown rendered inside
    html, _ = HTMLExporter(template_name="basic").from_notebook_node(
        nbformat.reads(json.dumps(student), as_version=4))
    assert html.count("<details>") == hints and "{eval}" not in html and "```{" not in html
    assert re.search(r"<summary>Hint 1 of \d, a nudge</summary>\s*<p>", html)
