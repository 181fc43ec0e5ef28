"""Every launch button of the website opens the reader edition (scripts/reader_edition.py) of its page's notebook.

A Sphinx extension, connected in _config.yml (``sphinx: local_extensions``). sphinx-book-theme builds each notebook
page's launch buttons (Binder, JupyterHub, Colab, and any other ``launch_buttons`` names) from ``repository.url``
and ``repository.branch``, the book's source on ``main``, where a reader would meet raw MyST and unfolded
solutions. This extension, after the theme (``html-page-context``, priority 600):

1. points every launch button at the branch ``reader_edition_branch`` (``_config.yml``, ``sphinx.config``; the
   reader branch, which ``python -m scripts.reader_edition --out _build/reader --commit`` records), where the reader
   notebook lies at the book notebook's path (:func:`reader_launch_url`); a launch address it does not know how to
   move fails the build, so that no button quietly opens the source;
2. points the ".ipynb" download button at the page's reader notebook in the website itself,
   ``notebooks/<path of the notebook>``, which it writes at the end of the build (``build-finished``:
   ``python -m scripts.reader_edition --site <the html folder>``, in a process of its own, from the repository's
   root).

The repository button keeps the repository's address (the source). With ``reader_edition_branch`` empty (the
student website, scripts/student_site.py) it does nothing. ``tests/tools/test_reader_edition.py`` runs it on a
sample page; ``tests/test_book.py`` checks every notebook page of the real build.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[1]
SITE_FOLDER = "notebooks"  # scripts/reader_edition.py's SITE_FOLDER
LAUNCH_GROUP, DOWNLOAD_GROUP = "launch-buttons", "download-buttons"
NOTEBOOK_DOWNLOADS = ("download-notebook-button", "download-source-button")
# where each launch service's address names the branch: Binder's path (/v2/gh/org/repo/<branch>), Colab's and
# Deepnote's path after blob/ (Deepnote's escaped); JupyterHub's nbgitpuller names it in the query
BRANCH_IN_PATH = [re.compile(r"^(?P<before>/v2/(?:gh|gl|git)/.+/)(?P<branch>[^/]+)$"),
                  re.compile(r"^(?P<before>/github/[^/]+/[^/]+/blob/)(?P<branch>[^/]+)(?P<after>/.+)$")]
BRANCH_ESCAPED = re.compile(r"(?P<before>%2Fblob%2F)(?P<branch>[^%]+)(?P<after>%2F)")


def reader_launch_url(url: str, branch: str, reader: str) -> str:
    """A launch button's ``url`` with the source's ``branch`` replaced by the ``reader`` branch; ValueError when the
    address names no branch where a launch service does."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "branch" for key, _ in query):  # nbgitpuller (JupyterHub)
        moved = [(key, reader if key == "branch" and value == branch else value) for key, value in query]
        if moved != query:
            return urlunsplit(parts._replace(query=urlencode(moved, safe="/")))
    for pattern in BRANCH_IN_PATH:
        match = pattern.match(parts.path)
        if match and match["branch"] == branch:
            path = match["before"] + reader + (match.groupdict().get("after") or "")
            return urlunsplit(parts._replace(path=path))
    escaped = BRANCH_ESCAPED.search(parts.query)
    if escaped and escaped["branch"] == branch:
        query_text = parts.query[:escaped.start("branch")] + reader + parts.query[escaped.end("branch"):]
        return urlunsplit(parts._replace(query=query_text))
    raise ValueError(f"a launch button's address names no branch {branch!r} where its service does: {url}")


def redirect_buttons(header_buttons: list[dict], branch: str, reader: str, notebook_url: str | None) -> int:
    """Point the launch buttons among ``header_buttons`` (sphinx-book-theme's list for one page) at the ``reader``
    branch, and the notebook's download button at ``notebook_url`` (the reader notebook's address in the website,
    relative to the page); how many buttons were moved."""
    moved = 0
    for group in header_buttons:
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if group.get("label") == LAUNCH_GROUP and button.get("type") == "link":
                button["url"] = reader_launch_url(button["url"], branch, reader)
                button["tooltip"] = f"{button.get('tooltip', '')} (the reader edition)".strip()
                moved += 1
            elif (group.get("label") == DOWNLOAD_GROUP and notebook_url and button.get("label") in NOTEBOOK_DOWNLOADS
                  and button.get("url", "").endswith(".ipynb")):
                button["url"] = notebook_url
                moved += 1
    return moved


def launch_reader_edition(app, pagename, templatename, context, doctree) -> None:
    reader = app.config.reader_edition_branch
    if not reader or "header_buttons" not in context:
        return
    branch = app.config.html_theme_options.get("repository_branch") or "main"
    source = Path(app.env.doc2path(pagename)) if pagename in app.env.found_docs else None
    is_notebook = source is not None and source.with_suffix(".ipynb").exists()
    notebook_url = f"{context['pathto'](SITE_FOLDER, 1)}/{pagename}.ipynb" if is_notebook else None
    try:
        redirect_buttons(context["header_buttons"], branch, reader, notebook_url)
    except ValueError as error:
        raise ExtensionError(f"{pagename}: {error}") from error


def write_reader_notebooks(app, exception) -> None:
    if exception is not None or not app.config.reader_edition_branch or app.builder.format != "html":
        return
    done = subprocess.run([sys.executable, "-m", "scripts.reader_edition", "--site", str(app.outdir)], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ExtensionError(f"the reader edition was not written: {done.stderr.strip()[-2000:]}")


def setup(app):
    app.add_config_value("reader_edition_branch", "", "html")
    app.connect("html-page-context", launch_reader_edition, priority=600)  # after sphinx-book-theme's (501)
    app.connect("build-finished", write_reader_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
