"""The kernel-free form of every view, for the book's website: one object, two representations.

In Jupyter an :class:`~mha.views.explorer.Explorer` is a live ipywidgets view. On the website there is no kernel,
so each view also gives a placeholder (:func:`placeholder_html`): a ``<div class="mha-view">`` that names the view
and the arguments it was built with (its *recipe*), with a line of text for anywhere scripts cannot run. When the
book is built, ``website/view_payloads.py`` rebuilds the view from its recipe (:func:`view_from_recipe`), asks it for
:func:`site_payload`, and embeds that in the page (:func:`encode_payload`), where ``views.js`` (:mod:`mha.views.widget`)
draws it and answers every control without a kernel:

- :func:`table_payload`, the default: every view the menus and sliders can reach, computed here by the view's
  ``site_view`` (:class:`~mha.views.contract.TableView`) and stored compactly. A weight is stored as one byte, the
  whole number of hundredths the view's table shows (:func:`~mha.views.heatmaps.weight_hundredths`); repeated text
  is stored once; and the whole is gzip-compressed (browsers inflate it with ``DecompressionStream``). Typed text has
  no list of values, so the site form offers the menus only and says where to type (``site_note``).
- the chapter-1 random-layer explorer sends its layer's weights instead, and the page computes every map itself,
  typed sentences included (:meth:`mha.views.random_layer_explorer.RandomLayerExplorer.site_payload`).

What this module asks of a view is written down in :mod:`mha.views.contract` (:class:`~mha.views.contract.SiteView`,
and :class:`~mha.views.contract.TableView` for a table), so it never imports the views themselves. Views are found
by class name in :data:`SITE_VIEWS`, which names each view's module; a recipe names nothing else.
Every payload is checked against the schema written in ``views.js`` (:func:`mha.views.widget.check_payload`). Used in
(chapter 1, "Multi-head attention") and (chapter 3, "Empirical head roles").
"""

from __future__ import annotations

import base64
import gzip
import html
import importlib
import itertools
import json
import struct
from collections.abc import Mapping

import numpy as np
from ipywidgets import Checkbox, Dropdown, IntSlider, Widget

from mha.core.validation import InputError, check_type
from mha.views.contract import SiteView, TableView
from mha.views.heatmaps import COLORMAP, KEY_AXIS, QUERY_AXIS, AttentionMap, cell_colours, weight_hundredths
from mha.views.widget import check_payload

__all__ = ["SITE_VIEWS", "PAYLOAD_VERSION", "placeholder_html", "notebook_bundle", "view_from_recipe", "site_payload",
           "table_payload",
           "encode_payload", "decode_payload", "map_payload", "stored_weights"]

SITE_VIEWS: dict[str, str] = {
    "RandomLayerExplorer": "mha.views.random_layer_explorer",
    "ModelHeadExplorer": "mha.views.model_explorer",
    "InductionLabExplorer": "mha.views.induction_explorer",
    "HeadCountStudyExplorer": "mha.views.head_count_explorer",
    "TrainingTimelineView": "mha.views.training_timeline",
}
"""The only views a recipe can rebuild: each class's name, and the module that defines it (imported when needed)."""

PAYLOAD_VERSION = 2
"""Bumped when the payload's layout changes; ``views.js`` draws one version and refuses any other."""


def _check_explorer(explorer, contract: type = SiteView) -> None:
    """Raise unless ``explorer`` is one of the book's views: anything that has what ``contract`` lists."""
    if not isinstance(explorer, contract):
        raise InputError(f"explorer should be one of the book's views, e.g. RandomLayerExplorer(), got "
                         f"{explorer!r:.60} ({type(explorer).__name__}).")


def placeholder_html(explorer: SiteView) -> str:
    """What a notebook stores for the website: the view's recipe, and a text line for where no script runs.

    Deterministic (nbval compares it): the recipe is JSON with sorted keys, HTML-escaped into an attribute.
    """
    _check_explorer(explorer)
    recipe = explorer.recipe()
    text = html.escape(explorer.describe().replace(": run the notebook to use it.", ""))
    if recipe is None:
        return (f"<div class='mha-view-unavailable'><p>{text}: this view needs a running notebook (the launch "
                f"buttons at the top of the page open one).</p></div>")
    attribute = html.escape(json.dumps(recipe, sort_keys=True, ensure_ascii=True), quote=True)
    return (f"<div class='mha-view' data-mha-recipe=\"{attribute}\"><p class='mha-view-fallback'>{text}. This "
            f"interactive view runs in your browser on the book's website, and in a running notebook.</p></div>")


def notebook_bundle(explorer: SiteView, shown: Widget, **kwargs) -> dict:
    """What a notebook stores for ``explorer``: the widget ``shown`` (drawn by ``views.js`` in Jupyter), the one line
    of text for where no widget runs, and the placeholder the website fills (myst-nb prefers it, ``_config.yml``)."""
    bundle = shown._repr_mimebundle_(**kwargs)
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})  # anywidget adds metadata
    return {**data, "text/plain": explorer.describe(), "text/html": placeholder_html(explorer)}, metadata


def view_from_recipe(recipe: Mapping) -> SiteView:
    """The explorer a recipe describes; ``ValueError`` for a view that is not one of :data:`SITE_VIEWS`."""
    if not isinstance(recipe, Mapping) or not isinstance(recipe.get("arguments"), Mapping):
        raise ValueError(f"a view recipe is a mapping with 'view' and 'arguments', got {recipe!r}.")
    name = recipe.get("view")
    if not isinstance(name, str) or name not in SITE_VIEWS:
        raise ValueError(f"{name!r} is not one of the book's views ({', '.join(sorted(SITE_VIEWS))}).")
    return getattr(importlib.import_module(SITE_VIEWS[name]), name)(**recipe["arguments"])


def site_payload(explorer: SiteView, *, hosted: bool = False) -> dict:
    """What ``views.js`` needs to draw ``explorer``: the view's own choice, or :func:`table_payload`.

    ``hosted``: for Jupyter, where the kernel can type and train, so the website's note on what it cannot do is left
    out, and so are the model the page would run and the model it would train (``live_training``). The rest is the
    website's payload: in Jupyter too ``views.js`` answers every control from the payload alone (it sends nothing
    back to the kernel) and draws grids and comparisons of many settings at once, so a table holds every reachable
    view there as well.
    """
    _check_explorer(explorer)
    payload = explorer.site_payload()
    if hosted:  # the kernel trains section 3.7's live model itself
        payload.pop("live_training", None)
    model = None if hosted else explorer.page_model()
    if model is not None:
        payload["page_model"] = model
    # a view that runs typed token ids through its own models in the page (chapter 3, "Heads are not preassigned")
    sequences = None if hosted else getattr(explorer, "page_sequences", lambda: None)()
    if sequences is not None:
        payload["typed_sequences"] = sequences
    return check_payload({"version": PAYLOAD_VERSION,
                          "guidance": {"try": explorer.what_to_try, "notice": explorer.what_to_notice},
                          "note": "" if hosted else explorer.site_note, "opening": explorer.opening,
                          "axes": {"key": KEY_AXIS, "query": QUERY_AXIS, "colormap": COLORMAP},
                          "palette": cell_colours(), **payload})


class _Strings:
    """Each distinct string (or list of strings) once, referred to by its index; map weights in one byte array."""

    def __init__(self) -> None:
        self.items: list = []
        self._index: dict = {}
        self.weights = bytearray()

    def __call__(self, item) -> int:
        key = tuple(item) if isinstance(item, list) else item
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(item)
        return self._index[key]


def map_payload(attention_map: AttentionMap, strings: _Strings) -> dict:
    """One map as the page stores it: labels by index, and where its weights start in the byte array.

    Each weight is one byte: its whole hundredths (0 to 100), what the view's table shows; row by row.
    """
    offset = len(strings.weights)
    strings.weights += np.clip(weight_hundredths(attention_map.weights), 0, 100).astype(np.uint8).tobytes()
    return {"title": strings(attention_map.title), "rows": strings(list(attention_map.query_labels)),
            "columns": strings(list(attention_map.key_labels)), "shape": list(attention_map.weights.shape),
            "offset": offset, "marked": [list(cell) for cell in attention_map.marked]}


def _control_kind(control) -> str:
    if isinstance(control, IntSlider):
        return "slider"
    if isinstance(control, Dropdown):
        return "menu"
    if isinstance(control, Checkbox):
        return "checkbox"
    raise ValueError(f"the site form has no control for a {type(control).__name__}.")


def _option_labels(control, values: list) -> list[str]:
    """What each value is called in the control: a menu's own labels, else the value written out."""
    if isinstance(control, Dropdown):
        labels = {}
        for option in control.options:  # a menu's options are values, or (label, value) pairs
            label, value = option if isinstance(option, tuple) else (option, option)
            labels.setdefault(value, str(label))
        return [labels.get(value, str(value)) for value in values]
    return [str(value) for value in values]


def table_payload(explorer: TableView) -> dict:
    """Every view that the site's controls (``site_choices``) can reach, computed and stored once.

    The page has no kernel to compute a view, so every reachable view is stored.
    ``views`` maps a key (each control's option index, joined by "|") to an index into ``drawn``; a value beyond a
    slider's reach (a head past the head count) maps to the view that the package itself would show, clamped.
    """
    _check_explorer(explorer, TableView)
    choices = explorer.site_choices()
    names = list(choices)
    strings = _Strings()
    controls = []
    now = explorer.site_values()
    for name in names:
        control = explorer.controls[name]
        values = list(choices[name])
        controls.append({"name": name, "label": control.description or name, "kind": _control_kind(control),
                         "values": [v if isinstance(v, (bool, int, float, str)) else str(v) for v in values],
                         "labels": _option_labels(control, values),
                         "start": values.index(now[name]) if now[name] in values else 0})
    position = {name: {value: index for index, value in enumerate(choices[name])} for name in names}
    drawn: list[dict] = []
    views: dict[str, int] = {}
    reach: dict[tuple, object] = {}  # (slider, the other controls' values) -> the top the slider reaches there
    for combination in itertools.product(*(choices[name] for name in names)):
        values = dict(zip(names, combination, strict=True))
        key = "|".join(str(position[name][values[name]]) for name in names)
        clamped = {name: min(value, reach.get((name, _others(values, name)), value)) for name, value in values.items()}
        if clamped != values:  # the package would clamp it: the same view, already drawn
            views[key] = views["|".join(str(position[name][clamped[name]]) for name in names)]
            continue
        view = explorer.site_view(values)
        shown = {name: value for name, value in view.shown.items() if name in position}
        for name, top in view.slider_max.items():
            reach[name, _others(values, name)] = top
        effective = {**values, **shown}
        effective_key = "|".join(str(position[name][effective[name]]) for name in names)
        if effective_key in views:
            views[key] = views[effective_key]
            continue
        entry = {"message": strings(view.message),
                 "panels": {name: strings(value) for name, value in view.panels.items()},
                 "top": {name: position[name].get(top, len(choices[name]) - 1)
                         for name, top in view.slider_max.items() if name in position},
                 "shown": {name: position[name][value] for name, value in shown.items()}}
        if view.attention_map is not None:
            entry["map"] = map_payload(view.attention_map, strings)
        views[key] = views[effective_key] = len(drawn)
        drawn.append(entry)
    return {"kind": "table", "controls": controls, "views": views, "drawn": drawn, "strings": strings.items,
            "weights": bytes(strings.weights)}


def _others(values: dict, leave_out: str) -> tuple:
    """The values of every control but ``leave_out``, in order: what a slider's reach may depend on."""
    return tuple((name, value) for name, value in values.items() if name != leave_out)


def encode_payload(payload: dict) -> str:
    """The payload as base64 text of gzip-compressed bytes: the JSON's length (4 bytes, little-endian), the JSON,
    then the map weights (``payload["weights"]``, one byte each). The same payload gives the same text."""
    check_type("payload", payload, dict, "a view's payload (a dict), e.g. site_payload(view)")
    content = {key: value for key, value in payload.items() if key != "weights"}
    text = json.dumps(content, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    raw = struct.pack("<I", len(text)) + text + payload.get("weights", b"")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def decode_payload(encoded: str) -> dict:
    """The payload :func:`encode_payload` wrote, for tests and for anyone who wants the numbers."""
    check_type("encoded", encoded, str, "the text that encode_payload wrote")
    try:
        raw = gzip.decompress(base64.b64decode(encoded))
        (length,) = struct.unpack("<I", raw[:4])
        content = json.loads(raw[4:4 + length].decode("utf-8"))
    except (ValueError, OSError, EOFError, struct.error) as problem:  # base64's, gzip's, JSON's and UTF-8's errors
        raise InputError(f"encoded is not a payload that encode_payload wrote ({problem}); pass the text it "
                         "returned, e.g. encode_payload(site_payload(view)).") from None
    if not isinstance(content, dict):
        raise InputError("encoded is not a payload that encode_payload wrote (its JSON is no object); pass the text "
                         "it returned, e.g. encode_payload(site_payload(view)).")
    return {**content, "weights": raw[4 + length:]}


def stored_weights(payload: dict, drawn_map: dict) -> np.ndarray:
    """A stored map's weights (rows, columns) as the page shows them, in hundredths."""
    check_type("payload", payload, dict, "a view's payload (a dict), e.g. decode_payload(text)")
    check_type("drawn_map", drawn_map, dict, "one stored map of the payload, e.g. payload['drawn'][0]['map']")
    if not isinstance(payload.get("weights"), bytes) or not {"shape", "offset"} <= drawn_map.keys():
        raise InputError("stored_weights reads a decoded table payload (decode_payload(text), with its 'weights') "
                         "and one of its stored maps (payload['drawn'][i]['map'], with 'shape' and 'offset').")
    rows, columns = drawn_map["shape"]
    start = drawn_map["offset"]
    return np.frombuffer(payload["weights"], dtype=np.uint8, count=rows * columns, offset=start).reshape(rows, columns)
