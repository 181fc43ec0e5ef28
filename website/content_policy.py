"""Every page of the site carries a Content-Security-Policy that lets only the site's own scripts run.

A Sphinx extension, connected in _config.yml (``sphinx: local_extensions``). When the build has written the pages,
it rewrites each one with a ``<meta http-equiv="Content-Security-Policy">`` first in its head (after the charset):

- ``script-src 'self'`` and the sha256 of each inline script and inline event handler the page itself holds (the
  theme's ``onclick="window.print()"`` among them, hence ``'unsafe-hashes'``), so a script injected into a page, or
  one a tampered payload tried to add, does not run; ``'wasm-unsafe-eval'`` lets the chapter-3 views compile the
  model's WebAssembly matrix product, and nothing else;
- ``object-src 'none'`` and ``base-uri 'none'``; images, fonts, styles and requests from the site, ``data:`` and
  ``blob:`` only.

A meta tag works from ``file://`` too, where no server sends headers. The inline script that names sphinx-thebe's
outside address (``THEBE_JS_URL``) is emptied first: the book never starts Thebe, and no page names an outside
script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

EXECUTABLE_TYPES = {"", "text/javascript", "application/javascript", "module"}
INLINE_SCRIPT = re.compile(r"<script(?P<attributes>[^>]*)>(?P<body>.*?)</script>", re.DOTALL)
INLINE_HANDLER = re.compile(r"""\son[a-z]+=(?:"(?P<double>[^"]*)"|'(?P<single>[^']*)')""")
THEBE_ADDRESS = re.compile(r'const THEBE_JS_URL = "https?://[^"]*"')
POLICY_TAG = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>\s*')
OTHER_SOURCES = ("object-src 'none'", "base-uri 'none'", "default-src 'self'", "img-src 'self' data: blob:",
                 "font-src 'self' data:", "style-src 'self' 'unsafe-inline'", "connect-src 'self' data: blob:",
                 "worker-src 'self' blob:", "frame-src 'none'")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def page_policy(page: str) -> str:
    """The policy for one page's HTML: its own inline scripts and handlers by hash, the site's files by 'self'."""
    hashes = []
    for match in INLINE_SCRIPT.finditer(page):
        attributes = match.group("attributes")
        if re.search(r"\bsrc=", attributes):
            continue
        kind = re.search(r"""\btype=["']([^"']*)["']""", attributes)
        if (kind.group(1).strip().lower() if kind else "") in EXECUTABLE_TYPES:
            hashes.append(_sha256(match.group("body")))
    # an attribute's value is hashed as the browser reads it, its character references decoded
    handlers = [_sha256(html.unescape(match.group("double") if match.group("double") is not None
                                      else match.group("single"))) for match in INLINE_HANDLER.finditer(page)]
    scripts = " ".join(["'self'", "'wasm-unsafe-eval'", *(["'unsafe-hashes'"] if handlers else []),
                        *dict.fromkeys(hashes + handlers)])
    return "; ".join([f"script-src {scripts}", *OTHER_SOURCES])


def with_policy(page: str) -> str:
    """``page`` with the thebe address emptied and its policy first in its head, after the charset (replacing any)."""
    page = THEBE_ADDRESS.sub('const THEBE_JS_URL = ""', POLICY_TAG.sub("", page))
    tag = f'<meta http-equiv="Content-Security-Policy" content="{page_policy(page)}">'
    head = re.search(r"<head[^>]*>(\s*<meta charset=[^>]*>)?", page)  # after the charset, in the first 1024 bytes
    if head is None:  # a bare page, such as the site's redirect to the landing page
        return tag + "\n" + page
    return page[:head.end()] + "\n    " + tag + page[head.end():]


def protect_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        if "_vendor" in path.parts or "_static" in path.parts or "_sources" in path.parts:
            continue
        page = path.read_text(encoding="utf-8")
        path.write_text(with_policy(page), encoding="utf-8")


def setup(app):
    app.connect("build-finished", protect_pages, priority=900)  # after every extension has written its pages
    return {"parallel_read_safe": True, "parallel_write_safe": True}
