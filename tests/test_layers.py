"""The package's layers hold: import-linter checks the contract in ``.importlinter``, and the contract covers it all;
no module is over 500 lines and no subpackage holds more than 12.

``core`` <- ``corpora`` <- ``pretrained`` <- ``analysis``; ``lab`` on ``core`` alone; ``views`` and ``exercises`` on
top; no import cycles. The contract is only as good as its list of layers, so a subpackage or module that is in no
layer (and so in no rule) fails here too.
"""

from __future__ import annotations

import configparser
import pkgutil
import subprocess
import sys
from pathlib import Path

import grimp

import mha
import mha.analysis

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config


def test_lint_imports_keeps_every_contract():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    assert lint_imports.exists(), "import-linter is not installed: pip install -r requirements.txt"
    result = subprocess.run([str(lint_imports), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_every_part_of_the_package_is_in_a_layer():
    layers = _contracts()["importlinter:contract:layers"]["layers"]
    named = {name.strip() for line in layers.splitlines() for name in line.replace("|", ":").split(":") if name.strip()}
    parts = {f"mha.{module.name}" for module in pkgutil.iter_modules(mha.__path__)} - {"mha.data"}  # data: no code
    assert parts - named == set(), f"add these to a layer in .importlinter: {sorted(parts - named)}"
    assert named - parts == set(), f"these layers name nothing in mha: {sorted(named - parts)}"


def test_every_part_of_analysis_is_in_one_of_its_layers():
    layers = _contracts()["importlinter:contract:analysis-layers"]["layers"]
    named = {name.strip() for line in layers.splitlines() for name in line.split("|") if name.strip()}
    parts = {module.name for module in pkgutil.iter_modules(mha.analysis.__path__)}
    assert parts == named, f"name each module of mha.analysis in one layer of analysis-layers: {sorted(parts ^ named)}"


def test_the_slips_that_ran_upwards_stay_fixed():
    graph = grimp.build_graph("mha", cache_dir=None)
    assert not graph.chain_exists(importer="mha.pretrained", imported="mha.analysis", as_packages=True)
    assert not graph.chain_exists(importer="mha.views.random_layer_explorer", imported="mha.pretrained.tokenizer")
    assert not graph.chain_exists(importer="mha.lab", imported="mha.pretrained", as_packages=True)


def test_no_module_is_over_500_lines():
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
               for path in (ROOT / "src" / "mha").rglob("*.py")}
    assert len(lengths) > 50  # the walk found the package
    long = {path: n for path, n in lengths.items() if n > 500}
    assert not long, f"split these along a seam into modules of at most 500 lines: {long}"


def test_no_subpackage_holds_more_than_12_modules():
    packages = [mha] + [__import__(m.name, fromlist=["_"]) for m in pkgutil.walk_packages(mha.__path__, "mha.")
                        if m.ispkg and m.name != "mha.data" and not m.name.startswith("mha.data.")]
    counts = {p.__name__: sum(1 for _ in pkgutil.iter_modules(p.__path__)) for p in packages}
    assert counts["mha.analysis"] >= 3  # the walk found the subpackages
    over = {name: n for name, n in counts.items() if n > 12}
    assert not over, f"split these by the book's sections into subpackages of at most 12 modules each: {over}"
