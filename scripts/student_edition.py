"""Write the student edition of the book's notebooks, and a separate answer key (``make student``).

Every exercise of the book opens with a markdown cell holding sphinx-exercise's directive, its title, its label and
a first line that says its kind, difficulty and time (:data:`HEADER`), followed by a hint in a dropdown:

    ```{exercise} Stable softmax
    :label: ex-stable-softmax

    **Write and check** · ★ · 10 min · core

    Write `my_softmax(scores)` ...
    ```

    ```{hint}
    :class: dropdown
    ...
    ```

Then come the learner's cells and, in ```` ```{solution-start} label ```` ... ```` ```{solution-end} ````, the worked
solution in markdown and code cells. What the learner's cells are depends on the kind (:data:`KINDS`):

- **Write and check** (``check``): a code cell with the stub (``raise NotImplementedError``) and the check, whose
  stored output is "✗ Not attempted yet"; the solution's own check passes ("✓ ...");
- **Predict, then check** (``predict``): a code cell where the learner writes ``my_prediction = ...`` before a
  cell below measures the answer with the package and sets it beside the prediction;
- **Explain in words** (``explain``): the learner answers in prose; the solution holds a model answer and a rubric;
- **Open investigation** (``investigate``): a question the book does not answer, with a suggested method; the
  solution holds a starting point and what to watch for.

The student edition is each notebook with every solution block removed, whatever the kind (so rubrics go only to
the answer key): the exercise, its hint, its stub or prediction cell and its check stay, with their stored outputs,
so it runs under nbval like the book (``.ci/run`` executes it). A prediction's measurement is the exception: its
stored output is cleared, and the cell refuses to run until a prediction is entered (:func:`guard_reveals`). Every
exercise marked by hand (a prediction, an explanation, an investigation) gets a place for its answer, as an otter
manual question (:func:`with_answer_cells`), which scripts/written_answers.py collects and exports to PDF. Its
markdown is then made readable outside JupyterLab (Colab, plain Jupyter, nbconvert's HTML), where MyST's roles and
directives show as raw text, by the conversion the reader edition shares (scripts/readable.py,
:func:`readable_markdown`): every ``{eval}`` role becomes the text it showed when the book was executed, every
exercise a bold title above its statement, every hint an HTML ``<details>`` fold, no ``(label)=`` target is left,
and ``{doc}`` and ``{ref}`` roles and relative links become links to the published website. The book's own
notebooks and the website keep the MyST.

The answer key is one markdown file per notebook: each exercise's title and statement, the solution's explanation
and code, and what the check said of it, its glued numbers written in as in the student edition.
``tests/tools/test_student_edition.py`` proves that no solution line leaks into the student edition.
scripts/exercise_index.py reads the same headers (:func:`exercises`) to write the exercise index.

    python -m scripts.student_edition [--out _build/student]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.student_edition")
from scripts import readable  # noqa: E402  (the markdown's conversion, shared with the reader edition)

EXERCISE_PARTS, LABEL = readable.EXERCISE_PARTS, readable.LABEL
readable_edition, readable_markdown = readable.readable_edition, readable.readable_markdown
shown_expressions, with_numbers = readable.shown_expressions, readable.with_numbers
_source, _set_source = readable._source, readable._set_source

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
SOLUTION_START = re.compile(r"```\{solution-start\}\s*(\S+)[^`]*?```", re.S)
SOLUTION_END = re.compile(r"```\{solution-end\}\s*```", re.S)
# The first line of every exercise's body: its kind, difficulty (one to three stars), time in minutes and importance
# (core: the syllabus's core path; recommended; optional: for those who want more).
KINDS = {"Write and check": "check", "Predict, then check": "predict", "Explain in words": "explain",
         "Open investigation": "investigate"}
HEADER = re.compile(r"^\*\*(?P<kind>" + "|".join(map(re.escape, KINDS)) + r")\*\* · (?P<stars>★{1,3}) · "
                    r"(?P<minutes>\d+) min · (?P<importance>core|recommended|optional)$", re.M)
IMPORTANCE = ("core", "recommended", "optional")
HINT = re.compile(r"```\{hint\}\s*\n:class: dropdown\n", re.S)
STUB_CHECK = re.compile(r"^(check_\w+)\((my_\w+)", re.M)
PREDICTION = re.compile(r"^(my_\w+)\s*=", re.M)  # where a "Predict, then check" exercise takes the prediction


@dataclass
class Exercise:
    """One exercise as its statement declares it: what scripts/exercise_index.py lists, and what grading reads."""

    label: str
    title: str
    kind: str | None  # "check", "predict", "explain", "investigate"; None where the header line is missing
    difficulty: int | None  # 1 to 3 stars
    minutes: int | None
    has_hint: bool
    importance: str | None = None  # "core", "recommended" or "optional" (IMPORTANCE); None where the header is missing
    hints: int = 0  # how many hint dropdowns follow the statement (tiers, from a nudge to nearly the answer)
    check: str | None = None  # the check its learner's cell calls, where it has one
    function: str | None = None  # the learner's function (check), or the variable that holds a prediction


def exercises(notebook: dict) -> list[Exercise]:
    """Every exercise of a notebook, in order, with its header and the check (if any) of its learner's cell: the
    first code cell after the statement that calls a check on a ``my_`` name, before the solution starts."""
    found: list[Exercise] = []
    open_exercise: Exercise | None = None
    for cell in notebook["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            if open_exercise is not None and SOLUTION_START.search(text):
                open_exercise = None
            for match in EXERCISE_PARTS.finditer(text):
                body = match["body"]
                label, header = LABEL.search(body), HEADER.search(body)
                hint = HINT.search(text, match.end())
                next_exercise = EXERCISE_PARTS.search(text, match.end())
                has_hint = bool(hint) and (next_exercise is None or hint.start() < next_exercise.start())
                ends = [found.start() for found in (next_exercise, SOLUTION_START.search(text, match.end())) if found]
                hints = len(HINT.findall(text, match.end(), min(ends, default=len(text))))
                open_exercise = Exercise(
                    label=label.group(1) if label else "", title=match["title"].strip(),
                    kind=KINDS[header["kind"]] if header else None,
                    difficulty=len(header["stars"]) if header else None,
                    minutes=int(header["minutes"]) if header else None, has_hint=has_hint, hints=hints,
                    importance=header["importance"] if header else None)
                found.append(open_exercise)
        elif open_exercise is not None and open_exercise.function is None:
            call, prediction = STUB_CHECK.search(text), PREDICTION.search(text)
            if call:
                open_exercise.check, open_exercise.function = call.groups()
            elif prediction and open_exercise.kind == "predict":
                open_exercise.function = prediction.group(1)
    for exercise in found:  # an exercise written before headers existed: a stub makes it a check
        if exercise.kind is None and exercise.check is not None:
            exercise.kind = "check"
    return found


@dataclass
class Solution:
    """One exercise's worked solution, as the book holds it."""

    label: str
    statement: str = ""
    title: str = ""
    text: list[str] = field(default_factory=list)  # markdown of the solution
    code: list[str] = field(default_factory=list)  # its code cells
    verdicts: list[str] = field(default_factory=list)  # what the checks printed for the solution


def _output_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append("".join(output.get("text", "")))
        elif "data" in output and "text/plain" in output["data"]:
            parts.append("".join(output["data"]["text/plain"]))
    return "".join(parts).strip()


def solution_parts(text: str, label: str | None) -> tuple[list[tuple[str | None, str, bool]], str | None]:
    """A markdown cell's ``text`` cut at its solution fences, given the label of a solution still open from an
    earlier cell (or None): each piece with the label of the solution it lies in (None outside any) and whether that
    solution's end follows it; and the label of the solution still open after the cell (its code cells follow)."""
    pieces: list[tuple[str | None, str, bool]] = []
    while True:
        if label is None:
            start = SOLUTION_START.search(text)
            if start is None:
                pieces.append((None, text, False))
                return pieces, None
            pieces.append((None, text[:start.start()], False))
            label, text = start.group(1), text[start.end():]
        end = SOLUTION_END.search(text)
        pieces.append((label, text[:end.start()] if end else text, end is not None))
        if end is None:
            return pieces, label
        label, text = None, text[end.end():]


def split_notebook(notebook: dict) -> tuple[dict, list[Solution]]:
    """The student's notebook (every solution block removed) and the solutions, in order."""
    student = copy.deepcopy(notebook)
    cells, solutions = [], []
    statements: dict[str, str] = {}
    current: Solution | None = None
    for cell in notebook["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            for match in EXERCISE_PARTS.finditer(text):
                label = LABEL.search(match["body"])
                if label:
                    statements[label.group(1)] = (match["title"].strip(), LABEL.sub("", match["body"]).strip())
        if cell["cell_type"] == "code":
            if current is None:
                cells.append(copy.deepcopy(cell))  # the book itself stays as it is
            else:
                current.code.append(text.strip())
                verdict = _output_text(cell)
                if verdict:
                    current.verdicts.append(verdict)
            continue
        # a markdown cell may open and close several solutions: keep what lies outside them
        kept_parts = []
        pieces, _ = solution_parts(text, current.label if current else None)
        for label, piece, ends in pieces:
            if label is None:
                kept_parts.append(piece)
                continue
            if current is None:
                title, statement = statements.get(label, ("", ""))
                current = Solution(label, statement, title)
            if piece.strip():
                current.text.append(piece.strip())
            if ends:
                solutions.append(current)
                current = None
        kept_parts = [part.strip("\n") for part in kept_parts if part.strip()]
        if kept_parts == [_source(cell)]:
            cells.append(copy.deepcopy(cell))
        elif kept_parts:
            kept = copy.deepcopy(cell)
            _set_source(kept, "\n\n".join(kept_parts) + "\n")
            cells.append(kept)
    if current is not None:
        raise ValueError(f"the solution {current.label} has no {{solution-end}}")
    student["cells"] = cells
    return guard_reveals(student, exercises(notebook)), solutions


REVEAL_GUARD = ("from mha.exercises.checking import require_prediction\n"
                "require_prediction({name})  # the measurement below is shown once you have made your prediction\n\n")
# otter's manual questions: ``otter export --filtering`` keeps what lies between these comments, one page each
BEGIN_QUESTION, END_QUESTION = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"
ANSWER_HEADING = re.compile(r"^\*\*Your (?:answer|prediction): .*\*\* \(`(?P<label>[\w-]+)`", re.M)
ANSWER_PROMPT = "_Type your answer here, replacing this text._"
WORK_PROMPT = "# your investigation: add code cells as you need them; they are part of your answer"
HINT_AFTER = re.compile(r"\s*" + r"```\{hint\}[^\n]*\n(?:[ \t]*:[\w-]+:[^\n]*\n)*.*?\n?```", re.S)


def guard_reveals(student: dict, found: list[Exercise]) -> dict:
    """``student`` with each "Predict, then check" measurement cleared: the code cell after the prediction's cell
    loses its stored output and starts by refusing to run while the prediction is missing
    (:func:`mha.exercises.checking.require_prediction`). Its ``raises-exception`` tag lets "Run all" (and nbval) go
    on past the refusal."""
    predictions = {exercise.label: exercise.function for exercise in found
                   if exercise.kind == "predict" and exercise.function}
    waiting: tuple[str, str] | None = None  # (the prediction's name, "prediction" or "measurement")
    for cell in student["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            waiting = next(((predictions[label], "prediction") for label in LABEL.findall(text)
                            if label in predictions), waiting)
        elif waiting and waiting[1] == "prediction" and re.search(rf"^{waiting[0]}\s*=", text, re.M):
            waiting = (waiting[0], "measurement")
        elif waiting and waiting[1] == "measurement":
            _set_source(cell, REVEAL_GUARD.format(name=waiting[0]) + text)
            cell["outputs"], cell["execution_count"] = [], None
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags += [] if "raises-exception" in tags else ["raises-exception"]
            waiting = None
    return student


def _markdown(text: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text.splitlines(keepends=True)}


def answer_cells(exercise: Exercise) -> list[dict]:
    """The cells where a learner answers an exercise marked by hand, as an otter manual question: a heading that
    names it, an answer cell (and, for an investigation, a code cell for its work), and the question's end."""
    heading = f"{BEGIN_QUESTION}\n\n**Your answer: {exercise.title}** (`{exercise.label}`, marked by hand)\n"
    work = [{"cell_type": "code", "id": f"{exercise.label}-work", "metadata": {}, "execution_count": None,
             "outputs": [], "source": [WORK_PROMPT + "\n"]}]
    return [_markdown(heading, f"{exercise.label}-begin"), *(work if exercise.kind == "investigate" else []),
            _markdown(ANSWER_PROMPT + "\n", f"{exercise.label}-answer"),
            _markdown(END_QUESTION + "\n", f"{exercise.label}-end")]


def with_answer_cells(student: dict, found: list[Exercise]) -> dict:
    """``student`` with a place for every answer marked by hand, as otter manual questions (``otter export
    --filtering`` makes a PDF of them for Gradescope): after each explanation's and investigation's statement and
    hints, :func:`answer_cells`; around each prediction's cell, a heading and the question's end, so that the
    prediction and the reasoning in its comment are the answer."""
    written = {exercise.label: exercise for exercise in found if exercise.kind in ("predict", "explain", "investigate")}
    cells, prediction = [], None
    for cell in student["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "code":
            if prediction and re.search(rf"^{prediction.function}\s*=", text, re.M):
                heading = (f"{BEGIN_QUESTION}\n\n**Your prediction: {prediction.title}** (`{prediction.label}`, marked "
                           "by hand: the reasoning in your comment counts, not the digits)\n")
                label = prediction.label
                cells += [_markdown(heading, f"{label}-begin"), cell, _markdown(END_QUESTION + "\n", f"{label}-end")]
                prediction = None
            else:
                cells.append(cell)
            continue
        start = 0
        for match in EXERCISE_PARTS.finditer(text):
            label = LABEL.search(match["body"])
            exercise = written.get(label.group(1)) if label else None
            if exercise is None:
                continue
            if exercise.kind == "predict":
                prediction = exercise
                continue
            end = match.end()
            while hint := HINT_AFTER.match(text, end):
                end = hint.end()
            kept = copy.deepcopy(cell)
            if start:  # the second part of one cell: an id of its own
                kept["id"] = f"{cell.get('id', 'cell')}-{exercise.label}"[-64:]
            _set_source(kept, text[start:end].strip("\n") + "\n")
            cells += [kept, *answer_cells(exercise)]
            start = end
        if start == 0:
            cells.append(cell)
        elif text[start:].strip():
            rest = copy.deepcopy(cell)
            _set_source(rest, text[start:].strip("\n") + "\n")
            rest["id"] = f"{cell.get('id', 'cell')}-rest"[-64:]
            cells.append(rest)
    student["cells"] = cells
    return student


def answer_key(title: str, solutions: list[Solution]) -> str:
    """The answer key of one notebook, as markdown."""
    lines = [f"# Answer key: {title}", ""]
    for number, solution in enumerate(solutions, 1):
        heading = f"{solution.title} (`{solution.label}`)" if solution.title else f"`{solution.label}`"
        lines += [f"## {number}. {heading}", "", solution.statement, "", "**Solution.**", ""]
        lines += [*(f"{part}\n" for part in solution.text)]
        for code in solution.code:
            lines += ["```python", code, "```", ""]
        if solution.verdicts:
            lines += [
                "**The check says:**",
                "",
                *(f"> {line}" for v in solution.verdicts for line in v.splitlines()),
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def notebook_title(notebook: dict, path: Path) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            heading = re.search(r"^#\s+(.+)$", _source(cell), re.M)
            if heading:
                return heading.group(1).strip()
    return path.stem


def write_edition(out: Path, notebooks: list[Path] | None = None) -> dict[str, int]:
    """Write the student notebooks under ``out/chapters`` and the answer key under ``out/answer_key``: of every
    notebook of the book, or of ``notebooks`` (paths under chapters/)."""
    counts = {}
    for path in sorted(CHAPTERS.rglob("*.ipynb")) if notebooks is None else notebooks:
        if ".ipynb_checkpoints" in path.parts:
            continue
        notebook = json.loads(path.read_text())
        student, solutions = split_notebook(notebook)
        student = with_answer_cells(student, exercises(notebook))
        relative = path.relative_to(ROOT)
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(readable_edition(student, notebook, path), indent=1, ensure_ascii=False) + "\n")
        key = out / "answer_key" / relative.with_suffix(".md")
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(with_numbers(answer_key(notebook_title(notebook, path), solutions), shown_expressions(notebook),
                                    path))
        counts[str(relative)] = len(solutions)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "_build" / "student"))
    args = parser.parse_args()
    counts = write_edition(Path(args.out))
    print(f"student edition of {len(counts)} notebooks, {sum(counts.values())} solutions removed, in {args.out}; "
          f"answer key in {Path(args.out) / 'answer_key'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
