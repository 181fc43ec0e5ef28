"""The book's tools: build the student edition and the autograders, retrain and re-measure what ``data/`` stores,
time the notebooks and views, and check what a release ships (CONTRIBUTING.md says which to run when).

They form one package, run from the repository's root as modules, and import each other by their package's name::

    python -m scripts.run_notebooks --record
    python -m scripts.grading --check chapters/1_mechanism/1_attention_from_scratch.ipynb

A tool that imports another, run as a file (``python scripts/<name>.py``), stops and names the command to use instead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def site_module(name: str) -> ModuleType:
    """A module of ``site/``, the Sphinx extensions that build the website, loaded from its file: the folder's name
    is also the standard library's ``site``, so it cannot be imported as a package."""
    if name in sys.modules:
        return sys.modules[name]
    path = ROOT / "site" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or not path.is_file():
        raise ModuleNotFoundError(f"site/{name}.py does not exist")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module
