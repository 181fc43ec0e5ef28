"""Every number a notebook stores is at the precision a reader sees, so nbval's verdict does not depend on the CPU.

nbval re-executes each notebook and compares its text outputs with the committed ones. Float32 results agree
between CPUs (AVX2 against AVX-512, one thread against two) only to about six significant digits, so a stored
number with more digits than that makes the test suite's verdict depend on the machine. These tests read the
committed notebooks; `.ci/run` also executes them under another set of CPU kernels than the machine's own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from mha.book import GLUE_RECORD, PROSE_NUMBER, as_shown, glued_records

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
DECIMAL_NUMBER = re.compile(r"(?<![\w.])-?(\d+\.\d+)(?:[eE][+-]?\d+)?(?![\w.])")
MAX_SIGNIFICANT_DIGITS = 6


def significant_digits(digits: str) -> int:
    """Significant digits of a decimal literal such as '0.0529343914': leading zeros do not count."""
    return len(digits.replace(".", "").lstrip("0")) or 1


def prose_formats(notebook) -> dict[str, set[str]]:
    """Every format the prose shows each glued name with (an empty string where it gives none)."""
    formats: dict[str, set[str]] = {}
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for match in PROSE_NUMBER.finditer(cell.source):
                formats.setdefault(match["name"], set()).add(match["fmt"] or "")
    return formats


def stored_texts(notebook):
    """(cell index, text) for every text output nbval compares: streams, plain text, HTML and glue records."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                yield index, output.get("text", "")
            for mime, data in output.get("data", {}).items():
                if mime.startswith("text/") or mime == GLUE_RECORD:
                    yield index, data if isinstance(data, str) else "".join(data)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_glued_float_is_stored_as_the_prose_shows_it(path):
    notebook = nbformat.read(path, as_version=4)
    formats = prose_formats(notebook)
    problems = []
    for name, text in glued_records(notebook).items():
        value = ast.literal_eval(text)
        if not isinstance(value, float):
            continue
        if name not in formats:
            continue  # glued for completeness in a loop, never shown; its digits are checked below
        shown_with = {fmt for fmt in formats[name] if fmt}
        if not shown_with:
            problems.append(f"{name} = {text} is a float the prose shows without a format; give it one such as :.2f")
            continue
        if not any(value == as_shown(value, fmt) for fmt in shown_with):
            problems.append(f"{name} = {text} has more decimals than the prose shows ({sorted(shown_with)})")
    assert not problems, f"{path.name}: glue floats with mha.book.glue(name, value, fmt):\n" + "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_name_the_prose_shows_is_glued(path):
    notebook = nbformat.read(path, as_version=4)
    shown_names, glued_names = set(prose_formats(notebook)), set(glued_records(notebook))
    assert shown_names <= glued_names, (
        f"{path.name}: the prose shows names no cell glues: {sorted(shown_names - glued_names)}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stored_number_carries_more_than_six_significant_digits(path):
    notebook = nbformat.read(path, as_version=4)
    noisy = [f"cell {index}: {match.group(0)}" for index, text in stored_texts(notebook)
             for match in DECIMAL_NUMBER.finditer(text) if significant_digits(match.group(1)) > MAX_SIGNIFICANT_DIGITS]
    assert not noisy, (f"{path.name} stores numbers whose last digits depend on the CPU; round them with "
                       "mha.book.shown (tables, printouts) or mha.book.glue (prose):\n" + "\n".join(noisy[:20]))


def test_significant_digits_ignore_leading_zeros():
    assert significant_digits("0.0529343914") == 9
    assert significant_digits("12.50") == 4
    assert significant_digits("0.000") == 1
