"""One script draws every view: ``views.js``, run by anywidget in Jupyter and by the book's website (every chapter).

A view is a plain description (its controls, its data, what it draws), sent as a *payload*: a JSON object whose
schema is written once, in ``web/payload.schema.json``. This module reads that file (:data:`PAYLOAD_SCHEMA`) and
checks every payload against it before it leaves Python (:func:`check_payload`, with fastjsonschema);
``views.js``, which carries the same file, checks it again when it opens one.

- :class:`ViewWidget` is the anywidget that shows a payload in JupyterLab, Notebook 7, VS Code or Colab: its ES
  module is ``views.js`` itself, with the ``render({model, el})`` entry point that anywidget calls.
- :func:`web_file` gives the text of ``views.js``, ``model.js`` and ``views.css``, which the website's build
  (``website/view_payloads.py``) copies into the site, so that the page draws with the very same code.

**The scripts, joined from ES modules.** The JavaScript sources are ES modules of one job each (``web/views/``
draws the views, ``web/model/`` runs all-MiniLM-L6-v2 in the page), so that each file says what it uses. What runs
them cannot take modules: a page opened from disk (file://) refuses ES modules and fetch alike, and anywidget gets
one text as the widget's module. A pip-installed package (Colab) has no Node.js, so the join is done here, in
Python, the first time :func:`web_file` is asked for a script (:func:`join_modules`).

The join reads an entry module (:data:`ENTRIES`), follows its relative imports, orders the modules so that each
comes after what it imports (an import cycle is refused), and writes each module into its own function inside one
outer function: a module sees only what it imports (and the page's globals), and hands on only what it exports.
It understands a restricted form of ES modules, each statement at the start of a line:

- ``import { a, b as c } from "./x.js";`` (named imports of a relative ``.js`` path, on one line or several);
- ``import NAME from "./x.json" with { type: "json" };``, which becomes ``const NAME = <the file's JSON>;`` (so
  the payload's schema is written once, for the validator here and for the page);
- ``export function|async function|const|class NAME`` (one name per ``export const``).

Anything else (``export default``, ``export { ... }``, ``import * as``, a bare specifier, a side-effect import,
``import()``, ``import.meta``) raises :class:`JoinError`, naming the file and line. A module's exports are read
once, when it runs, so an export is a function, a class or a constant, never a ``let`` that changes later.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files

import anywidget
import traitlets

from mha.core.validation import check_type

__all__ = ["PAYLOAD_SCHEMA", "web_file", "payload_schema", "check_payload", "ViewWidget", "JoinError", "join_modules"]

WEB_FILES = ("views.js", "views.css", "model.js", "trainer.js")
SCHEMA_FILE = "payload.schema.json"

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


# --- the scripts, joined from their ES modules -------------------------------------------------------------------

ENTRIES = {"views.js": "views/main.js", "model.js": "model/main.js", "trainer.js": "trainer/main.js"}
"""Each joined script and its entry module, relative to ``web/``."""

_NAME = r"[A-Za-z_$][\w$]*"
_NAMED_IMPORT = re.compile(r'^import[ \t]*\{(?P<names>[^}]*)\}[ \t]*from[ \t]*"(?P<path>[^"\n]+)"[ \t]*;[ \t]*$',
                           re.MULTILINE)
_JSON_IMPORT = re.compile(rf'^import[ \t]+(?P<name>{_NAME})[ \t]+from[ \t]*"(?P<path>[^"\n]+)"[ \t]+with[ \t]*'
                          r'\{[ \t]*type[ \t]*:[ \t]*"json"[ \t]*\}[ \t]*;[ \t]*$', re.MULTILINE)
_EXPORT = re.compile(rf"^export[ \t]+(?=(?:(?:async[ \t]+)?function\b[ \t]*\*?[ \t]*|const[ \t]+|class[ \t]+)"
                     rf"(?P<name>{_NAME}))", re.MULTILINE)
_ANY_IMPORT = re.compile(r"^import\b|\bimport[ \t]*\(|\bimport\.meta\b", re.MULTILINE)
_ANY_EXPORT = re.compile(r"^export\b", re.MULTILINE)
_SUPPORTED = ('the join supports `import { a, b as c } from "./x.js";`, `import NAME from "./x.json" with '
              '{ type: "json" };` and `export function|async function|const|class NAME`, each at the start of a line')


class JoinError(ValueError):
    """A module the join cannot take: an unsupported import or export, a missing file or name, or a cycle."""


@dataclass
class _Module:
    path: str  # relative to the web folder, "views/dom.js"
    body: str  # the text, its import statements taken out and its `export ` keywords dropped
    imports: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  # (module, [(exported, local)])
    data: list[tuple[str, str]] = field(default_factory=list)  # (local name, JSON file) of the JSON imports
    exports: list[str] = field(default_factory=list)


def _line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _resolve(importer: str, specifier: str, suffix: str, where: str) -> str:
    if not specifier.startswith(("./", "../")):
        raise JoinError(f"{where}: {specifier!r} is not a relative path (./ or ../); {_SUPPORTED}")
    path = posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
    if path.startswith("../") or not path.endswith(suffix):
        raise JoinError(f"{where}: {specifier!r} should name a {suffix} file inside the web folder")
    return path


def _imported_names(names: str, where: str) -> list[tuple[str, str]]:
    pairs = []
    for item in (part.strip() for part in names.split(",")):
        if not item:
            continue
        found = re.fullmatch(rf"({_NAME})(?:\s+as\s+({_NAME}))?", item)
        if found is None:
            raise JoinError(f"{where}: cannot read the imported name {item!r}; {_SUPPORTED}")
        pairs.append((found.group(1), found.group(2) or found.group(1)))
    return pairs


def _unsupported(text: str, pattern: re.Pattern, path: str) -> None:
    found = pattern.search(text)
    if found:
        line = text.splitlines()[_line_of(text, found.start()) - 1].strip()
        raise JoinError(f"{path}:{_line_of(text, found.start())}: `{line[:80]}` is not a form the join supports; "
                        f"{_SUPPORTED}")


def _read_module(root, path: str) -> _Module:
    source = root.joinpath(*path.split("/"))
    if not source.is_file():
        raise JoinError(f"{path}: no such module in {root}")
    text = source.read_text(encoding="utf-8")
    module = _Module(path, "")

    def take_json(found: re.Match) -> str:
        where = f"{path}:{_line_of(text, found.start())}"
        module.data.append((found.group("name"), _resolve(path, found.group("path"), ".json", where)))
        return ""

    def take_named(found: re.Match) -> str:
        where = f"{path}:{_line_of(text, found.start())}"
        target = _resolve(path, found.group("path"), ".js", where)
        module.imports.append((target, _imported_names(found.group("names"), where)))
        return "\n" * found.group(0).count("\n")  # keeps the other lines where they were

    body = _NAMED_IMPORT.sub(take_named, _JSON_IMPORT.sub(take_json, text))
    _unsupported(body, _ANY_IMPORT, path)
    module.exports = [found.group("name") for found in _EXPORT.finditer(body)]
    body = _EXPORT.sub("", body)
    _unsupported(body, _ANY_EXPORT, path)
    module.body = body
    return module


def _ordered(root, entry: str) -> list[_Module]:
    """Every module ``entry`` reaches, each after the modules it imports (depth first, in the order of its imports)."""
    done: dict[str, _Module] = {}
    order: list[_Module] = []
    visiting: list[str] = []

    def visit(path: str) -> _Module:
        if path in done:
            return done[path]
        if path in visiting:
            cycle = visiting[visiting.index(path):] + [path]
            raise JoinError(f"import cycle: {' -> '.join(cycle)}; the join needs each module after what it imports")
        visiting.append(path)
        module = _read_module(root, path)
        for target, names in module.imports:
            imported = visit(target)
            missing = [name for name, _ in names if name not in imported.exports]
            if missing:
                raise JoinError(f"{path} imports {', '.join(missing)} from {target}, which does not export "
                                f"{'it' if len(missing) == 1 else 'them'} (it exports {', '.join(imported.exports)})")
        visiting.pop()
        done[path] = module
        order.append(module)
        return module

    visit(entry)
    return order


def _variable(path: str) -> str:
    return "module_" + re.sub(r"\W", "_", path)


def _data_text(root, path: str, where: str) -> str:
    source = root.joinpath(*path.split("/"))
    if not source.is_file():
        raise JoinError(f"{where}: no such JSON file {path} in {root}")
    try:
        value = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as problem:
        raise JoinError(f"{path} is not JSON: {problem}") from problem
    return json.dumps(value, separators=(",", ":"))  # ASCII only: valid JavaScript as it is


def _wrapped(root, module: _Module, is_entry: bool) -> str:
    head = [f"// --- {module.path}"]
    head.append(("" if is_entry and not module.exports else f"const {_variable(module.path)} = ") + "(function () {")
    for target, names in module.imports:
        bound = ", ".join(name if name == local else f"{name}: {local}" for name, local in names)
        head.append(f"const {{ {bound} }} = {_variable(target)};")
    for local, path in module.data:
        head.append(f"const {local} = {_data_text(root, path, module.path)};")
    tail = f"return {{ {', '.join(module.exports)} }};\n" if module.exports else ""
    return "\n".join(head) + "\n" + module.body.strip("\n") + "\n" + tail + "}());\n"


def join_modules(entry: str, root=None, *, name: str | None = None) -> str:
    """The classic script of ``entry`` (a path relative to ``root``, by default the package's ``web/`` folder) and
    every module it imports; ``name`` is the script's name in its first line. The script is one function named
    ``joinedScript``, called at once, so a module can hand its own script's text to a Web Worker (``joined_script.js``).
    """
    check_type("entry", entry, str, "a module's path inside web/, e.g. 'views/main.js'")
    if name is not None:
        check_type("name", name, str, "the joined script's file name, e.g. 'views.js'")
    root = files("mha.views") / "web" if root is None else root
    modules = _ordered(root, entry)
    texts = "\n".join(module.body for module in modules)
    kept = {_variable(module.path) for module in modules}
    clashes = sorted(variable for variable in kept if re.search(rf"\b{variable}\b", texts))
    if clashes:
        raise JoinError(f"the modules use names the join keeps for itself: {', '.join(clashes)}")
    parts = [f"// {name or entry}: joined by mha.views.widget from {entry} and the {len(modules) - 1} modules it "
             "imports (src/mha/views/web/).\n// Edit those modules, not this script. Each module runs in its own "
             "function and sees only what it imports.\n(function joinedScript() {\n\"use strict\";\n"]
    parts += [_wrapped(root, module, module.path == entry) for module in modules]
    parts.append("}());\n")
    return "\n".join(parts)


# --- the views' files and the payload's schema ------------------------------------------------------------------


@cache
def web_file(name: str) -> str:
    """The text of one of the views' web files (:data:`WEB_FILES`: ``views.js``, ``views.css``, ``model.js``, the
    pretrained model's runner, and ``trainer.js``, the tiny models' trainer), from the installed package; the scripts
    are joined from their ES modules (:func:`join_modules`)."""
    if name not in WEB_FILES:
        raise ValueError(f"{name!r} is not one of the views' web files ({', '.join(WEB_FILES)}).")
    if name in ENTRIES:
        return join_modules(ENTRIES[name], name=name)
    return (files("mha.views") / "web" / name).read_text(encoding="utf-8")


@cache
def payload_schema() -> dict:
    """The payload's JSON Schema, read from ``web/payload.schema.json``, the file ``views.js`` carries too."""
    return json.loads((files("mha.views") / "web" / SCHEMA_FILE).read_text(encoding="utf-8"))


PAYLOAD_SCHEMA = payload_schema()


@cache
def _payload_validator():
    """The validator of :data:`PAYLOAD_SCHEMA`, compiled once by fastjsonschema (the JSON Schema validator that
    nbformat uses for notebooks, so it is already in every kernel): it imports in milliseconds, where the jsonschema
    library's import compiles an IRI grammar for a second or more of CPU in each kernel that shows a view. The tests
    check that it, jsonschema and the page's own checker give the same verdict on every payload."""
    import fastjsonschema

    return fastjsonschema.compile(PAYLOAD_SCHEMA)


def check_payload(payload: dict) -> dict:
    """``payload`` unchanged if it fits :data:`PAYLOAD_SCHEMA`; ``ValueError`` naming the first misfit otherwise.

    The map weights (``payload["weights"]``, bytes) travel beside the JSON and are not part of the schema.
    """
    check_type("payload", payload, dict, "a view's payload (a dict), e.g. site_payload(view)")
    content = {key: value for key, value in payload.items() if key != "weights"}
    from fastjsonschema import JsonSchemaValueException

    try:
        _payload_validator()(content)
    except JsonSchemaValueException as problem:
        path = [str(part) for part in problem.path[1:]]  # the first part is the payload itself ("data")
        where = "/".join(path) or "the payload"
        what = problem.message.removeprefix(problem.name).strip()  # "data.version must be ..." -> "must be ..."
        raise ValueError(f"the view's payload does not fit its schema at {where}: it {what}") from None
    return payload


class ViewWidget(anywidget.AnyWidget):
    """A view in Jupyter: ``payload`` is the encoded payload (:func:`mha.views.payloads.encode_payload`), drawn
    by ``views.js``, the script that also draws the website's views."""

    _esm = "globalThis.mhaViewsHostedByWidget = true;\n" + web_file("views.js") + _ESM_ENTRY
    _css = web_file("views.css")
    payload = traitlets.Unicode("").tag(sync=True)
