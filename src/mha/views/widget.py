"""One module draws every view: ``views.js``, run by anywidget in Jupyter and by the book's website (every chapter).

A view is a plain description (its controls, its data, what it draws), sent as a *payload*: a JSON object whose
schema is written once, in ``web/views.js`` between ``schema-begin`` and ``schema-end``. This module reads that
schema (:data:`PAYLOAD_SCHEMA`) and checks every payload against it before it leaves Python
(:func:`check_payload`, with the ``jsonschema`` library); ``views.js`` checks it again when it opens one.

- :class:`ViewWidget` is the anywidget that shows a payload in JupyterLab, Notebook 7, VS Code or Colab: its ES
  module is ``views.js`` itself, with the ``render({model, el})`` entry point that anywidget calls.
- :func:`web_file` gives the text of ``views.js`` and ``views.css``, which the website's build
  (``site/view_payloads.py``) copies into the site, so that the page draws with the very same code.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from importlib.resources import files

import anywidget
import traitlets

from mha.core.validation import check_type

__all__ = ["PAYLOAD_SCHEMA", "web_file", "payload_schema", "check_payload", "ViewWidget"]

WEB_FILES = ("views.js", "views.css", "model.js")
_SCHEMA_BLOCK = re.compile(r"/\* schema-begin \*/(.*?)/\* schema-end \*/", re.DOTALL)

_ESM_ENTRY = """
export default {
  async render({ model, el }) {
    el.classList.add("mha-view");
    const open = () => globalThis.mhaViews.open(el, model.get("payload"), { hosted: true });
    await open();
    model.on("change:payload", open);
    return () => model.off("change:payload", open);
  },
};
"""


@cache
def web_file(name: str) -> str:
    """The text of one of the views' web files (``views.js``, ``views.css`` or ``model.js``), from the installed
    package."""
    if name not in WEB_FILES:
        raise ValueError(f"{name!r} is not one of the views' web files ({', '.join(WEB_FILES)}).")
    return (files("mha.views") / "web" / name).read_text(encoding="utf-8")


@cache
def payload_schema() -> dict:
    """The payload's JSON Schema, read from the block of ``views.js`` that its own checker uses."""
    found = _SCHEMA_BLOCK.search(web_file("views.js"))
    if found is None:
        raise ValueError("views.js has no schema block (/* schema-begin */ ... /* schema-end */); reinstall mha.")
    return json.loads(found.group(1))


PAYLOAD_SCHEMA = payload_schema()

_GRAMMAR_AT_IMPORT = "rfc3987_syntax"
"""An optional module that jsonschema imports, when it is installed, for its "iri" string formats: it compiles a
grammar as it is imported, about a second of CPU in every kernel that shows a view. The payload's schema checks no
string format, so :func:`_payload_validator` imports jsonschema without it."""


@cache
def _payload_validator():
    """jsonschema's validator for :data:`PAYLOAD_SCHEMA`, built once (the schema itself checked once, not per payload).

    jsonschema is imported here, on the first payload, with :data:`_GRAMMAR_AT_IMPORT` kept out of that import only
    (it is importable again afterwards, for any other library that wants it).
    """
    kept_out = _GRAMMAR_AT_IMPORT not in sys.modules
    if kept_out:
        sys.modules[_GRAMMAR_AT_IMPORT] = None  # `import` now raises ImportError, which jsonschema expects and skips
    try:
        import jsonschema
    finally:
        if kept_out and sys.modules.get(_GRAMMAR_AT_IMPORT, 0) is None:
            del sys.modules[_GRAMMAR_AT_IMPORT]
    checker = jsonschema.validators.validator_for(PAYLOAD_SCHEMA)
    checker.check_schema(PAYLOAD_SCHEMA)
    return checker(PAYLOAD_SCHEMA)


def check_payload(payload: dict) -> dict:
    """``payload`` unchanged if it fits :data:`PAYLOAD_SCHEMA`; ``ValueError`` naming the first misfit otherwise.

    The map weights (``payload["weights"]``, bytes) travel beside the JSON and are not part of the schema.
    """
    check_type("payload", payload, dict, "a view's payload (a dict), e.g. site_payload(view)")
    content = {key: value for key, value in payload.items() if key != "weights"}
    validator = _payload_validator()  # imports jsonschema first
    from jsonschema.exceptions import best_match

    problem = best_match(validator.iter_errors(content))  # the misfit jsonschema.validate would raise
    if problem is not None:
        where = "/".join(str(part) for part in problem.absolute_path) or "the payload"
        raise ValueError(f"the view's payload does not fit its schema at {where}: {problem.message}")
    return payload


class ViewWidget(anywidget.AnyWidget):
    """A view in Jupyter: ``payload`` is the encoded payload (:func:`mha.views.payloads.encode_payload`), drawn
    by ``views.js``, the module that also draws the website's views."""

    _esm = "globalThis.mhaViewsHostedByWidget = true;\n" + web_file("views.js") + _ESM_ENTRY
    _css = web_file("views.css")
    payload = traitlets.Unicode("").tag(sync=True)
