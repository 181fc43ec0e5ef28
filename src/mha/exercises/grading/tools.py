"""The book's modules a real-model exercise may use inside the sandbox (instructors' page, "Grading").

A check whose learner's function runs the pretrained encoder or the lab's trainer declares the modules it may use,
with :func:`mha.exercises.checking.uses_tools` (``check.tools = ("mha.pretrained.encoder",)``). For such an
exercise, and no other, the grader makes a *tool folder*: a private, read-only copy of exactly the files those
modules need (:func:`closure`: every module they import, anywhere in their text, followed through the package's own
imports; and the data files they name, :func:`data_of`), never :data:`NEVER_COPIED`, so the book's reference
answers (``mha.core.attention_numpy``, the checks) stay out of reach. Only the process that grades that exercise may
read the copy (:mod:`~mha.exercises.grading.sandbox` binds it into that process's root, or gives it a user id of its
own); the package's own folder stays protected.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
from pathlib import Path

__all__ = ["NEVER_COPIED", "closure", "copy_tools", "data_of", "tools_of"]

NEVER_COPIED = ("mha.exercises", "mha.analysis", "mha.views", "mha.book", "mha.core.attention_numpy")
"""Modules no tool folder holds: the checks, the grader, the measurements and the numpy reference answers."""
_MODULE_NAME = re.compile(r"mha(\.[A-Za-z_]\w*)+")


def tools_of(check) -> tuple[str, ...]:
    """The modules ``check`` declares its learner's function may use (its ``tools``), checked; () for most checks."""
    tools = getattr(check, "tools", ())
    if isinstance(tools, str) or not all(isinstance(name, str) and _MODULE_NAME.fullmatch(name) for name in tools):
        raise TypeError(f"{getattr(check, '__name__', check)}.tools must be a tuple of module names of the book's "
                        f"package, such as ('mha.pretrained.encoder',), got {tools!r}")
    return tuple(sorted(set(tools)))


def _file_of(module: str) -> Path | None:
    """The file of one of the package's modules (a package's ``__init__.py``), or None if there is none."""
    import mha

    if module == "mha.data":  # the repository's data/ folder, installed as mha.data: its __init__ alone
        spec = importlib.util.find_spec(module)
        return Path(spec.origin) if spec is not None and spec.origin else None
    root = Path(mha.__file__).resolve().parent
    if module == "mha":
        return root / "__init__.py"
    base = root.joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _named_in(module: str, path: Path) -> set[str]:
    """The package's modules ``module``'s text names: its imports anywhere (in functions, under TYPE_CHECKING,
    relative ones) and any string that is exactly a module's name (``importlib.resources.files("mha.data")``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            named |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            named.add(node.value)
    return {name for name in named if name == "mha" or name.startswith("mha.")}


def closure(tools: tuple[str, ...]) -> dict[str, Path]:
    """Every module of the package that ``tools`` need, with its file: the tools, the packages above each module,
    and what each imports, followed to the end. Raises ValueError for a tool that is not a module of the package, or
    a closure that would reach :data:`NEVER_COPIED`."""
    if isinstance(tools, str) or not isinstance(tools, (tuple, list)) or not all(isinstance(n, str) for n in tools):
        raise TypeError(f"tools must be a tuple of module names of the book's package, such as "
                        f"('mha.pretrained.encoder',), got {type(tools).__name__}: {tools!r:.80}")
    found: dict[str, Path] = {}
    todo = list(tools)
    for tool in tools:
        if _file_of(tool) is None:
            raise ValueError(f"{tool} is not a module of the book's package: a check's tools name modules such as "
                             "mha.pretrained.encoder")
    while todo:
        module = todo.pop()
        if module in found:
            continue
        if any(module == never or module.startswith(never + ".") for never in NEVER_COPIED):
            raise ValueError(f"the tools {', '.join(tools)} import {module}, which the grader never lets a "
                             "submission read: declare other tools, or move what they need below mha.exercises")
        path = _file_of(module)
        if path is None:
            continue  # ``from mha.x import name``: a name, not a module
        found[module] = path
        parts = module.split(".")
        todo += [".".join(parts[:end]) for end in range(1, len(parts))]
        todo += sorted(_named_in(module, path))
    return dict(sorted(found.items()))


def data_of(modules: dict[str, Path]) -> list[str]:
    """The entries of the package's data folder (:mod:`mha.data`) that ``modules`` (a :func:`closure`) name as
    ``DATA_DIRECTORY / "name"`` (a file, or a folder taken whole: ``"lab"`` for the lab's checkpoints), and the
    list of sha256 sums that vouches for them, when there is any."""
    if not isinstance(modules, dict) or not all(isinstance(path, Path) for path in modules.values()):
        raise TypeError(f"modules must be a dict of module names to their files, as closure(tools) returns, got "
                        f"{type(modules).__name__}: {modules!r:.80}")
    named = {node.right.value for path in modules.values()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
             if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Name)
             and node.left.id == "DATA_DIRECTORY" and isinstance(node.right, ast.Constant)
             and isinstance(node.right.value, str) and re.fullmatch(r"[\w.-]+", node.right.value)}
    return sorted(named | {"SHA256SUMS"}) if named and "mha.data" in modules else []


def copy_tools(tools: tuple[str, ...], folder: Path, group: int | None) -> None:
    """Copy :func:`closure`'s files and :func:`data_of`'s into ``folder`` (empty) as the package lays them out
    (``<folder>/mha/...``), readable by its owner alone, or (``group``: the user id of the one process that may read
    them, where the grader is root) owned by root and readable by that id's group alone, which cannot change them."""
    if not isinstance(folder, Path) or (group is not None and (isinstance(group, bool) or not isinstance(group, int))):
        raise TypeError(f"folder must be a pathlib.Path and group a user id (an int) or None, got {folder!r:.60} and "
                        f"{group!r:.60}")
    modules = closure(tools)
    for module, path in modules.items():
        relative = Path(*module.split("."))
        target = folder / (relative / "__init__.py" if path.name == "__init__.py" else relative.with_suffix(".py"))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for name in data_of(modules):
        source = modules["mha.data"].parent / name
        if source.is_dir():
            shutil.copytree(source, folder / "mha" / "data" / name, copy_function=shutil.copyfile,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copyfile(source, folder / "mha" / "data" / name)
    for name in [folder, *folder.rglob("*")]:
        mode = 0o750 if name.is_dir() else 0o640
        if group is not None:
            os.chown(name, 0, group)
        os.chmod(name, mode if group is not None else mode & 0o700)
