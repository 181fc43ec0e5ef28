"""The exercises marked by hand (scripts/written_answers.py, scripts/student_edition.py): every prediction,
explanation and investigation has a rubric whose points add up; the student edition clears each prediction's
measurement and refuses to run it without a prediction; each such exercise gets an answer cell as an otter manual
question, which otter's own filter keeps for the PDF and the script collects, prediction included."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import load_script

from mha.exercises.checking import PredictionMissing, require_prediction

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
ATTENTION = ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb"

written = load_script("written_answers")
edition = load_script("student_edition")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_marked_by_hand_has_a_rubric_whose_points_add_up(path):
    book = json.loads(path.read_text())
    by_hand = [e.label for e in edition.exercises(book) if e.kind in ("predict", "explain", "investigate")]
    questions = written.manual_questions(book)  # raises for a missing rubric or one whose items do not add up
    assert [q["label"] for q in questions] == by_hand
    for question in questions:
        items = re.findall(r"^- (\d+) points?: ", question["rubric"], re.M)
        assert len(items) >= 3 and sum(map(int, items)) == question["points"], question


def test_a_rubric_whose_items_do_not_add_up_is_refused():
    assert written.rubric_of("**Rubric** (3 points):\n\n- 1 point: a.\n- 2 points: b.\n") == (
        3, "- 1 point: a.\n- 2 points: b.")
    with pytest.raises(ValueError, match="give 2"):
        written.rubric_of("**Rubric** (3 points):\n\n- 1 point: a.\n- 1 point: b.\n")
    assert written.rubric_of("A model answer, and no rubric.") is None


def test_a_measurement_refuses_to_run_until_a_prediction_is_entered():
    for missing in (None, ..., "", "  "):
        with pytest.raises(PredictionMissing, match="No prediction yet: set my_prediction"):
            require_prediction(missing)
    require_prediction(0.25)
    require_prediction(0)  # zero is a prediction
    assert PredictionMissing("✗ No prediction yet")._render_traceback_() == ["✗ No prediction yet"]


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    edition.write_edition(out, [ATTENTION])
    return out / ATTENTION.relative_to(ROOT)


def test_the_student_edition_clears_the_measurement_and_guards_it(student):
    notebook = json.loads(student.read_text())
    guarded = [c for c in notebook["cells"] if "require_prediction(my_prediction)" in "".join(c["source"])]
    assert len(guarded) == 1 and not guarded[0]["outputs"] and guarded[0]["execution_count"] is None
    assert "raises-exception" in guarded[0]["metadata"]["tags"]
    outputs = json.dumps([cell.get("outputs", []) for cell in notebook["cells"]])
    assert "measured at d_k = 4096" not in outputs  # the book's stored answer is gone
    guard = "".join(guarded[0]["source"]).split("\n\n")[0]  # the import and the call, run as the kernel would
    with pytest.raises(PredictionMissing):
        exec(guard, {"my_prediction": None})
    exec(guard, {"my_prediction": 0.3})


def test_otters_filter_keeps_the_answers_and_nothing_else(student):
    from otter.export.exporters.via_html import PDFViaHTMLExporter

    book = json.loads(ATTENTION.read_text())
    kept = PDFViaHTMLExporter.load_notebook(str(student), filtering=True, pagebreaks=True)
    text = "\n".join(cell.source for cell in kept.cells)
    questions = written.manual_questions(book)
    assert len(questions) == 3 and all(f"`{q['label']}`" in text for q in questions)
    assert text.count("#newpage") == len(questions)  # otter's page break after each
    assert "my_prediction = None" in text and "**Exercise:" not in text and "<details>" not in text
    assert "Rubric" not in text and "def my_softmax" not in text


@pytest.mark.browser
def test_written_answers_are_collected_and_exported(student, tmp_path):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    notebook = json.loads(student.read_text())
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if source.startswith("my_prediction = None"):
            cell["source"] = "my_prediction = 0.3  # the scaled scores keep unit spread\n"
        elif source.startswith(edition.ANSWER_PROMPT) and "answered" not in locals():
            cell["source"] = "The spread of $q \\cdot k$ grows like $\\sqrt{d_k}$, the square root of the width.\n"
            answered = True
    (submissions / "ada.ipynb").write_text(json.dumps(notebook))
    (submissions / "bob.ipynb").write_text("a PDF, not a notebook")
    shutil.copy(student, submissions / "cy.ipynb")
    chromium = shutil.which("chromium")
    rows = written.collect(submissions, tmp_path / "out", pdf=chromium is not None)
    with (tmp_path / "out" / "answers.csv").open(encoding="utf-8") as handle:
        assert list(csv.DictReader(handle)) == rows
    answers = {(row["student"], row["exercise"]): row["answer"] for row in rows}
    assert answers[("ada", "ex-predict-scaled-4096")] == "my_prediction = 0.3  # the scaled scores keep unit spread"
    assert answers[("ada", "ex-explain-sqrt-scaling")].startswith("The spread of $q \\cdot k$")
    assert answers[("ada", "ex-investigate-trained-spread")] == ""  # nothing written: nothing recorded
    assert answers[("cy", "ex-explain-sqrt-scaling")] == ""
    assert "not a Jupyter notebook" in answers[("bob", "")]
    if chromium is not None:
        pdf = (tmp_path / "out" / "ada.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type /Page\b(?!s)", pdf)) >= 3


# an element that loads a file from another machine: a script, a stylesheet, an image, a frame or a module import
OUTSIDE = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//"""
                     r"""|\bimport\b[^;]*["'](?:https?:)?//""", re.IGNORECASE)


@pytest.mark.browser
def test_the_printed_page_loads_nothing_from_outside_and_typesets_the_formulas(student, tmp_path):
    """nbconvert's template loads jQuery, require.js, MathJax 2 and mermaid from a CDN; the page printed holds no
    script but the book's own MathJax, which typesets the answer's formulas (read from the page Chromium drew)."""
    notebook = json.loads(student.read_text())
    for cell in notebook["cells"]:
        if "".join(cell["source"]).startswith(edition.ANSWER_PROMPT):
            cell["source"] = "The spread grows like $\\sqrt{d_k}$.\n"
            break
    submission = tmp_path / "ada.ipynb"
    submission.write_text(json.dumps(notebook))
    page = written.printable_html(submission)
    assert OUTSIDE.search('<script type="module">import m from "https://cdn.example/m.mjs";</script>')
    assert not OUTSIDE.search(page), OUTSIDE.search(page).group(0)
    assert re.findall(r"<script\b[^>]*\bsrc=[^>]*>", page) == \
        ([f"<script src='{written.MATHJAX.as_uri()}'>"] if written.MATHJAX.exists() else [])
    chromium = shutil.which("chromium")
    if chromium is None or not written.MATHJAX.exists():
        return  # without Chromium there is no PDF; without the book's MathJax (npm ci) the formulas stay as TeX
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    drawn = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                            f"--user-data-dir={tmp_path}/profile", "--dump-dom", (tmp_path / "page.html").as_uri()],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    body = drawn.split("<body", 1)[1]
    assert "<mjx-container" in body and "\\sqrt{d_k}" not in body, "the answer's formula was not typeset"


def test_each_autograder_gets_its_outline_of_points_and_rubrics():
    outline = written.outline(json.loads(ATTENTION.read_text()), "1_attention_from_scratch")
    assert "| 2 | Why the square root? (`ex-explain-sqrt-scaling`) | Explain in words | 5 |" in outline
    assert "In all 14 points." in outline and outline.count("- 1 point:") >= 10
