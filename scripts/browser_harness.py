"""What everything that opens the book in a browser shares: the tests (tests/conftest.py) and the scripts that weigh
and time the built site (page_weights.py, bench_site_views.py, bench_web_model.py).

- :func:`find_chromium`: Debian's Chromium, which Playwright drives;
- :data:`CHROMIUM_ARGS`: how it is launched, quiet and with no calls home;
- :func:`served`: a folder served on 127.0.0.1 as `make serve` serves it, without a line of log per request;
- :func:`offline_proxy`: a browser context that reaches that address and nothing else.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

# Chromium as every browser test and script launches it (Playwright's launch(args=...)): quiet, with no calls home
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def find_chromium() -> str | None:
    """Debian's Chromium on PATH (``chromium``, or ``chromium-browser`` elsewhere), or None where it is missing."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files like ``python -m http.server``, without writing a line per request."""

    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    """A threaded file server that ignores a browser hanging up on a request it no longer needs (its favicon.ico, when
    a page closes)."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


@contextmanager
def served(folder: Path | str):
    """``folder`` served on 127.0.0.1 (a free port), as `make serve` serves the site: uncompressed, in a thread of this
    process; yields its address, ending in ``/``."""
    server = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


_REFUSING = None  # bound and never listening, so that every connection to it is refused; made on first use


def refusing_proxy() -> str:
    """The address of a proxy that refuses every connection, for as long as this process runs."""
    global _REFUSING
    if _REFUSING is None:
        _REFUSING = socket.socket()
        _REFUSING.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{_REFUSING.getsockname()[1]}"


def offline_proxy(site: str) -> dict:
    """Playwright's ``proxy`` option for a context that reaches ``site`` and nothing else.

    Every request but those to the served site's own host and port goes to :func:`refusing_proxy`, and fails
    (net::ERR_PROXY_CONNECTION_FAILED); a site on disk (file://) is read without any request. A proxy, not
    Playwright's request interception (``route``), which would turn the browser's cache off: pages then share the
    theme's files as a reader's browser does, and each page's weight is still every byte it loads.
    """
    proxy = {"server": refusing_proxy()}
    if urlsplit(site).netloc:
        proxy["bypass"] = urlsplit(site).netloc
    return proxy
