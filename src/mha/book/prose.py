"""The prose's numbers and citations, from one source in JupyterLab and on the website (all chapters).

:data:`glue` glues a number for the prose with the format the prose uses: ``glue("best_accuracy", accuracy, ".1%")``
pairs with ``{eval}`glue.text("best_accuracy:.1%")``` in the text, and the number is stored rounded to that format
(:func:`mha.book.rounding.as_shown`). That inline form is MyST's ``{eval}`` role, so the number reads properly in two
places. In JupyterLab, jupyterlab-myst shows the result stored in the markdown cell's ``user_expressions`` metadata,
and re-evaluates ``glue.text(...)`` in the kernel when the reader runs the cell (:func:`glued_text`). On the website,
``website/glued_numbers.py`` turns the same role into myst-nb's ``{glue:text}`` paste of the glued output. Citations
work the same way: ``{eval}`glue.cite_t("clark2019what")``` is "Clark et al. [2019]" in JupyterLab
(:func:`citation_text`, from ``citations.json`` in :mod:`mha.data`) and sphinxcontrib-bibtex's ``{cite:t}`` on the
site, linked to the bibliography. ``python -m scripts.run_notebooks --write`` stores the results
(:func:`prose_expression_results`); ``tests/test_stored_numbers.py`` checks both ends.
"""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path

import numpy as np

from mha.book.rounding import as_shown

__all__ = ["CITATION_LABELS", "GLUE_RECORD", "PROSE_CITATION", "PROSE_NUMBER", "Glue", "citation_text", "glue",
           "glued_records", "glued_text", "prose_expression_results"]

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
