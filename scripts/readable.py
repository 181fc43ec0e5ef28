"""The book's notebook markdown as any notebook front end shows it (Colab, plain Jupyter, nbconvert's HTML), which
knows no MyST: the one conversion that the student edition (scripts/student_edition.py) and the reader edition
(scripts/reader_edition.py) apply to every markdown cell (:func:`readable_markdown`, :func:`readable_edition`).

- every ``{eval}`` role becomes the text it showed when the book was executed (:func:`shown_expressions`); a glued
  citation (``glue.cite_p``, ``glue.cite_t``), like a ``{cite}``, ``{cite:p}`` or ``{cite:t}`` role, becomes its
  text, linked to the references page;
- every directive becomes plain markdown (:data:`DIRECTIVE`): an exercise a bold title above its statement, with an
  ``<a id>`` anchor; a hint, a dropdown or a solution an HTML ``<details>`` fold; an admonition a block quote under
  its title; a figure or image an image with its caption; a math block ``$$ ... $$``; any other its body;
- ``(label)=`` targets go; ``{doc}``, ``{ref}`` and ``{numref}`` roles, and every relative link or image, become
  absolute addresses on the published website (:func:`site_url`), so that a notebook opened alone, with none of the
  book's other files beside it, has no broken link; ``{math}`` becomes ``$...$``; any other role its text.

The book's own notebooks and the website keep the MyST. ``tests/tools/test_reader_edition.py`` renders every
converted notebook as plain CommonMark and finds no MyST left and no relative link.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import re
import sys
from pathlib import Path, PurePosixPath
from posixpath import normpath

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.readable")
from scripts.book_release import config, repository_url  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
REFERENCES = "chapters/references"  # the bibliography's page, which citations link to
EXERCISE_PARTS = re.compile(r"```\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)```", re.S)
LABEL = re.compile(r":label:\s*(\S+)")
EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")
ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<content>[^`]+)`")
TEXT_AND_TARGET = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
CITATION = re.compile(r"^glue\.cite_(?P<kind>[pt])\(")
# a fence of three or more backticks or colons opening a directive, up to the same fence alone on a line
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<argument>[^\n]*)\n"
                       r"(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$", re.M | re.S)
OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):[ \t]*(?P<value>[^\n]*)\n?")
OPTION_LINE = re.compile(r"^[ \t]*:[\w-]+:[^\n]*\n?", re.M)
TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=[ \t]*(?:\n|$)", re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HINT_LEVEL = re.compile(r"^\*\*(?P<summary>Hint \d+ of \d+[^*]*?)\.?\*\*\s*")
MARKDOWN_LINK = re.compile(r"(?P<head>!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\()(?P<target>[^()\s]+)"
                           r"(?P<tail>(?:\s+\"[^\"]*\")?\))")
HTML_LINK = re.compile(r"(?P<head>\b(?:href|src)=\")(?P<target>[^\"]+)(?P<tail>\")")
ABSOLUTE = re.compile(r"^(?:[a-zA-Z][\w+.-]*:|#|//)")
ADMONITIONS = {"note", "tip", "important", "warning", "caution", "attention", "danger", "error", "seealso",
               "admonition", "hint", "margin", "sidebar", "topic", "dropdown", "solution"}
CODE_BLOCKS = {"code", "code-block", "sourcecode", "code-cell"}


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


@functools.cache
def site_url(root: Path = ROOT) -> str:
    """The published website's address, ending in "/": ``html.baseurl`` of ``_config.yml`` where it is set, else
    the GitHub Pages address of ``repository.url`` (the book's one record of where it lives)."""
    baseurl = (config(root).get("html") or {}).get("baseurl")
    if baseurl:
        return baseurl.rstrip("/") + "/"
    url = repository_url(root)
    match = re.fullmatch(r"https://github\.com/(?P<owner>[^/]+)/(?P<name>[^/]+?)(?:\.git)?", url)
    if match is None:
        raise ValueError(f"_config.yml: set html.baseurl, the website's address ({url} is not on GitHub)")
    owner, name = match["owner"].lower(), match["name"]
    return f"https://{name}/" if name.lower() == f"{owner}.github.io" else f"https://{owner}.github.io/{name}/"


def page_url(page: str, anchor: str = "", root: Path = ROOT) -> str:
    """The website's address of ``page`` (a path from the repository's root, with or without its suffix)."""
    path = PurePosixPath(page)
    if path.suffix in ("", ".ipynb", ".md"):
        path = path.with_suffix(".html")
    return site_url(root) + str(path) + (f"#{anchor}" if anchor else "")


def _page_text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n\n".join(_source(cell) for cell in json.loads(path.read_text())["cells"]
                           if cell["cell_type"] == "markdown")
    return path.read_text()


def page_title(path: Path) -> str:
    """A page's title: its first heading, else its file's name."""
    heading = HEADING.search(_page_text(path)) if path.exists() else None
    return heading.group(1).strip() if heading else path.stem


@functools.cache
def labels(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """Every label of the book's pages, by name: the page it lies on (from the repository's root, no suffix) and
    what a ``{ref}`` to it shows (the heading after a ``(label)=`` target, an exercise's title)."""
    found = {}
    for path in sorted((root / "chapters").rglob("*")):
        if path.suffix not in (".ipynb", ".md") or ".ipynb_checkpoints" in path.parts:
            continue
        page, text = path.relative_to(root).with_suffix("").as_posix(), _page_text(path)
        for target in TARGET.finditer(text):
            heading = HEADING.search(text, target.end())
            found[target["label"]] = (page, heading.group(1).strip() if heading else target["label"])
        for exercise in EXERCISE_PARTS.finditer(text):
            if label := LABEL.search(exercise["body"]):
                found[label.group(1)] = (page, exercise["title"].strip() or label.group(1))
    return found


def shown_expressions(notebook: dict) -> dict[str, str]:
    """What each ``{eval}`` expression of an executed book notebook shows: the text stored in its markdown cells'
    ``user_expressions`` metadata (what jupyterlab-myst displays), and for an expression stored nowhere, the text
    ``mha.book.prose_expression_results`` computes from the glued values the notebook's outputs hold."""
    shown: dict[str, str] = {}
    for cell in notebook["cells"]:
        for entry in cell.get("metadata", {}).get("user_expressions", []):
            result = entry.get("result", {})
            if result.get("status") == "ok" and "text/plain" in result.get("data", {}):
                value = ast.literal_eval(result["data"]["text/plain"])
                shown[entry["expression"]] = value if isinstance(value, str) else str(value)
    wanted = {expression for cell in notebook["cells"] if cell["cell_type"] == "markdown"
              for expression in EVAL_ROLE.findall(_source(cell))}
    if wanted - set(shown):
        import nbformat

        from mha.book import prose_expression_results

        computed = prose_expression_results(nbformat.reads(json.dumps(notebook), as_version=4))
        for entries in filter(None, computed):
            for entry in entries:
                shown.setdefault(entry["expression"], ast.literal_eval(entry["result"]["data"]["text/plain"]))
    return shown


def with_numbers(text: str, shown: dict[str, str], here: Path) -> str:
    """``text`` with every ``{eval}`` role replaced by what it shows (``shown``, :func:`shown_expressions` of the
    notebook at ``here``); ValueError when one has no stored result: execute that notebook
    (scripts/run_notebooks.py) first."""
    def number(match: re.Match) -> str:
        if match[1] not in shown:
            raise ValueError(f"{here.name}: no stored result for {{eval}}`{match[1]}`: run scripts/run_notebooks.py "
                             f"{here.relative_to(ROOT) if here.is_relative_to(ROOT) else here} --write first")
        text = shown[match[1]]
        return _cited(text) if CITATION.match(match[1]) else text

    return EVAL_ROLE.sub(number, text)


def _cited(text: str) -> str:
    """A citation's text, as the website shows it ("[Clark et al., 2019]", "Clark et al. [2019]"), made one link to
    the references page (CommonMark allows balanced brackets in a link's text)."""
    return f"[{text}]({page_url(REFERENCES)})"


def _relative_page(target: str, here: Path) -> str:
    """``target``, relative to the page ``here``, as a path from the repository's root."""
    start = here.parent.relative_to(ROOT) if here.is_relative_to(ROOT) else here.parent
    return normpath((PurePosixPath(start.as_posix()) / target).as_posix())


def absolute_link(target: str, here: Path) -> str:
    """A link's ``target`` as written on the page ``here``: unchanged when absolute or in-page, else the address of
    what it names on the website."""
    if ABSOLUTE.match(target):
        return target
    path, _, anchor = target.partition("#")
    return page_url(_relative_page(path, here), anchor)


def _role(match: re.Match, here: Path) -> str:
    name, content = match["name"], match["content"]
    written = TEXT_AND_TARGET.match(content)
    text, target = (written["text"], written["target"]) if written else ("", content)
    if name == "doc":
        page = _relative_page(target, here)
        source = next((ROOT / f"{page}{suffix}" for suffix in (".ipynb", ".md") if (ROOT / f"{page}{suffix}").exists()),
                      ROOT / page)
        return f"[{text or page_title(source)}]({page_url(page)})"
    if name in ("ref", "numref"):
        page, title = labels().get(target, ("", target))
        return f"[{text or title}]({page_url(page, target)})" if page else text or title
    if name.startswith("cite"):
        from mha.book.prose import citation_text

        return _cited(citation_text(target, "t" if name.endswith(":t") else "p"))
    if name == "math":
        return f"${content}$"
    return text or target


def _options(body: str) -> tuple[dict[str, str], str]:
    options = {}
    while option := OPTION.match(body):
        options[option["key"]] = option["value"].strip()
        body = body[option.end():]
    return options, body.strip("\n")


def _folded(summary: str, body: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body}\n\n</details>"


def _directive(match: re.Match, here: Path) -> str:
    name, argument = match["name"], match["argument"].strip()
    options, body = _options(match["body"])
    if name in CODE_BLOCKS:
        return f"```{argument}\n{body}\n```"
    body = _directives(body, here)
    if name == "exercise":
        anchor = f'<a id="{options["label"]}"></a>\n\n' if "label" in options else ""
        return f"{anchor}**Exercise: {argument}**\n\n{body}"
    if name == "hint":
        level = HINT_LEVEL.match(body)
        return _folded(level["summary"] if level else "Hint", body[level.end():] if level else body)
    if name in ("solution-start", "solution-end"):
        return ""
    if name in ("figure", "image"):
        alt = options.get("alt", "").replace("]", "\\]") or argument.rsplit("/", 1)[-1]
        return f"![{alt}]({absolute_link(argument, here)})" + (f"\n\n*{body}*" if name == "figure" and body else "")
    if name == "math":
        return f"$$\n{body}\n$$"
    if name in ADMONITIONS:
        title = argument if name in ("admonition", "dropdown", "topic", "sidebar") and argument else \
            {"seealso": "See also", "solution": "Solution"}.get(name, name.capitalize())
        if name in ("dropdown", "solution") or "dropdown" in options.get("class", ""):
            return _folded(title, body)
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in body.splitlines())
        return f"> **{title}**\n>\n{quoted}"
    return f"**{argument}**\n\n{body}" if argument else body


def _directives(text: str, here: Path) -> str:
    return DIRECTIVE.sub(lambda match: match["indent"] + _directive(match, here), text)


def readable_markdown(text: str, shown: dict[str, str], here: Path) -> str:
    """One markdown cell of the notebook at ``here`` as any notebook front end shows it (the module's docstring
    says how): glued numbers as their stored text (``shown``, :func:`with_numbers`), directives as plain markdown,
    no ``(label)=`` target, and links to the website where MyST's roles or relative links were."""
    text = _directives(with_numbers(text, shown, here), here)
    text = TARGET.sub("", ROLE.sub(lambda match: _role(match, here), text))
    text = MARKDOWN_LINK.sub(lambda match: match["head"] + absolute_link(match["target"], here) + match["tail"], text)
    return HTML_LINK.sub(lambda match: match["head"] + absolute_link(match["target"], here) + match["tail"], text)


def readable_edition(notebook: dict, book: dict, here: Path) -> dict:
    """``notebook`` (an edition of ``book``, the notebook at ``here``) with every markdown cell made readable outside
    JupyterLab (:func:`readable_markdown`); its code cells and their outputs stay as they are."""
    readable, shown = copy.deepcopy(notebook), shown_expressions(book)
    for cell in readable["cells"]:
        if cell["cell_type"] == "markdown":
            _set_source(cell, readable_markdown(_source(cell), shown, here))
            cell["metadata"].pop("user_expressions", None)  # nothing is left for jupyterlab-myst to evaluate
    return readable
