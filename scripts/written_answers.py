"""The answers marked by hand: predictions, explanations and investigations (instructors' page, "Written answers").

The student edition gives each of them a place in the notebook, as an otter manual question (between
``<!-- BEGIN QUESTION -->`` and ``<!-- END QUESTION -->``; scripts/student_edition.py, ``with_answer_cells``); the
book's solution holds its model answer and a rubric with points. This script

- collects every submission's written answers into one CSV (``student``, ``exercise``, ``answer``), so that a
  prediction is on record beside the code it came with;
- with ``--pdf``, writes each submission's manual questions as a PDF for Gradescope, one question a page, by otter's
  own filter (what ``otter export --filtering --pagebreaks`` keeps), printed by the Chromium on this machine;
- with ``--outline <notebook>``, prints the manual questions of a section or week with their points and rubrics:
  the outline of a Gradescope assignment graded by hand. scripts/grading.py writes it beside each autograder as
  ``manual_questions.md`` (instructors only: no student file holds a rubric).

    python -m scripts.written_answers submissions/ --out written/ [--pdf]
    python -m scripts.written_answers --outline chapters/1_mechanism/1_attention_from_scratch.ipynb
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.written_answers")
from scripts import student_edition  # noqa: E402

RUBRIC = re.compile(r"^\*\*Rubric\*\* \((?P<points>\d+) points?\):\s*\n(?P<items>(?:\s*\n|- .*\n?|  .*\n?)+)", re.M)
ITEM = re.compile(r"^- (?P<points>\d+) points?: ", re.M)
BY_HAND = ("predict", "explain", "investigate")


def rubric_of(text: str) -> tuple[int, str] | None:
    """A solution's rubric: its points and its items (markdown), or None. ValueError when the items' points do not
    add up to the rubric's."""
    found = RUBRIC.search(text)
    if found is None:
        return None
    items = found["items"].strip()
    if sum(int(points) for points in ITEM.findall(items)) != int(found["points"]):
        raise ValueError(f"a rubric of {found['points']} points whose items give "
                         f"{sum(int(p) for p in ITEM.findall(items))}: {items[:200]}")
    return int(found["points"]), items


def manual_questions(book: dict) -> list[dict]:
    """Each exercise of ``book`` marked by hand: label, title, kind, points and rubric. ValueError for one without a
    rubric: write one in its solution, as ``**Rubric** (N points):`` and one ``- k point(s): ...`` line per item."""
    kinds = {exercise.label: exercise for exercise in student_edition.exercises(book)}
    _, solutions = student_edition.split_notebook(book)
    questions = []
    for solution in solutions:
        exercise = kinds.get(solution.label)
        if exercise is None or exercise.kind not in BY_HAND:
            continue
        rubric = rubric_of("\n\n".join(solution.text) + "\n")
        if rubric is None:
            raise ValueError(f"{solution.label} ({exercise.kind}) has no rubric in its solution: add "
                             "'**Rubric** (N points):' with one '- k point(s): ...' line per item")
        questions.append({"label": solution.label, "title": exercise.title, "kind": exercise.kind,
                          "points": rubric[0], "rubric": rubric[1]})
    return questions


def outline(book: dict, name: str) -> str:
    """The manual questions of ``book`` as markdown, for the instructor: a table of points, then each rubric."""
    questions = manual_questions(book)
    lines = [f"# Marked by hand: {name}", "",
             "Grade these from the submission's PDF (scripts/written_answers.py --pdf), one question a page, in this "
             "order. Not for students: the rubrics are the answer key's.", "",
             "| Question | Exercise | Kind | Points |", "| --- | --- | --- | --- |"]
    lines += [f"| {number} | {q['title']} (`{q['label']}`) | {student_edition_kind(q['kind'])} | {q['points']} |"
              for number, q in enumerate(questions, 1)]
    lines += ["", f"In all {sum(q['points'] for q in questions)} points.", ""]
    for number, q in enumerate(questions, 1):
        lines += [f"## {number}. {q['title']} ({q['points']} points)", "", q["rubric"], ""]
    return "\n".join(lines)


def student_edition_kind(kind: str) -> str:
    return next(name for name, short in student_edition.KINDS.items() if short == kind)


def answers(notebook: dict) -> dict[str, str]:
    """Each manual question's answer in a submitted notebook (label -> the text and code between its heading and
    the question's end), as the learner left it."""
    found, label, parts = {}, None, []
    for cell in notebook.get("cells", []):
        text = "".join(cell.get("source", ""))
        heading = student_edition.ANSWER_HEADING.search(text)
        if student_edition.BEGIN_QUESTION in text and heading:
            label, parts = heading["label"], []
            continue
        if label and student_edition.END_QUESTION in text:
            found[label] = "\n\n".join(part for part in parts if part)
            label = None
        elif label:
            for placeholder in (student_edition.ANSWER_PROMPT, student_edition.WORK_PROMPT):
                text = text.replace(placeholder, "")
            parts.append(text.strip())
    return found


# Every script of nbconvert's template: jQuery, require.js, MathJax 2 and mermaid, loaded from a CDN, and their
# set-up; none is needed to print, and the page must not reach outside this machine
SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.IGNORECASE | re.DOTALL)
# The book's own MathJax (npm, package-lock.json; `make book` installs it), which typesets the answers' formulas
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5" / "tex-svg.js"
MATHJAX_CONFIG = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']]}, "
                  "svg: {fontCache: 'global'}};</script>")


def printable_html(notebook: Path) -> str:
    """The manual questions of ``notebook`` as one HTML page, one question a page: otter's filter and page breaks,
    its HTML template, without its scripts. Formulas are typeset by the book's MathJax where
    npm has installed it, and otherwise stay as TeX."""
    import nbconvert
    from otter.export.exporters.base_exporter import TEMPLATE_DIR
    from otter.export.exporters.via_html import PDFViaHTMLExporter

    filtered = PDFViaHTMLExporter.load_notebook(str(notebook), filtering=True, pagebreaks=True)
    nbconvert.TemplateExporter.extra_template_basedirs = [str(TEMPLATE_DIR)]
    html, _ = nbconvert.HTMLExporter(template_name="via_html").from_notebook_node(filtered)
    html = SCRIPT.sub("", html)
    if MATHJAX.exists():
        html = html.replace("</head>", f"{MATHJAX_CONFIG}<script src='{MATHJAX.as_uri()}'></script></head>", 1)
    return html


def export_pdf(notebook: Path, pdf: Path) -> Path:
    """:func:`printable_html` of ``notebook`` printed as a PDF by Chromium (found on PATH; ``apt-get install
    chromium``), once its formulas are typeset (Chromium's virtual time lets the page's scripts finish first)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("--pdf prints with Chromium, which is not on PATH: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="written-") as work:
        page = Path(work) / "answers.html"
        page.write_text(printable_html(notebook), encoding="utf-8")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                        "--virtual-time-budget=10000", f"--user-data-dir={work}/profile",
                        f"--print-to-pdf={pdf.resolve()}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
    return pdf


def collect(submissions: Path, out: Path, pdf: bool = False) -> list[dict]:
    """Write ``out``/answers.csv with every written answer of the notebooks in ``submissions`` (and, with ``pdf``,
    ``out``/<student>.pdf); its rows. A file that is not a notebook gets one row saying so."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in sorted(p for p in submissions.iterdir() if not p.name.startswith(".")):
        try:
            found = answers(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError) as error:
            rows.append({"student": path.stem, "exercise": "",
                         "answer": f"✗ {path.name} is not a Jupyter notebook ({type(error).__name__})"})
            continue
        rows += [{"student": path.stem, "exercise": label, "answer": text} for label, text in found.items()]
        if pdf and found:
            export_pdf(path, out / f"{path.stem}.pdf")
    with (out / "answers.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=("student", "exercise", "answer"))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, nargs="?", help="a folder with one submitted notebook per student")
    parser.add_argument("--out", type=Path, default=Path("written"), help="where answers.csv and the PDFs go")
    parser.add_argument("--pdf", action="store_true", help="also one PDF of its manual questions per submission")
    parser.add_argument("--outline", type=Path, help="print a book notebook's manual questions, points and rubrics")
    args = parser.parse_args(argv)
    if args.outline:
        print(outline(json.loads(args.outline.read_text()), args.outline.stem))
        return 0
    if args.submissions is None or not args.submissions.is_dir():
        parser.error("pass the folder that holds the submitted notebooks (or --outline <notebook>)")
    rows = collect(args.submissions, args.out, args.pdf)
    students = len({row["student"] for row in rows})
    print(f"{students} submissions, {len(rows)} written answers: {args.out / 'answers.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
