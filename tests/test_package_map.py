"""The package's maps stay true: every module is on its package's map, and every section a docstring cites exists.

Each package docstring lists its modules with the sections that use them (``src/mha/__init__.py`` lists the
subpackages). Docstrings cite sections as ``(chapter 3, "Induction heads")`` or by number (``3.5``). A module
missing from its map, or a citation of a section the table of contents does not have, fails here.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import re
from pathlib import Path

import pytest
import yaml

import mha

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "mha"


def _first_heading(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return next(line[2:].strip() for line in text.splitlines() if line.startswith("# "))


def book_sections() -> dict[str, str]:
    """Number -> title for every numbered chapter ("3") and section ("3.5") in the table of contents."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = next(part for part in toc["parts"] if part.get("numbered"))
    sections = {}
    for c, chapter in enumerate(numbered["chapters"], start=1):
        index = ROOT / chapter["file"]
        sections[str(c)] = _first_heading(index.with_suffix(".md"))
        for s, section in enumerate(chapter.get("sections", []), start=1):
            sections[f"{c}.{s}"] = _first_heading((ROOT / section["file"]).with_suffix(".ipynb"))
    return sections


SECTIONS = book_sections()
TITLES = {title.casefold(): number for number, title in SECTIONS.items()}
PACKAGES = [mha] + [__import__(m.name, fromlist=["_"]) for m in pkgutil.walk_packages(mha.__path__, "mha.") if m.ispkg]


def docstrings() -> list[tuple[str, str]]:
    """(where, text) for every module, class and function docstring under src/mha."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in [tree, *ast.walk(tree)]:
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node)
                if text:
                    name = getattr(node, "name", "module")
                    found.append((f"{path.relative_to(ROOT)}:{name}", " ".join(text.split())))
    return found


def test_the_table_of_contents_has_the_four_chapters_and_their_sections():
    assert [SECTIONS[str(c)] for c in range(1, 5)] == ["The mechanism", "The geometry of subspace projection",
                                                       "Empirical head roles", "Caveats"]
    assert "3.5" in SECTIONS and "4.2" in SECTIONS


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_module_is_on_its_package_map(package):
    children = [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    doc = package.__doc__ or ""
    missing = [name for name in children if not re.search(rf"`~?{re.escape(name)}`", doc)]
    assert not missing, f"{package.__name__}'s docstring does not map {missing}; add each with its sections"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_section_numbers_on_the_maps_exist(package):
    numbers = re.findall(r"(?<![\d.])([1-4]\.\d)(?![\d.]\d)", package.__doc__ or "")
    unknown = sorted({n for n in numbers if n not in SECTIONS})
    assert not unknown, f"{package.__name__}'s map cites sections the book does not have: {unknown}"


def citations_not_in_the_book(cited: re.Pattern) -> list[str]:
    """Every title that ``cited`` finds in a docstring and the table of contents does not have, with its place."""
    return [f"{where}: {title!r}" for where, text in docstrings() for title in cited.findall(text)
            if title.casefold() not in TITLES]


@pytest.mark.slow
def test_every_quoted_section_title_in_a_docstring_exists():
    # a quoted phrase right after "chapter N," / "section" / a section number is a title, and must be the book's
    unknown = citations_not_in_the_book(
        re.compile(r'(?:[Cc]hapter \d\s*(?:,|\(|:)\s*(?:sections? )?|[Ss]ections? |\d\.\d )"([^"]+)"'))
    assert not unknown, "docstrings cite sections the table of contents does not have:\n" + "\n".join(unknown)


@pytest.mark.slow
def test_unquoted_citations_name_real_sections():
    # "(chapter 3, empirical head roles)": a lowercase phrase after "chapter N," in parentheses is a title too
    unknown = citations_not_in_the_book(re.compile(r"\([Cc]hapter \d, ([a-z][a-z0-9 ,'-]*?)\)"))
    assert not unknown, 'cite sections as (chapter N, "Title") with a real title:\n' + "\n".join(unknown)


# tests/ beside the package: a folder per subpackage of mha (tests/<subpackage>/test_<module>.py), and two for what
# is not the package, the website in a browser and the tools of scripts/
NOT_THE_PACKAGE = {"site", "tools"}


def test_the_tests_are_laid_out_as_the_package_is():
    tests = ROOT / "tests"
    folders = sorted(path.relative_to(tests) for path in tests.rglob("*")
                     if path.is_dir() and path.name not in {"__pycache__", ".hypothesis"})
    strays = [str(folder) for folder in folders
              if folder.parts[0] not in NOT_THE_PACKAGE and not (SRC / folder / "__init__.py").is_file()]
    assert not strays, f"test folders that mirror no subpackage of mha: {strays}"
    # (the exercises' files say so in their names, test_exercises_<module>, since pytest needs each file's name unique)
    named = {path.stem.removeprefix("test_").removeprefix("exercises_") for path in tests.rglob("test_*.py")
             if path.parent != tests and path.parent.relative_to(tests).parts[0] not in NOT_THE_PACKAGE}
    modules = {path.stem for path in SRC.rglob("*.py")}
    in_subpackages = {path.stem for path in SRC.rglob("*.py") if path.parent != SRC}
    at_the_top = [path.name for path in tests.glob("test_*.py") if path.stem.removeprefix("test_") in in_subpackages]
    assert not at_the_top, f"tests of a subpackage's module belong in its folder of tests/: {at_the_top}"
    # most files test one module and carry its name; the rest check a subpackage across modules
    assert len(named & modules) >= 0.75 * len(named), sorted(named - modules)


def _bound_by_imports(body: list[ast.stmt]) -> set[str]:
    """The names a module's top level binds by ``import`` (under ``if`` and ``try`` too, TYPE_CHECKING included)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.If):
            names |= _bound_by_imports(node.body) | _bound_by_imports(node.orelse)
        elif isinstance(node, ast.Try):
            names |= _bound_by_imports(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                names |= _bound_by_imports(handler.body)
    return names


def _listed_in_all(tree: ast.Module) -> list[str]:
    """The names of a module's ``__all__`` (a literal list or tuple, perhaps extended with ``+=``)."""
    listed = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            listed = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            listed += list(ast.literal_eval(node.value))
    return listed


def test_each_public_name_has_one_import_path():
    """A module's ``__all__`` lists what it defines, never a name it imports: each name of the package is imported
    from the one module that defines it. Only the packages' ``__init__`` files gather names from their modules."""
    shims = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        imported = set(_listed_in_all(tree)) & _bound_by_imports(tree.body)
        if imported:
            shims.append(f"{path.relative_to(ROOT)}: {sorted(imported)}")
    assert not shims, ("these modules list in __all__ names they import: drop each from __all__ and import it from "
                       "its own module wherever it is used:\n" + "\n".join(shims))


def test_the_one_import_path_check_sees_an_imported_name():
    tree = ast.parse("from mha.core.validation import check_type\nif True:\n    import numpy as np\n"
                     "def own(): pass\n__all__ = ['own', 'check_type']\n__all__ += ('np',)\n")
    assert set(_listed_in_all(tree)) & _bound_by_imports(tree.body) == {"check_type", "np"}
