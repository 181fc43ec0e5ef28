"""scripts/: the book's tools are one package, run from the repository's root as ``python -m scripts.<name>``, that
import each other by the package's name and never edit ``sys.path``; every command the book, its messages and its
data records name is one that exists, in that form."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import book_text_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(path for path in (ROOT / "scripts").glob("*.py") if path.name != "__init__.py")
AS_A_MODULE = re.compile(r"-m scripts\.(\w+)")
AS_A_FILE = re.compile(r"\bpython[0-9.]*\s+scripts/\w+\.py|bin/python[0-9.]*\s+scripts/")


def module_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_a_tool_never_edits_sys_path(script):
    edits = [node.lineno for node in ast.walk(module_tree(script))
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert not edits, f"{script.name} uses sys.path (lines {edits}): import other tools as scripts.<name>"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_a_tool_imports_another_by_the_packages_name(script):
    tools = {path.stem for path in SCRIPTS}
    bare = [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(module_tree(script))
            if isinstance(node, ast.Import) and {alias.name.split(".")[0] for alias in node.names} & tools
            or isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in tools]
    assert not bare, f"{script.name} imports another tool by its bare name (works only as a file): {bare}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_a_tool_that_imports_another_first_stops_a_run_as_a_file(script):
    """Run as ``python scripts/<name>.py``, the package is not importable: a tool that imports another at its top level
    checks ``__package__`` first and names the command to use, instead of failing with ModuleNotFoundError."""
    body = module_tree(script).body
    first_import = next((index for index, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))
                         and "scripts" in ([(node.module or "").split(".")[0]] if isinstance(node, ast.ImportFrom) else
                                           [alias.name.split(".")[0] for alias in node.names])), None)
    if first_import is None:
        return
    guard = [node for node in body[:first_import]
             if isinstance(node, ast.If) and "__package__" in ast.unparse(node.test)]
    assert guard, f"{script.name} imports another tool without first stopping a run as a file"
    assert f"python -m scripts.{script.stem}" in ast.unparse(guard[0]), "the guard names another command"


def test_a_tool_run_as_a_file_names_the_command_to_use():
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "objectives_map.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and "python -m scripts.objectives_map" in ran.stderr, ran.stderr[-2000:]
    assert "Traceback" not in ran.stderr


@pytest.mark.slow
def test_every_command_named_is_a_tool_run_as_a_module():
    named, as_files = {}, []
    for path in book_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in AS_A_MODULE.findall(text):
            named.setdefault(name, path.relative_to(ROOT))
        as_files += [f"{path.relative_to(ROOT)}: {found}" for found in AS_A_FILE.findall(text)]
    assert not as_files, "run the tools as modules (python -m scripts.<name>):\n" + "\n".join(as_files)
    missing = {name: str(where) for name, where in named.items() if not (ROOT / "scripts" / f"{name}.py").is_file()}
    assert not missing, f"commands that name no tool of scripts/: {missing}"
    assert {"run_notebooks", "grading", "check_answer_keys", "colab_like_check", "train_checkpoints"} <= set(named)
