"""Every file a page of the site loads comes from the site itself, and no page weighs more than 3 MB, so
the book reads the same offline, served from 127.0.0.1 or opened straight from disk (file://).

A Sphinx extension, connected in _config.yml (``sphinx: local_extensions``). It:

1. typesets every formula at build time (``html_math_renderer = "prerendered"``): ``website/render_math.js`` runs
   MathJax (the npm package, from package-lock.json) under Node.js, once per build, and each formula goes into the
   page as MathJax's SVG, drawn from one copy per page of each glyph's outline, with its MathML beside it for
   screen readers. Pages load no math script (MathJax's bundle was 2.3 MB a page), only a 3 kB stylesheet,
   ``_vendor/mathjax/svg.css``; nothing is fetched to draw a formula, so it shows the same from file://. A TeX
   error, or a macro TeX does not know, is a build warning (so ``-W`` fails) that names the formula and its source;
2. drops the theme's Font Awesome script (1.5 MB a page, pydata-sphinx-theme's ``fontawesome.js``, which swaps each
   icon for an inline SVG): ``templates/static/webpack-macros.html`` leaves it out of every page. The theme's
   stylesheet already draws the same icons from Font Awesome's webfonts in ``_static/vendor/fontawesome/``, which
   the browser loads only for the icons a page shows;
3. copies the scripts bertviz's views need from ``node_modules/`` (``npm ci`` installs them from
   package-lock.json; ``make book`` runs it) into ``_build/html/_vendor/``. Not into ``_static/``: Jupyter Book 1
   adds every script found in a ``_static`` folder to every page;
4. rewrites, in each page, the CDN addresses that stored notebook outputs carry (bertviz's views load require.js
   with a ``<script>`` tag, then d3 and jQuery through ``require.config``) to the vendored copies, relative to
   the page. A CDN address this table does not know fails the build with a warning that names it;
5. writes each inline script once (see ``one_copy_of_each_inline_script``);
6. mends what axe-core (``tests/site/test_site.py``, ``tests/page_audit.py``) finds wrong in the markup of the theme
   and of the tools the book is built with (see ``accessible_markup`` and ``label_toctree_toggles``): each
   displayed formula is a tab stop, since it scrolls sideways when wider than the page; bertviz's views scroll in
   a labelled region a keyboard reaches, and their menus are labelled; ``website/theme.css`` (on every page) lets
   inline code break on a phone, darkens links on the exercises' tinted background, and lets the browser skip the
   cells and bertviz views a reader has not scrolled near yet;
7. gives the site's root page, which only sends the reader on to the landing page, the book's icon (see
   ``icon_for_the_root``): without one, a browser that shows it for a moment asks for /favicon.ico, which the site
   does not have, and logs a 404.

``scripts/page_weights.py`` prints what each page weighs in Chromium; ``tests/site/test_site.py`` keeps every
page within the budget.

myst-nb's ipywidgets manager, which it would load from CDNs, is switched off in _config.yml (``nb_ipywidgets_js: {}``;
no page renders widgets without a kernel). sphinx-thebe's script names a CDN too (``THEBE_JS_URL``), but fetches it
only when a reader presses a thebe button, and ``launch_buttons`` shows none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.ext.mathjax import get_node_equation_number
from sphinx.locale import _
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
VENDOR_DIR = "_vendor"  # in the built site, next to _static/
MATH_RENDERER = "prerendered"  # html_math_renderer: formulas typeset at build time by website/render_math.js
TYPESET = "typeset"  # a math node's attribute: its SVG and MathML, written into the page as they stand
MATH_CSS = "mathjax/svg.css"  # under _vendor/: what MathJax's SVG output needs on the page (written at each build)
THEME_CSS = "theme.css"  # website/theme.css, served from _vendor/: the book's corrections to the theme's stylesheets

# where each vendored file comes from in node_modules/, and where the site serves it (under _vendor/)
VENDORED = {
    "mathjax/LICENSE": "mathjax/LICENSE",  # the formulas' glyphs, in every page's SVG, are MathJax's TeX fonts
    "requirejs/require.js": "requirejs/require.js",
    "d3/dist/d3.min.js": "d3/d3.min.js",
    "d3/LICENSE": "d3/LICENSE",
    "jquery/dist/jquery.min.js": "jquery/jquery.min.js",
    "jquery/LICENSE.txt": "jquery/LICENSE.txt",
}

# CDN address found in a stored notebook output -> the vendored file that replaces it. The d3 and jQuery entries
# are require.js module paths, written without ".js" (bertviz's require.config). jQuery is 3.7, not bertviz's 2.0
# (npm has no 2.0.0); bertviz's views use only $(selector), .append, .val, .text, .on and .empty, the same in 3.7.
# d3 is 7, not bertviz's 5.7.0, whose d3-color parses colour strings in super-linear time (advisory
# GHSA-36jr-mh4h-2g58, fixed in d3-color 3.1); the head and model views call only select, selectAll, min, line, hsl,
# scaleOrdinal and schemeCategory10, the same in 7.
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


def configure(app, config) -> None:
    """Formulas typeset at build time; the theme's macros without its Font Awesome script (templates/)."""
    config.html_math_renderer = MATH_RENDERER
    config.templates_path = [str(HERE / "templates"), *config.templates_path]


NO_NODE_MODULES = ("website/offline_site.py: node_modules/ is missing or incomplete: run `npm ci` in the book's folder "
                   "(make book does), which installs package-lock.json")


def copy_vendored_files(app) -> None:
    """Copy VENDORED from node_modules/ into the built site, before any page is written."""
    if app.builder.format != "html":
        return
    source, target = node_modules(app), Path(app.outdir) / VENDOR_DIR
    if any(not (source / name).exists() for name in VENDORED):
        raise ExtensionError(NO_NODE_MODULES)
    for name, served in VENDORED.items():
        destination = target / served
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, destination)
    shutil.copyfile(HERE / THEME_CSS, target / THEME_CSS)


class MathJaxInNode:
    """website/render_math.js under Node.js, started once per build (and once per process, should Sphinx write pages
    in parallel), answering one JSON line per request."""

    _running: dict[int, MathJaxInNode] = {}  # process id -> its MathJax

    def __init__(self, app):
        node = shutil.which("node") or shutil.which("nodejs")
        if node is None:
            raise ExtensionError("website/offline_site.py typesets the formulas with Node.js: "
                                 "apt-get install nodejs npm")
        if not (node_modules(app) / "mathjax").is_dir():
            raise ExtensionError(NO_NODE_MODULES)
        self.process = subprocess.Popen([node, str(HERE / "render_math.js"), str(app.srcdir)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, encoding="utf-8")

    @classmethod
    def get(cls, app) -> MathJaxInNode:
        if os.getpid() not in cls._running:
            cls._running[os.getpid()] = cls(app)
        return cls._running[os.getpid()]

    @classmethod
    def stop(cls) -> None:
        mathjax = cls._running.pop(os.getpid(), None)
        if mathjax is not None:
            mathjax.process.stdin.close()  # render_math.js ends when its input does
            mathjax.process.wait(timeout=30)

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise ExtensionError(f"website/render_math.js stopped (exit status {self.process.poll()})")
        return json.loads(answer)


def write_math_stylesheet(app) -> None:
    """The stylesheet MathJax's SVG output needs (display formulas, the hidden MathML, ...), from that MathJax."""
    if app.builder.format != "html":
        return
    path = Path(app.outdir) / VENDOR_DIR / MATH_CSS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MathJaxInNode.get(app).ask({"stylesheet": True})["css"], encoding="utf-8")


def displayed_tex(node) -> str:
    """The TeX sphinx.ext.mathjax would hand MathJax for a displayed formula: an amsmath environment as it stands;
    an equation with line breaks as a split, several equations (blank lines apart) one under the other, aligned."""
    if node["nowrap"]:
        return node.astext()
    parts = [rf"\begin{{split}}{part}\end{{split}}" if r"\\" in part else part
             for part in node.astext().split("\n\n") if part.strip()]
    tex = "\\\\".join(parts)
    return rf"\begin{{align}}\begin{{aligned}}{tex}\end{{aligned}}\end{{align}}" if len(parts) > 1 else tex


def typeset_page(app, doctree, docname) -> None:
    """Typeset all of a page's formulas in one request to MathJax, before the page is written (doctree-resolved),
    with one copy of each glyph's outline for the whole page."""
    if app.builder.format != "html":
        return
    formulas = [(node, node.astext(), False) if isinstance(node, nodes.math) else (node, displayed_tex(node), True)
                for node in doctree.findall(lambda node: isinstance(node, (nodes.math, nodes.math_block)))]
    if formulas:
        answers = MathJaxInNode.get(app).ask({"formulas": [[tex, display] for _, tex, display in formulas],
                                              "share": True})
        for (node, tex, _), answer in zip(formulas, answers["typeset"], strict=True):
            keep(node, tex, answer)
        if answers["glyphs"]:  # the outlines of the glyphs they draw, once for the page, in a hidden SVG
            doctree.insert(0, nodes.raw("", answers["glyphs"], format="html"))


def keep(node, tex: str, answer: dict) -> None:
    """Keep MathJax's SVG and MathML on the math node for the writer, or warn (-W fails the build) that TeX refused
    the formula, which the page then shows as TeX (and tests/site/test_site.py fails on)."""
    if "error" in answer:
        logger.warning(f"formula not typeset: {answer['error']}: {tex!r}", location=node)
    node[TYPESET] = answer.get("html")


def typeset(translator, node, tex: str, display: bool) -> str:
    """The formula as its page typeset it (typeset_page); typeset now, with its own glyphs' outlines, if Sphinx writes
    it outside a page's body (a title with a formula, in the navigation)."""
    if TYPESET not in node:
        answer = MathJaxInNode.get(translator.builder.app).ask({"formulas": [[tex, display]], "share": False})
        keep(node, tex, answer["typeset"][0])
    return node[TYPESET] or translator.encode(tex)


def visit_math(translator, node) -> None:
    translator.body.append(translator.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    translator.body.append(typeset(translator, node, node.astext(), display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(translator, node) -> None:
    """As sphinx.ext.mathjax writes a displayed formula (its number, then the formula), but typeset. The theme
    lets a formula wider than the column scroll sideways (``div.math mjx-container {overflow: auto}``), so each
    one is a tab stop: a reader without a mouse or touch screen can scroll it with the arrow keys."""
    translator.body.append(translator.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node["number"] and not node["nowrap"]:
        translator.body.append(f'<span class="eqno">({get_node_equation_number(translator, node)})')
        translator.add_permalink_ref(node, _("Link to this equation"))
        translator.body.append("</span>")
    formula = typeset(translator, node, displayed_tex(node), display=True)
    translator.body.append(re.sub(r"^<mjx-container ", '<mjx-container tabindex="0" ', formula) + "</div>\n")
    raise nodes.SkipNode


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
                       "VENDORED (and CDN_REWRITES, for an address in a notebook output) in website/offline_site.py, "
                       "or switch it off in _config.yml", location=pagename)


# bertviz's view: its container, and a menu it labels with text beside it ("Layer: <select id="layer">")
BERTVIZ_VIEW = re.compile(r'<div id="(bertviz-[0-9a-f]+)" style="([^"]*)">')
BERTVIZ_MENU = re.compile(r'(\b[A-Z][a-z]+: <select id="\w+"></select>)')
DATAFRAME = re.compile(r'<table[^>]*\bclass="dataframe"[^>]*>.*?</table>', re.DOTALL)


def accessible_markup(body: str) -> str:
    """A page's body with what axe-core reports as serious or critical, or cheap to mend, mended:

    - bertviz's view scrolls sideways inside itself, in a region named for screen readers and reached by the
      Tab key (its model view, twelve heads side by side, is wider than the column even on a laptop), and its
      menus are labelled by the text beside them;
    - myst-nb's "Show code cell source" toggles are named by the text they show, not "Toggle hidden content";
    - the bibliography's entries are the items of its list (docutils marks them ``doc-biblioentry``, a role
      DPUB-ARIA deprecated, inside ``role="list"``, which then has no item);
    - a pandas table's empty header cells (the corner above the index, the index name's row) are plain cells.
    """
    body = BERTVIZ_VIEW.sub(r'<div id="\1" role="region" aria-label="bertviz attention view" tabindex="0" '
                            r'style="\2 overflow-x: auto;">', body)
    body = BERTVIZ_MENU.sub(r"<label>\1</label>", body)
    body = body.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    body = body.replace(' role="doc-biblioentry"', ' role="listitem"')
    return DATAFRAME.sub(lambda table: table.group(0).replace("<th></th>", "<td></td>"), body)


def label_toctree_toggles(navigation):
    """The navigation's toggles named after the entry they open: pydata-sphinx-theme draws each as a chevron icon
    in a ``<summary>`` with no text, which a screen reader can only call "disclosure triangle". The theme hands
    the navigation over as HTML or as the BeautifulSoup tree it built it with; it comes back in the same form."""
    from bs4 import BeautifulSoup  # pydata-sphinx-theme's own dependency

    soup = navigation if isinstance(navigation, BeautifulSoup) else BeautifulSoup(navigation, "html.parser")
    for summary in soup.select("li.has-children > details > summary"):
        entry = summary.find_parent("li").find("a", recursive=False)
        if entry is not None and not summary.get_text(strip=True):
            summary["aria-label"] = f"Sections of {entry.get_text(' ', strip=True)}"
    return soup if soup is navigation else str(soup)


def make_accessible(app, pagename, templatename, context, doctree) -> None:
    """Mend the page's body (accessible_markup) and the navigation the theme draws around it."""
    if context.get("body"):
        context["body"] = accessible_markup(context["body"])
    draw_toctree = context.get("generate_toctree_html")
    if draw_toctree is not None:
        context["generate_toctree_html"] = lambda *args, **kwargs: label_toctree_toggles(draw_toctree(*args, **kwargs))


ROOT_ICON = '<link rel="icon" href="_static/{name}" type="image/svg+xml">'


def icon_for_the_root(app, exception) -> None:
    """The root index.html, Jupyter Book's redirect to the landing page (a bare meta refresh, no <head>), with the
    icon every other page names (``html_favicon``, which Sphinx copies into _static/)."""
    root = Path(app.outdir) / "index.html"
    if exception is not None or app.builder.format != "html" or not root.exists() or not app.config.html_favicon:
        return
    page = root.read_text(encoding="utf-8")
    if 'rel="icon"' not in page and "<head" not in page:
        icon = ROOT_ICON.format(name=Path(app.config.html_favicon).name)
        root.write_text(icon + "\n" + page, encoding="utf-8")


def setup(app):
    app.add_html_math_renderer(MATH_RENDERER, (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", configure)
    app.connect("builder-inited", copy_vendored_files)
    app.connect("builder-inited", write_math_stylesheet)
    app.connect("doctree-resolved", typeset_page)
    app.connect("build-finished", lambda app, exception: MathJaxInNode.stop())
    app.connect("build-finished", icon_for_the_root, priority=800)  # before content_policy writes the pages' policy
    # on every page (3 kB, fetched once): a formula can reach a page whose math domain does not know it (glue)
    app.add_css_file(f"../{VENDOR_DIR}/{MATH_CSS}")  # relative to _static/
    app.add_css_file(f"../{VENDOR_DIR}/{THEME_CSS}", priority=900)  # after the theme's stylesheets
    app.connect("env-updated", one_copy_of_each_inline_script)
    app.connect("html-page-context", load_from_the_site, priority=900)  # after mathjax and myst-nb add theirs
    app.connect("html-page-context", make_accessible, priority=900)  # after the theme adds generate_toctree_html
    return {"parallel_read_safe": True, "parallel_write_safe": True}
