"""Small helpers the notebooks share: numbers stored at the precision the text shows them, and head labels.

A notebook is committed with its outputs, and the test suite (nbval) re-executes it and compares what it prints
with what was stored. Float32 arithmetic agrees between CPUs only to about six significant digits: a laptop with
AVX-512 and one with AVX2 run different SIMD kernels and sum in a different order. So a number is stored the way
the reader sees it, rounded to the decimals the prose or the table shows, and never with the noise digits that
follow. One function does the rounding (:func:`shown`), and one object glues a number for the prose (:data:`glue`),
with the same format the prose uses: ``glue("best_accuracy", accuracy, ".1%")`` pairs with
``{eval}`glue.text("best_accuracy:.1%")``` in the text. ``tests/test_stored_numbers.py`` checks both ends.

That inline form is MyST's ``{eval}`` role, so the number reads properly in two places from one source. In
JupyterLab, jupyterlab-myst shows the result stored in the markdown cell's ``user_expressions`` metadata, and
re-evaluates ``glue.text(...)`` in the kernel when the reader runs the cell (:func:`glued_text`). On the website,
``site/glued_numbers.py`` turns the same role into myst-nb's ``{glue:text}`` paste of the glued output.
Citations work the same way: ``{eval}`glue.cite_t("clark2019what")``` is "Clark et al. [2019]" in JupyterLab
(:func:`citation_text`, from ``citations.json`` in :mod:`mha.data`) and sphinxcontrib-bibtex's ``{cite:t}`` on the
site, linked to the bibliography. ``scripts/run_notebooks.py --write`` stores the results
(:func:`prose_expression_results`).

A head is named one way everywhere in the book, in code, prose, tables and figures: ``L3H1`` for head 1 of layer 3,
both counted from 0 (:func:`head_label`, :func:`parse_head_label`, :func:`head_labels`, :func:`label_heads`). The
notation page (``chapters/notation.md``) lists this with the book's other conventions, and ``tests/test_book.py``
checks that no other spelling appears.

See "How to run this book" on the landing page, and the README's section on tests.
"""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path

import numpy as np

from mha.core.validation import check_whole_number

__all__ = ["GLUE_RECORD", "PROSE_CITATION", "PROSE_NUMBER", "as_shown", "citation_text", "decimals_shown", "glue",
           "glued_records", "glued_text", "head_label", "head_labels", "label_heads", "parse_head_label",
           "prose_expression_results", "set_cpu_threads", "shown"]

BOOK_CPU_THREADS = 2
"""The CPU threads a notebook of the book uses for torch: the book is written to run on two cores."""


def set_cpu_threads(default: int = BOOK_CPU_THREADS) -> int:
    """Give torch ``default`` CPU threads, or the count the environment names in ``OMP_NUM_THREADS``; returns it.

    A reader's kernel has the machine to itself and uses the book's two cores. Where several notebooks run at once on
    those cores (the test suite's workers set ``OMP_NUM_THREADS=1``), a kernel that took two threads would make each
    wait on the other's; one thread each keeps both busy. The stored outputs are the same at one thread and at two
    (README, "The same verdict on every CPU").
    """
    import os

    import torch

    named = os.environ.get("OMP_NUM_THREADS", "").strip()
    threads = int(named) if named.isdigit() and int(named) > 0 else check_whole_number("default", default, minimum=1)
    torch.set_num_threads(threads)
    return threads


_FORMAT = re.compile(r"^[<>=^]?[+\- ]?,?(?:\.(?P<decimals>\d+))?(?P<kind>[fe%])$")


def _parse_format(fmt: str) -> tuple[int, str]:
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a format string such as '.2f' or '.1%', not {type(fmt).__name__}.")
    match = _FORMAT.match(fmt)
    if match is None:
        raise ValueError(f"fmt {fmt!r} is not a fixed-point, percentage or scientific format; use one such as '.2f', "
                         "'.0f', '.1%' or '.1e', the same format the prose gives the glued name.")
    return int(match["decimals"] or (0 if match["kind"] == "%" else 6)), match["kind"]


def decimals_shown(fmt: str) -> int:
    """How many decimals of a number a fixed-point format such as ``".2f"`` or ``".1%"`` shows.

    A percentage shows two more decimals of the number than of the percentage. Scientific formats (``".1e"``)
    show significant digits rather than decimals, so they have no fixed answer and are refused here.
    """
    decimals, kind = _parse_format(fmt)
    if kind == "e":
        raise ValueError(f"fmt {fmt!r} shows significant digits, not a fixed number of decimals; use as_shown().")
    return decimals + (2 if kind == "%" else 0)


def as_shown(value: float, fmt: str) -> float:
    """``value`` rounded to exactly what ``format(value, fmt)`` shows: ``as_shown(0.73259, ".1%") == 0.733``."""
    decimals, kind = _parse_format(fmt)
    if kind == "e":
        return float(format(float(value), f".{decimals}e")) + 0.0
    return _round_scalar(value, decimals + (2 if kind == "%" else 0))


def _round_scalar(value: float, decimals: int) -> float:
    """Round half to even, and turn -0.0 into 0.0 (a tiny negative on one CPU is a tiny positive on another)."""
    return round(float(value), decimals) + 0.0


def shown(value, decimals: int):
    """``value`` rounded to ``decimals`` places, as it is stored in a notebook and shown to the reader.

    Accepts a number, a numpy array, a torch tensor (returned as a numpy array), a pandas Series or DataFrame
    (only its float columns are rounded), or a dict or list of these. Integers, booleans and text pass through
    unchanged. Negative zero becomes zero, so that ``-0.00`` never appears on one machine and ``0.00`` on another.
    """
    decimals = check_whole_number("decimals", decimals, minimum=0, meaning="digits after the decimal point")
    if isinstance(value, (bool, np.bool_, str)) or isinstance(value, numbers.Integral):
        return value
    if isinstance(value, numbers.Real):
        return _round_scalar(value, decimals)
    if isinstance(value, dict):
        return {key: shown(item, decimals) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shown(item, decimals) for item in value)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.floating):
            return value
        return np.round(value.astype(np.float64), decimals) + 0.0
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency of the package
        pd = None
    if pd is not None and isinstance(value, (pd.DataFrame, pd.Series)):
        if isinstance(value, pd.Series):
            return value.round(decimals) + 0.0 if pd.api.types.is_float_dtype(value.dtype) else value
        floats = [column for column, dtype in value.dtypes.items() if pd.api.types.is_float_dtype(dtype)]
        rounded = value.copy()
        rounded[floats] = value[floats].round(decimals) + 0.0
        return rounded
    raise TypeError(f"shown() rounds numbers, arrays, tensors and pandas tables, not {type(value).__name__}.")


def _store_glued(name: str, value, fmt: str | None = None) -> None:
    """Store ``value`` for the prose under ``name``, rounded to what ``fmt`` shows (the format the prose uses).

    A float needs ``fmt`` (``".2f"``, ``".1%"``, ...), and is stored rounded to it; an integer or a string is stored
    as it is and takes no ``fmt``. Emits what ``myst_nb.glue(..., display=False)`` emits (:func:`_emit_record`):
    nothing is printed in the notebook.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"glue name {name!r} must be a plain identifier such as 'best_accuracy'.")
    if isinstance(value, np.generic) or (hasattr(value, "item") and getattr(value, "ndim", None) == 0):
        value = value.item()  # a numpy scalar, or a 0-d array or tensor
    if isinstance(value, (bool, str)) or isinstance(value, numbers.Integral):
        if fmt is not None and isinstance(value, str):
            raise ValueError(f"glue {name!r}: text takes no fmt; drop fmt={fmt!r}.")
        stored = value if isinstance(value, (bool, str)) else int(value)
    elif isinstance(value, numbers.Real):
        if fmt is None:
            raise ValueError(f"glue {name!r}: a float needs the format the prose shows it with, for example "
                             f"glue({name!r}, value, '.2f'), so that it is stored at that precision.")
        if not math.isfinite(value):
            raise ValueError(f"glue {name!r}: the value is {value}, which the prose cannot show; check the cell.")
        stored = as_shown(value, fmt)
    else:
        raise TypeError(f"glue {name!r}: store a number or a string, not {type(value).__name__}.")
    _emit_record(name, stored)
    _GLUED[name] = stored


def _emit_record(name: str, value) -> None:
    """Display ``value`` as the hidden glue record that myst-nb reads from a cell's outputs, the record that
    ``myst_nb.glue(name, value, display=False)`` displays. Written here rather than imported: myst-nb's glue module
    loads nbformat, and with it jsonschema's URI grammar, which would cost each notebook's kernel more than all
    its glue calls together."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(value)  # {mime type: text}, {mime type: metadata}
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    display({GLUE_PREFIX + kind: text for kind, text in bundle.items()}, raw=True, metadata=metadata)


# What this kernel has glued so far, by name: glue.text() reads it.
_GLUED: dict[str, object] = {}

# A glued number in the prose: {eval}`glue.text("name:fmt")` (the fmt is optional, as in myst-nb's {glue:text}).
PROSE_NUMBER = re.compile(r"""\{eval\}`glue\.text\("(?P<spec>(?P<name>[A-Za-z_]\w*)(?::(?P<fmt>[^"`]*))?)"\)`""")
# A citation in the prose: {eval}`glue.cite_t("key")` (textual, "Clark et al. [2019]") or glue.cite_p("key1,key2")
# (parenthetical, "[Clark et al., 2019, Voita et al., 2019]"), the same as {cite:t} and {cite:p} on the site.
PROSE_CITATION = re.compile(r"""\{eval\}`glue\.cite_(?P<kind>[tp])\("(?P<keys>[\w\-]+(?:,[\w\-]+)*)"\)`""")
GLUE_PREFIX = "application/papermill.record/"  # a glue record's mime types: this, then the value's own
GLUE_RECORD = GLUE_PREFIX + "text/plain"
CITATION_LABELS = "citations.json"  # in mha.data: each reference's authors and year, written from references.bib


def _format_glued(spec: str, plain_text: str) -> str:
    """``spec`` ("name:fmt") applied to a glued value's plain text, exactly as myst-nb's ``{glue:text}`` does it."""
    from myst_nb.core.variables import format_plain_text

    name_format = spec.rsplit(":", 1)
    return format_plain_text(plain_text, name_format[1] if len(name_format) == 2 else "s")


def glued_text(spec: str) -> str:
    """The text a glued number shows in the prose: ``glued_text("best_accuracy:.1%") == "73.3%"``.

    ``spec`` is what follows ``glue.text(`` in the prose: a glued name, then optionally ``:`` and the format. Also
    reachable as ``glue.text``, the form the notebooks' ``{eval}`` roles use, since every notebook imports ``glue``.
    """
    if not isinstance(spec, str):
        raise TypeError(f"glue.text() takes the glued name and format as one string, such as 'best_accuracy:.1%', "
                        f"not {type(spec).__name__}.")
    name = spec.rsplit(":", 1)[0] if ":" in spec else spec
    if name not in _GLUED:
        return f"(run the cell that computes {name} first)"
    return _format_glued(spec, repr(_GLUED[name]))


def citation_text(keys: str, kind: str = "t", *, labels_path: str | Path | None = None) -> str:
    """How the site cites ``keys`` (comma-separated bibliography keys): ``kind`` "t" gives "Clark et al. [2019]",
    "p" gives "[Clark et al., 2019]". Reachable as ``glue.cite_t`` and ``glue.cite_p`` for the notebooks' prose.

    The labels come from ``labels_path`` (default: the book's ``citations.json``), checked against
    ``data/SHA256SUMS``; each entry needs a string ``authors`` and ``year``."""
    from mha.data_files import DATA_DIRECTORY, how_to_restore, parse_json, read_verified_file

    if not isinstance(keys, str) or kind not in ("t", "p"):
        raise ValueError(f"cite {keys!r} with kind 't' or 'p', keys as one comma-separated string.")
    path = DATA_DIRECTORY / CITATION_LABELS if labels_path is None else Path(labels_path)
    how, what = how_to_restore("python -m scripts.run_notebooks --prose-only", path), "the citation labels"
    labels = parse_json(read_verified_file(path, what=what, how=how, limit=2**20), what=what, path=path, how=how)
    if not isinstance(labels, dict):
        raise ValueError(f"{what} {path} are not a JSON object of bibliography keys. {how}")
    parts = []
    for key in keys.split(","):
        entry = labels.get(key.strip())
        if entry is not None and not (isinstance(entry, dict) and isinstance(entry.get("authors"), str)
                                      and isinstance(entry.get("year"), (str, int))):
            raise ValueError(f"{what} {path} hold a malformed entry for {key.strip()!r}: it needs 'authors' and "
                             f"'year'. {how}")
        if entry is None:
            raise ValueError(f"{key.strip()!r} is not in the book's bibliography (references.bib); add it there and "
                             "run scripts/run_notebooks.py --prose-only.")
        parts.append((entry["authors"], entry["year"]))
    if kind == "t":
        return ", ".join(f"{authors} [{year}]" for authors, year in parts)
    return "[" + ", ".join(f"{authors}, {year}" for authors, year in parts) + "]"


class Glue:
    """What the notebooks glue with, one object (:data:`glue`) that every notebook imports: ``glue(name, value, fmt)``
    stores a number for the prose (rounded to ``fmt``), and the prose's ``{eval}`` roles read it back with
    ``glue.text("name:fmt")`` and cite the bibliography with ``glue.cite_t("key")`` and ``glue.cite_p("key")``."""

    def __call__(self, name: str, value, fmt: str | None = None) -> None:
        """Store ``value`` for the prose under ``name`` (:func:`_store_glued`); nothing is printed."""
        _store_glued(name, value, fmt)

    @staticmethod
    def text(spec: str) -> str:
        """The glued number as the prose shows it (:func:`glued_text`): ``glue.text("best_accuracy:.1%")``."""
        return glued_text(spec)

    @staticmethod
    def cite_t(keys: str) -> str:
        """A textual citation, "Clark et al. [2019]" (:func:`citation_text`)."""
        return citation_text(keys, "t")

    @staticmethod
    def cite_p(keys: str) -> str:
        """A parenthetical citation, "[Clark et al., 2019]" (:func:`citation_text`)."""
        return citation_text(keys, "p")

    def __repr__(self) -> str:
        return "glue"


glue = Glue()


def glued_records(notebook) -> dict[str, str]:
    """The stored plain text of every value an executed notebook glues, by name (what myst-nb pastes)."""
    records = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None and GLUE_RECORD in output.get("data", {}):
                records[name] = output["data"][GLUE_RECORD]
    return records


def prose_expression_results(notebook) -> list[list[dict] | None]:
    """For each cell of an executed notebook, what jupyterlab-myst stores for its inline expressions (None: none).

    jupyterlab-myst keeps each ``{eval}`` expression's last result in the markdown cell's ``user_expressions``
    metadata and shows it when the notebook opens, before any cell has run. Each result here is what the kernel
    would answer: for ``glue.text(...)``, computed from the glue records the notebook stores; for
    ``glue.cite_t(...)``/``glue.cite_p(...)``, from the bibliography. A name the notebook never glues raises a
    ValueError that names the cell.
    """
    glued = glued_records(notebook)
    results = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            results.append(None)
            continue
        expressions: dict[str, str] = {}
        for match in PROSE_NUMBER.finditer(cell.source):
            if match["name"] not in glued:
                raise ValueError(f"cell {index} shows {match['name']!r}, which the notebook never glues; glue it in a "
                                 "code cell above, or fix the name.")
            expressions[match[0][len("{eval}`"):-1]] = _format_glued(match["spec"], glued[match["name"]])
        for match in PROSE_CITATION.finditer(cell.source):
            expressions[match[0][len("{eval}`"):-1]] = citation_text(match["keys"], match["kind"])
        results.append([{"expression": expression,
                         "result": {"data": {"text/plain": repr(text)}, "metadata": {}, "status": "ok"}}
                        for expression, text in expressions.items()] or None)
    return results


_HEAD_LABEL = re.compile(r"^L(?P<layer>\d+)H(?P<head>\d+)$")


def _index(value, what: str) -> int:
    """A layer or head index: a whole number >= 0 (a numpy or torch integer is fine, a bool or a float is not)."""
    return check_whole_number(what, value, minimum=0, meaning="counted from 0")


def head_label(layer: int, head: int) -> str:
    """The book's one name for a head: ``head_label(3, 1) == "L3H1"``, head 1 of layer 3, both counted from 0.

    Use it for every head a notebook prints, glues, tabulates or puts in a figure, so that the prose, the tables and
    the figures spell heads the same way. See the notation page, ``chapters/notation.md``.
    """
    return f"L{_index(layer, 'layer')}H{_index(head, 'head')}"


def parse_head_label(label: str) -> tuple[int, int]:
    """``(layer, head)`` from a label made by :func:`head_label`: ``parse_head_label("L3H1") == (3, 1)``."""
    match = _HEAD_LABEL.match(label) if isinstance(label, str) else None
    if match is None:
        raise ValueError(f"{label!r} is not a head label; write a head as 'L3H1' (layer 3, head 1, both from 0), "
                         "with no space, as head_label(3, 1) does.")
    return int(match["layer"]), int(match["head"])


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """Every head's label in flat order, ``layer * n_heads + head``: ``head_labels(2, 2) == ["L0H0", "L0H1", "L1H0",
    "L1H1"]``. Index it with a flat head index, such as the argmax of a (layers * heads,) array."""
    return [head_label(layer, head) for layer in range(_index(n_layers, "n_layers"))
            for head in range(_index(n_heads, "n_heads"))]


def label_heads(table, layer: str = "layer", head: str = "head"):
    """A pandas table with its ``layer`` and ``head`` columns (or index levels) replaced by one ``head`` of labels.

    ``label_heads(table)`` turns columns ``layer = 3, head = 1`` into one column ``head = "L3H1"``, in the place of
    the layer column; a table indexed by ``(layer, head)`` gets one index ``head`` of labels instead. The other
    columns and the row order are kept; the table passed in is not changed.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"label_heads() relabels a pandas DataFrame, not {type(table).__name__}.")
    names = list(table.index.names)
    if layer in names and head in names:
        labels = [head_label(l, h) for l, h in zip(table.index.get_level_values(layer),
                                                   table.index.get_level_values(head))]
        others = [name for name in names if name not in (layer, head)]
        relabelled = table.copy()
        if others:
            relabelled.index = pd.MultiIndex.from_arrays(
                [table.index.get_level_values(name) for name in others] + [labels], names=others + ["head"])
        else:
            relabelled.index = pd.Index(labels, name="head")
        return relabelled
    if layer in table.columns and head in table.columns:
        labels = [head_label(l, h) for l, h in zip(table[layer], table[head])]
        relabelled = table.drop(columns=[head])
        relabelled[layer] = labels
        return relabelled.rename(columns={layer: "head"})
    raise ValueError(f"label_heads() needs a {layer!r} and a {head!r} column, or index levels with those names; "
                     f"this table has columns {list(table.columns)} and index {names}.")
