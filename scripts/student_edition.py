"""Write the student edition of the book's notebooks, and a separate answer key (``make student``; issue 13).

The book's notebooks hold every exercise in one shape (chapter pages, and sphinx-exercise's directives):

- a markdown cell with the ```` ```{exercise} ```` statement (its ``:label:`` names it);
- a code cell with the stub (``raise NotImplementedError``) and the check, whose stored output is the check's
  "✗ Not attempted yet" message;
- ```` ```{solution-start} label ```` ... ```` ```{solution-end} ````: the worked solution, in markdown and code
  cells, whose check passes ("✓ ...").

The student edition is each notebook with every solution block removed: the exercise, its stub and its check stay,
with their stored outputs, so it runs under nbval like the book (``.ci/run`` executes it). The answer key is one
markdown file per notebook: each exercise's statement, the solution's explanation and code, and what the check
said of it. ``tests/test_student_edition.py`` proves that no solution line leaks into the student edition.

    python scripts/student_edition.py [--out _build/student]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
SOLUTION_START = re.compile(r"```\{solution-start\}\s*(\S+)[^`]*?```", re.S)
SOLUTION_END = re.compile(r"```\{solution-end\}\s*```", re.S)
EXERCISE = re.compile(r"```\{exercise\}(.*?)```", re.S)
LABEL = re.compile(r":label:\s*(\S+)")


@dataclass
class Solution:
    """One exercise's worked solution, as the book holds it."""

    label: str
    statement: str = ""
    text: list[str] = field(default_factory=list)  # markdown of the solution
    code: list[str] = field(default_factory=list)  # its code cells
    verdicts: list[str] = field(default_factory=list)  # what the checks printed for the solution


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def _output_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append("".join(output.get("text", "")))
        elif "data" in output and "text/plain" in output["data"]:
            parts.append("".join(output["data"]["text/plain"]))
    return "".join(parts).strip()


def split_notebook(notebook: dict) -> tuple[dict, list[Solution]]:
    """The student's notebook (every solution block removed) and the solutions, in order."""
    student = copy.deepcopy(notebook)
    cells, solutions = [], []
    statements: dict[str, str] = {}
    current: Solution | None = None
    for cell in notebook["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            for body in EXERCISE.findall(text):
                label = LABEL.search(body)
                if label:
                    statements[label.group(1)] = LABEL.sub("", body).strip()
        if current is None:
            start = SOLUTION_START.search(text) if cell["cell_type"] == "markdown" else None
            if start is None:
                cells.append(cell)
                continue
            current = Solution(start.group(1), statements.get(start.group(1), ""))
            before, after = text[:start.start()], text[start.end():]
            if before.strip():
                kept = copy.deepcopy(cell)
                _set_source(kept, before.rstrip() + "\n")
                cells.append(kept)
            text = after
            cell = {**cell, "source": [after]}
        # inside a solution: until its end fence
        end = SOLUTION_END.search(text) if cell["cell_type"] == "markdown" else None
        if cell["cell_type"] == "code":
            current.code.append(text.strip())
            verdict = _output_text(cell)
            if verdict:
                current.verdicts.append(verdict)
            continue
        if end is None:
            if text.strip():
                current.text.append(text.strip())
            continue
        if text[:end.start()].strip():
            current.text.append(text[:end.start()].strip())
        solutions.append(current)
        current = None
        rest = text[end.end():]
        if rest.strip():
            kept = copy.deepcopy(cell)
            _set_source(kept, rest.lstrip("\n"))
            cells.append(kept)
    if current is not None:
        raise ValueError(f"the solution {current.label} has no {{solution-end}}")
    student["cells"] = cells
    return student, solutions


def answer_key(title: str, solutions: list[Solution]) -> str:
    """The answer key of one notebook, as markdown."""
    lines = [f"# Answer key: {title}", ""]
    for number, solution in enumerate(solutions, 1):
        lines += [f"## {number}. `{solution.label}`", "", solution.statement, "", "**Solution.**", ""]
        lines += [*(f"{part}\n" for part in solution.text)]
        for code in solution.code:
            lines += ["```python", code, "```", ""]
        if solution.verdicts:
            lines += ["**The check says:**", "", *(f"> {line}" for v in solution.verdicts for line in v.splitlines()), ""]
    return "\n".join(lines).rstrip() + "\n"


def notebook_title(notebook: dict, path: Path) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            heading = re.search(r"^#\s+(.+)$", _source(cell), re.M)
            if heading:
                return heading.group(1).strip()
    return path.stem


def write_edition(out: Path) -> dict[str, int]:
    """Write the student notebooks under ``out/chapters`` and the answer key under ``out/answer_key``."""
    counts = {}
    for path in sorted(CHAPTERS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        notebook = json.loads(path.read_text())
        student, solutions = split_notebook(notebook)
        relative = path.relative_to(ROOT)
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(student, indent=1, ensure_ascii=False) + "\n")
        key = out / "answer_key" / relative.with_suffix(".md")
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(answer_key(notebook_title(notebook, path), solutions))
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
