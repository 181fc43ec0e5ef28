"""Every interactive view of the book works on the website, without a kernel.

A Sphinx extension, connected in _config.yml (``sphinx: local_extensions``). A notebook's view stores, beside its
live ipywidgets form, a placeholder ``<div class="mha-view" data-mha-recipe="...">`` (``mha.views.payloads``).
For each page that holds one, this extension

1. rebuilds the view from its recipe with the book's own package, and embeds what the page needs to draw it
   (``payloads.site_payload``: every view the menus reach, or the chapter-1 layer itself) in the placeholder, as
   base64 text of gzip-compressed bytes inside ``<script type="application/octet-stream">``, which the browser
   never runs;
2. adds ``views.js`` and ``views.css`` (``mha.views.widget.web_file``: the script joined from the package's ES
   modules under ``mha/views/web/``, the same text Jupyter runs, written to ``_build/html/_vendor/mha/``) to that
   page only, so pages without a view load nothing more. They inflate the payload
   with the browser's DecompressionStream and draw the view; nothing is fetched, so the page works opened from disk
   (file://).
3. writes the pretrained model for the page (``mha.pretrained.web_export``) to ``_vendor/mha/model/``, with
   ``model.js`` beside views.js: a chapter-3 view loads them only when the reader types a sentence. Each such view's
   payload states how closely the page's model agrees with the package's encoder on the view's own sentences,
   measured here by running model.js under Node.js on the files just written. ``trainer.js`` (the tiny induction
   model trained in the page) goes beside them too, loaded only when a reader presses section 3.5's train button.

myst-nb is told to prefer the placeholder's HTML to the widget (``nb_mime_priority_overrides`` in _config.yml).
A view that cannot be rebuilt fails the build with a warning that names the page. Payloads are kept for the
length of one build, so a view that appears twice is computed once.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

SERVED = "_vendor/mha"  # in the built site; Jupyter Book 1 would add anything under _static/ to every page
# model.js and trainer.js are linked from no page: views.js adds one when the reader asks (a typed sentence, or
# "Train one in your page" in section 3.5's timeline)
FILES = ("views.js", "views.css", "model.js", "trainer.js")
PLACEHOLDER = re.compile(r"""<div class=['"]mha-view['"] data-mha-recipe="([^"]*)">""")
_PAYLOADS: dict[str, str] = {}  # recipe -> encoded payload, for one build
_MODEL: dict[str, int] = {}  # what the build wrote of the page's model


def copy_view_files(app) -> None:
    _PAYLOADS.clear()
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / SERVED
    target.mkdir(parents=True, exist_ok=True)
    from mha.views.widget import web_file

    for name in FILES:
        (target / name).write_text(web_file(name), encoding="utf-8")
    from mha.pretrained.web_export import export_web_model

    manifest = export_web_model(target / "model")
    # what the first sentence reads before any row of the word table: manifest, vocabulary, embeddings and layers
    _MODEL["bytes"] = (target / "model" / "manifest.bin").stat().st_size + sum(
        part["bin_bytes"] for part in manifest["parts"] if not part["name"].startswith("words-"))


def page_fidelity(app, sentences: list[str]) -> dict:
    """How far the page's model (model.js on the parts in the build) is from the package's encoder on ``sentences``:
    the largest difference of any attention weight, and the share of rows whose most-attended token is the same."""
    import numpy as np
    from model_in_node import run_model_in_node  # beside this file; local_extensions puts website/ on the path

    from mha.pretrained.encoder import MiniLMEncoder

    with tempfile.TemporaryDirectory() as work:
        report = run_model_in_node(Path(app.outdir) / SERVED / "model", [{"text": text} for text in sentences],
                                   Path(work))
    if report["open_error"]:
        raise RuntimeError(f"model.js could not open the model: {report['open_error']}")
    encoder = MiniLMEncoder.load()
    largest, same, rows = 0.0, 0, 0
    for text, result in zip(sentences, report["results"], strict=True):
        if result["error"]:
            raise RuntimeError(f"model.js refused {text!r}: {result['error']}")
        expected = encoder.trace(text).sentence().attention  # (layers, heads, n, n)
        found = result["attention"]
        largest = max(largest, float(np.abs(found - expected).max()))
        same += int((found.argmax(-1) == expected.argmax(-1)).sum())
        rows += expected.shape[0] * expected.shape[1] * expected.shape[2]
    return {"sentences": len(sentences), "max_difference": largest, "same_argmax": same / rows}


def _payload(app, recipe_text: str) -> str:
    """The encoded payload of one view, computed once per build."""
    if recipe_text not in _PAYLOADS:
        from mha.views.payloads import encode_payload, site_payload, view_from_recipe

        explorer = view_from_recipe(json.loads(recipe_text))
        payload = site_payload(explorer)
        if "page_model" in payload:  # measured on the view's own sentences, with the files the page will load
            payload["page_model"]["fidelity"] = page_fidelity(app, list(explorer.menu_sentences))
            payload["page_model"]["download_bytes"] = _MODEL["bytes"]
        _PAYLOADS[recipe_text] = encode_payload(payload)
    return _PAYLOADS[recipe_text]


def fill_views(app, pagename, templatename, context, doctree) -> None:
    """Put each view's payload into its placeholder, and the scripts that draw it into the page."""
    body = context.get("body") or ""
    if "mha-view" not in body:
        return

    def filled(match: re.Match) -> str:
        recipe_text = html.unescape(match.group(1))
        try:
            encoded = _payload(app, recipe_text)
        except Exception as problem:  # the build says which view failed, and why
            logger.warning(f"{pagename}: cannot draw the view {recipe_text} for the website: "
                           f"{type(problem).__name__}: {problem}", location=pagename)
            return match.group(0)
        return f"{match.group(0)}<script type='application/octet-stream' class='mha-view-payload'>{encoded}</script>"

    body, count = PLACEHOLDER.subn(filled, body)
    if not count:
        return
    styles = context["pathto"](f"{SERVED}/views.css", 1)
    script = context["pathto"](f"{SERVED}/views.js", 1)
    context["body"] = f"<link rel='stylesheet' href='{styles}'>{body}<script src='{script}'></script>"


def setup(app):
    app.connect("builder-inited", copy_view_files)
    app.connect("html-page-context", fill_views)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
