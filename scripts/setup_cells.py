"""Write each notebook's Colab setup cell: the first code cell, which installs on Colab what that notebook imports.

    python -m scripts.setup_cells            # rewrite the setup cell of every notebook under chapters/
    python -m scripts.setup_cells --check    # exit 1, naming them, if a notebook's setup cell is not the generated one

Colab opens a notebook from the repository alone: it has Python, numpy, pandas, torch, matplotlib and scipy, but not
the book's package or bertviz. The setup cell installs, on Colab only, exactly what the notebook imports and Colab
lacks: the package ``mha`` from its release's commit (``git+<repository>@<commit>``: the address from
``_config.yml``, the commit from ``release.toml``; a commit cannot be moved as a tag can, so a page installs the code
of the release it was published with; its data files come inside it), which brings its own dependencies, plus any
other library the notebook imports directly, pinned as in ``requirements.txt`` (bertviz, in two notebooks). Anywhere
else (a local ``make`` setup, Binder, a JupyterHub, the tests) the cell does nothing and prints nothing.

The cell stays visible, so a reader sees what is installed. ``tests/test_hosting.py`` checks that every notebook's
first code cell is what this script generates, so after changing the repository address, the release, a pin or a
notebook's imports, run this script and commit the notebooks.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.metadata
import json
import sys
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.setup_cells")
from scripts.book_release import ROOT, normalised, package_dependencies, pinned, release, release_requirement

NOTEBOOKS = sorted(path for path in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)
SETUP_TAG = "colab-setup"
"""The tag of the setup cell (besides being the first code cell), so the script finds it again."""

KERNEL_DISTRIBUTIONS = {"ipython", "ipykernel", "ipywidgets", "matplotlib-inline"}
"""Imported through the kernel itself (IPython.display, ...): every Jupyter, Colab included, has them."""


def _python_source(cell_source: str) -> str:
    """A code cell's text as plain Python: IPython's magics (``%matplotlib inline``, ``%pip``) turned into calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell_source)


def imported_modules(notebook: dict) -> set[str]:
    """The top-level modules the notebook's code cells import (the setup cell's own ``import sys`` aside)."""
    found = set()
    for cell in code_cells(notebook):
        if is_setup_cell(cell):
            continue
        for node in ast.walk(ast.parse(_python_source("".join(cell["source"])))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


@functools.cache
def _providers() -> dict[str, list[str]]:
    """Which installed distributions provide each top-level module (read once: it scans every installed package)."""
    return importlib.metadata.packages_distributions()


def imported_distributions(notebook: dict) -> set[str]:
    """The (normalised) distributions that provide the notebook's imports, standard library left out."""
    providers = _providers()
    found = set()
    for module in imported_modules(notebook):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        if module == "mha":
            found.add("mha")
            continue
        names = providers.get(module)
        if not names:
            raise SystemExit(f"no installed distribution provides {module!r}; pip install -r requirements.txt first")
        found.update(normalised(name) for name in names)
    return found


def setup_requirements(notebook: dict) -> list[str]:
    """What the setup cell installs: the package from its release, then the notebook's other imports, pinned."""
    bundled = set(package_dependencies()) | KERNEL_DISTRIBUTIONS
    extra = sorted(name for name in imported_distributions(notebook) - {"mha"} if name not in bundled)
    return [release_requirement()] + [pinned(name) for name in extra]


def setup_source(notebook: dict) -> str:
    """The setup cell's code for this notebook."""
    requirements = setup_requirements(notebook)
    others = [requirement.split("==")[0] for requirement in requirements[1:]]
    what = f"the book's package mha {release()['version']} (its data files included)"
    what += "".join(f" and {name}" for name in others)
    quoted = " ".join(f'"{requirement}"' for requirement in requirements)
    return (f"# Colab: install what this notebook imports, {what}.\n"
            "# Anywhere else (`make`, Binder, a JupyterHub) all of it is installed already, and this cell does "
            "nothing.\n"
            "import sys\n"
            "\n"
            'if "google.colab" in sys.modules:\n'
            f"    %pip install --quiet {quoted}")


def setup_cell(notebook: dict, cell_id: str = "colab-setup") -> dict:
    """The whole setup cell (no outputs), keeping ``cell_id``."""
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {"tags": [SETUP_TAG, "hide-input"]},
        "outputs": [],
        "source": setup_source(notebook).splitlines(keepends=True),
    }


def code_cells(notebook: dict) -> list[dict]:
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def is_setup_cell(cell: dict) -> bool:
    """The generated setup cell, or the hidden install cell it replaces (a ``%pip install`` guarded by Colab)."""
    if cell["cell_type"] != "code":
        return False
    source = "".join(cell["source"])
    return SETUP_TAG in cell.get("metadata", {}).get("tags", []) or (
        "%pip install" in source and "google.colab" in source)


def with_setup_cell(notebook: dict) -> dict:
    """The notebook with its setup cell (re)written as the first code cell."""
    cells = list(notebook["cells"])
    first = next(index for index, cell in enumerate(cells) if cell["cell_type"] == "code")
    if is_setup_cell(cells[first]):
        cell = setup_cell(notebook, cells[first].get("id", "colab-setup"))
        cell["execution_count"] = cells[first].get("execution_count")  # a re-executed notebook stays up to date
        cells[first] = cell
    else:
        cells.insert(first, setup_cell(notebook))
    return {**notebook, "cells": cells}


def serialised(notebook: dict) -> str:
    """The notebook as the repository stores it (nbformat's layout: one-space indent, UTF-8, final newline)."""
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def first_code_cell(notebook: dict) -> dict:
    return code_cells(notebook)[0]


def outdated(paths: list[Path] = NOTEBOOKS) -> list[Path]:
    """The notebooks whose setup cell is not the generated one."""
    stale = []
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if serialised(with_setup_cell(notebook)) != serialised(notebook):
            stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report notebooks whose setup cell is outdated")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under chapters/")
    args = parser.parse_args(argv)
    paths = [path.resolve() for path in args.notebooks] or NOTEBOOKS
    stale = outdated(paths)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)}: setup cell differs; run python -m scripts.setup_cells")
        return 1 if stale else 0
    for path in stale:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(serialised(with_setup_cell(notebook)), encoding="utf-8")
        print(f"rewrote the setup cell of {path.relative_to(ROOT)}")
    print(f"{len(paths) - len(stale)} of {len(paths)} notebooks were already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
