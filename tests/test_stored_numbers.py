"""Every number a notebook stores is at the precision a reader sees, so nbval's verdict does not depend on the CPU.

nbval re-executes each notebook and compares its text outputs with the committed ones. Float32 results agree
between CPUs (AVX2 against AVX-512, one thread against two) only to about six significant digits, so a stored
number with more digits than that makes the test suite's verdict depend on the machine. These tests read the
committed notebooks; `.ci/run` also executes them under another set of CPU kernels than the machine's own.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from mha.book import GLUE_RECORD, PROSE_NUMBER, as_shown, decimals_shown, glue, glued_records, shown

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


@pytest.mark.parametrize("fmt, decimals", [(".2f", 2), (".0f", 0), (".0%", 2), (".1%", 3), (".4f", 4)])
def test_decimals_shown_reads_the_prose_format(fmt, decimals):
    assert decimals_shown(fmt) == decimals


@pytest.mark.parametrize("fmt", [".3g", "d", "", "s"])
def test_formats_whose_rounding_is_not_defined_are_refused(fmt):
    with pytest.raises(ValueError, match="fixed-point, percentage or scientific"):
        as_shown(0.5, fmt)


def test_as_shown_keeps_exactly_the_digits_a_format_shows():
    assert as_shown(0.73259, ".1%") == 0.733
    assert as_shown(3.2187e-05, ".1e") == 3.2e-05
    assert as_shown(12.5, ".0f") == 12.0  # half to even, as format() itself rounds
    assert format(as_shown(0.123456, ".2f"), ".2f") == format(0.123456, ".2f")
    with pytest.raises(ValueError, match="significant digits"):
        decimals_shown(".2e")


def test_shown_rounds_and_never_keeps_negative_zero():
    import numpy as np
    import pandas as pd
    import torch

    assert shown(0.123456789, 3) == 0.123
    assert str(shown(-0.0004, 2)) == "0.0"
    assert shown(7, 2) == 7 and shown("L3H1", 2) == "L3H1"
    assert np.array_equal(shown(torch.tensor([0.12345, -0.00001]), 3), np.array([0.123, 0.0]))
    assert str(shown(np.array([-1e-9]), 2)[0]) == "0.0"
    table = pd.DataFrame({"score": [0.123456, -0.0000001], "head": ["L0H1", "L2H3"], "count": [3, 4]})
    rounded = shown(table, 2)
    assert rounded["score"].tolist() == [0.12, 0.0] and rounded["count"].tolist() == [3, 4]
    assert "-0.00" not in rounded.to_string()
    with pytest.raises(ValueError, match="whole number"):
        shown(0.5, -1)
    with pytest.raises(TypeError, match="not set"):
        shown({1.0}, 2)


def test_glue_asks_floats_for_the_format_the_prose_uses():
    with pytest.raises(ValueError, match="needs the format"):
        glue("share", 0.25)
    with pytest.raises(ValueError, match="cannot show"):
        glue("share", float("nan"), ".2f")
    with pytest.raises(ValueError, match="plain identifier"):
        glue("a share", 0.25, ".2f")
    with pytest.raises(TypeError, match="number or a string"):
        glue("share", [0.25], ".2f")


def test_glue_displays_the_record_that_myst_nb_glue_displays(monkeypatch):
    import IPython.display
    import myst_nb.ext.glue

    from mha.book import _GLUED

    ours, theirs = [], []
    monkeypatch.setattr(IPython.display, "display", lambda *shown, **options: ours.append((shown, options)))
    monkeypatch.setattr(myst_nb.ext.glue, "ipy_display", lambda *shown, **options: theirs.append((shown, options)))
    for name, value, fmt in (("share", 0.123456, ".1%"), ("heads", np.int64(7), None), ("best", "L0H2", None),
                             ("found", True, None), ("tiny", -1e-9, ".2f")):
        glue(name, value, fmt)
        myst_nb.ext.glue.glue(name, _GLUED[name], display=False)  # myst-nb's own glue, given the rounded value
    assert ours == theirs and len(ours) == 5
    assert ours[0] == (({GLUE_RECORD: "0.123"},), {"raw": True, "metadata": {
        "scrapbook": {"name": "share", "mime_prefix": "application/papermill.record/"}}})


def test_glue_leaves_myst_nb_and_nbformat_unloaded():
    """The kernel of every notebook glues; myst-nb's glue module would load nbformat and jsonschema with it."""
    code = ("import sys; from mha.book import glue; glue('share', 0.25, '.2f'); "
            "print(sorted({'myst_nb', 'nbformat', 'jsonschema'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_notebook_takes_the_books_two_threads_unless_the_environment_names_a_count(monkeypatch):
    import torch

    from mha.book import set_cpu_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert set_cpu_threads() == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as the test suite's workers and their kernels have it
        assert set_cpu_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "many")  # not a count: the book's own
        assert set_cpu_threads(3) == 3 and torch.get_num_threads() == 3
        with pytest.raises(ValueError, match="whole number"):
            set_cpu_threads(0)
    finally:
        torch.set_num_threads(before)
