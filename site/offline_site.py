"""Every file a page of the site loads comes from the site itself (issue 9), so the book reads the same offline,
served from 127.0.0.1 or opened straight from disk (file://).

A Sphinx extension, connected in _config.yml (``sphinx: local_extensions``). It:

1. copies the scripts the pages need from ``node_modules/`` (``npm ci`` installs them from package-lock.json;
   ``make book`` runs it) into ``_build/html/_vendor/``. Not into ``_static/``: Jupyter Book 1 adds every script
   found in a ``_static`` folder to every page. MathJax is its SVG bundle with every TeX extension built in
   (``tex-svg-full.js``): it fetches no component and no font at load, so formulas typeset from file:// too;
2. points Sphinx at that MathJax (``mathjax_path``);
3. rewrites, in each page, the CDN addresses that stored notebook outputs carry (bertviz's views load require.js
   with a ``<script>`` tag, then d3 and jQuery through ``require.config``) to the vendored copies, relative to
   the page. A CDN address this table does not know fails the build with a warning that names it;
4. writes each inline script once (see ``one_copy_of_each_inline_script``).

myst-nb's ipywidgets manager, which it would load from CDNs, is switched off in _config.yml (``nb_ipywidgets_js: {}``;
no page renders widgets without a kernel). sphinx-thebe's script names a CDN too (``THEBE_JS_URL``), but fetches it
only when a reader presses a thebe button, and ``launch_buttons`` shows none.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

VENDOR_DIR = "_vendor"  # in the built site, next to _static/
MATHJAX = "mathjax/tex-svg-full.js"

# where each vendored file comes from in node_modules/, and where the site serves it (under _vendor/)
VENDORED = {
    "mathjax/es5": "mathjax",  # the bundle, and the components its menu loads on demand (accessibility, ...)
    "mathjax/LICENSE": "mathjax/LICENSE",
    "requirejs/require.js": "requirejs/require.js",
    "d3/dist/d3.min.js": "d3/d3.min.js",
    "d3/LICENSE": "d3/LICENSE",
    "jquery/dist/jquery.min.js": "jquery/jquery.min.js",
    "jquery/LICENSE.txt": "jquery/LICENSE.txt",
}
# MathJax's other combined bundles (the site uses one, MATHJAX), and latest.js, which loads MathJax from a CDN
MATHJAX_UNUSED = re.compile(r"(tex|mml)-.*\.js|node-main\.js|latest\.js")

# CDN address found in a stored notebook output -> the vendored file that replaces it. The d3 and jQuery entries
# are require.js module paths, written without ".js" (bertviz's require.config). jQuery is 3.7, not bertviz's 2.0
# (npm has no 2.0.0); bertviz's views use only $(selector), .append, .val, .text, .on and .empty, the same in 3.7.
CDN_REWRITES = {
    "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js": "requirejs/require.js",
    "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min": "d3/d3.min",
    "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min": "jquery/jquery.min",
}
# what a page must not load from: a script, style, image or frame source on another host, or a known CDN anywhere
OUTSIDE = re.compile(r"""\b(?:src|data)\s*=\s*["']?(?:https?:)?//[^"'\s>]+"""
                     r"""|(?:https?:)?//(?:cdn\.jsdelivr\.net|unpkg\.com|cdnjs\.cloudflare\.com|code\.jquery\.com"""
                     r"""|d3js\.org|ajax\.googleapis\.com|fonts\.googleapis\.com)/[^"'\s<>)]*""")


def node_modules(app) -> Path:
    return Path(app.srcdir) / "node_modules"


def set_mathjax_path(app, config) -> None:
    # Sphinx reads a relative mathjax_path inside _static/; the vendored files sit beside it
    config.mathjax_path = f"../{VENDOR_DIR}/{MATHJAX}"


def copy_vendored_files(app) -> None:
    """Copy VENDORED from node_modules/ into the built site, before any page is written."""
    if app.builder.format != "html":
        return
    source, target = node_modules(app), Path(app.outdir) / VENDOR_DIR
    missing = [name for name in VENDORED if not (source / name).exists()]
    if missing:
        raise ExtensionError(f"site/offline_site.py: {', '.join('node_modules/' + m for m in missing)} missing: "
                             "run `npm ci` in the book's folder (make book does), which installs package-lock.json")
    for name, served in VENDORED.items():
        destination = target / served
        if (source / name).is_dir():
            top = str(source / name)
            shutil.copytree(source / name, destination, dirs_exist_ok=True, ignore=lambda folder, names, top=top: [
                n for n in names if folder == top and MATHJAX_UNUSED.fullmatch(n) and n != Path(MATHJAX).name])
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, destination)


def one_copy_of_each_inline_script(app, env) -> None:
    """Sphinx 7.4 writes twice each inline script that an extension adds after the HTML builder has started
    (sphinx-thebe's ``const THEBE_JS_URL = ...``, which then throws "Identifier 'THEBE_JS_URL' has already been
    declared", and sphinx-togglebutton's selector): the builder keeps such a script under the file name None and
    adds it again under '' before writing, and None != '' (sphinx-doc/sphinx#13402, fixed in Sphinx 8.2; Jupyter
    Book 1 needs Sphinx 7). Naming them '' now lets the second addition find the first. Runs after reading,
    before writing."""
    builder = app.builder
    if not hasattr(builder, "_js_files"):
        return
    from sphinx.builders.html._assets import _JavaScript

    builder._js_files[:] = [_JavaScript("", priority=script.priority, **script.attributes)
                            if script.filename is None else script for script in builder._js_files]


def load_from_the_site(app, pagename, templatename, context, doctree) -> None:
    """Rewrite the known CDN addresses in a page's body to the vendored files; warn about any other."""
    body = context.get("body")
    if body:
        for url, served in CDN_REWRITES.items():
            body = body.replace(url, context["pathto"](f"{VENDOR_DIR}/{served}", 1))
        context["body"] = body
    outside = [match.group(0) for match in OUTSIDE.finditer(body or "")]
    outside += [str(script.filename) for script in context.get("script_files", []) if "://" in str(script.filename)]
    outside += [str(sheet.filename) for sheet in context.get("css_files", []) if "://" in str(sheet.filename)]
    for address in dict.fromkeys(outside):
        logger.warning(f"{pagename} loads {address} from outside the site: add the file to package.json and to "
                       "VENDORED (and CDN_REWRITES, for an address in a notebook output) in site/offline_site.py, "
                       "or switch it off in _config.yml", location=pagename)


def setup(app):
    app.connect("config-inited", set_mathjax_path)
    app.connect("builder-inited", copy_vendored_files)
    app.connect("env-updated", one_copy_of_each_inline_script)
    app.connect("html-page-context", load_from_the_site, priority=900)  # after mathjax and myst-nb add theirs
    return {"parallel_read_safe": True, "parallel_write_safe": True}
