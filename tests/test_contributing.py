"""CONTRIBUTING.md stays true: every file, folder, script, `make` target and test it names exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
CODE = re.findall(r"`([^`]+)`", GUIDE)  # every span of inline code
PATH = re.compile(r"^[\w./-]+\.(?:py|md|yml|toml|json|js|ipynb|txt|cfg)$|^[\w.-]+(?:/[\w.-]+)*/$|^\.[\w-]+$")


def named_paths() -> set[str]:
    """Paths the guide names: inline code that is a file or folder (placeholders such as <notebook> left out)."""
    found = set()
    for span in CODE:
        for word in span.split():
            if "<" not in word and PATH.match(word):
                found.add(word)
    return found


def test_the_guide_names_files_that_exist():
    paths = named_paths()
    assert len(paths) > 20, paths  # the guide is read, not an empty match
    missing = sorted(path for path in paths if not (ROOT / path).exists())
    assert not missing, f"CONTRIBUTING.md names files that do not exist: {missing}"


def test_the_guide_names_make_targets_and_modules_that_exist():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = {match for span in CODE for match in re.findall(r"^make (\w[\w-]*)$", span)}
    assert named and named <= targets, f"make targets the guide names but the Makefile lacks: {named - targets}"
    modules = {span for span in CODE if re.fullmatch(r"mha(\.\w+)+", span)}
    assert modules, "the guide names no package module"
    for module in modules:
        parts = module.split(".")
        as_module = ROOT / "src" / Path(*parts).with_suffix(".py")
        as_package = ROOT / "src" / Path(*parts) / "__init__.py"
        if as_module.exists() or as_package.exists():
            continue
        owner = importlib.import_module(".".join(parts[:-1]))  # mha.book.glue: a name that mha.book offers
        assert parts[-1] in getattr(owner, "__all__", ()), module
