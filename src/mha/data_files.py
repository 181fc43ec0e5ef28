"""Where the book's data files live, and how they are read without trusting them (chapters 2 and 3).

The notebooks read stored results: the lab's checkpoints (``lab/``, :mod:`mha.lab.checkpoints`), the fitted heads of
chapter 2 (``pattern_fits.json``, :mod:`mha.core.low_rank_fitting`) and a treebank sample (``sample.conllu``,
:mod:`mha.corpora.treebank`). They are package data: the repository's ``data/`` folder is installed as the package
:mod:`mha.data`, and :data:`DATA_DIRECTORY` is found through the package with :mod:`importlib.resources`, so they are
found from any working directory, in an editable install (the repository's ``data/`` itself) and from a wheel
(``mha/data/`` in site-packages, as on Colab, Binder or a JupyterHub).

A data file may be missing, replaced by something else, or damaged. :func:`read_data_file` reads only a regular file
of bounded size, so a path that names a device such as ``/dev/zero`` or a pipe fails at once instead of hanging, and
every failure is raised as the caller's own error class with what to do about it (:func:`how_to_restore`: the command
that regenerates the file in a clone of the repository, and for an installed package, how to reinstall it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
import stat
from pathlib import Path

__all__ = ["DATA_DIRECTORY", "how_to_restore", "read_data_file", "repository_root"]

DATA_PACKAGE = "mha.data"


def _data_directory() -> Path:
    """The folder of the package :mod:`mha.data`: the repository's ``data/`` (editable install) or ``mha/data/``."""
    try:
        return Path(os.fspath(importlib.resources.files(DATA_PACKAGE))).resolve()
    except (ModuleNotFoundError, TypeError):
        # src/ put on sys.path by hand instead of installing the package: mha.data is not importable. Reading then
        # fails with "missing" and how_to_restore() says to install the package.
        return Path(__file__).resolve().parent / "data"


DATA_DIRECTORY = _data_directory()
"""The folder of :mod:`mha.data`: the repository's ``data/`` in an editable install, ``mha/data/`` from a wheel."""


def repository_root() -> Path | None:
    """The repository whose ``data/`` this package reads (an editable install), or None for an installed wheel."""
    root = DATA_DIRECTORY.parent
    if DATA_DIRECTORY.name == "data" and (root / "pyproject.toml").is_file() and (root / "scripts").is_dir():
        return root
    return None


def _reinstall_command() -> str:
    """The pip command that reinstalls this copy of mha from where it came from (PEP 610's direct_url.json)."""
    # the metadata installed beside this copy of the package (site-packages), not another copy's further on sys.path
    beside = list(importlib.metadata.distributions(name="mha", path=[str(Path(__file__).resolve().parents[1])]))
    try:
        distribution = beside[0] if beside else importlib.metadata.distribution("mha")
    except importlib.metadata.PackageNotFoundError:
        return "pip install ."
    version = distribution.version
    try:
        origin = json.loads(distribution.read_text("direct_url.json") or "null")
    except json.JSONDecodeError:
        origin = None
    if isinstance(origin, dict) and isinstance(origin.get("url"), str):
        vcs = origin.get("vcs_info")
        if isinstance(vcs, dict):
            revision = vcs.get("requested_revision") or vcs.get("commit_id")
            target = f"mha @ {vcs.get('vcs', 'git')}+{origin['url']}" + (f"@{revision}" if revision else "")
        else:
            target = origin["url"].removeprefix("file://")
        return f'pip install --force-reinstall --no-deps "{target}"'
    return f"pip install --force-reinstall --no-deps mha=={version}"


def _inside(path: str | os.PathLike | None, folder: Path) -> bool:
    if path is None:
        return True
    try:
        return Path(path).resolve().is_relative_to(folder)
    except OSError:
        return False


def how_to_restore(regenerate: str, path: str | os.PathLike | None = None) -> str:
    """What to do about a missing or damaged data file ``path``, as a sentence for an error message.

    ``regenerate`` is the command that rebuilds it from a clone of the repository (``python scripts/...``). In an
    editable install it is run from this repository's root. A file that came inside an installed wheel (Colab,
    Binder, a JupyterHub) is restored by reinstalling the package, so the message gives that command first.
    """
    root = repository_root()
    if root is not None:
        return f"Regenerate it with:\n    {regenerate}\n(run from the repository root, {root})."
    if not _inside(path, DATA_DIRECTORY):
        return f"Regenerate it with:\n    {regenerate}\n(run from the root of a clone of the book's repository)."
    return (f"It is package data of the installed package mha ({DATA_DIRECTORY}); reinstall the package to restore "
            f"it:\n    {_reinstall_command()}\nor, in a clone of the book's repository, regenerate it with:\n"
            f"    {regenerate}\n(run from the clone's root, then install the package from the clone).")


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def read_data_file(path: str | os.PathLike, *, what: str, how: str, limit: int,
                   error: type[Exception] = ValueError) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; anything else raises ``error``.

    ``what`` names the file in messages ("the checkpoint manifest"); ``how`` says how to fix it (usually the
    command that regenerates it). Devices, pipes and folders are refused before they are opened, so nothing hangs.
    """
    path = Path(path)
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} is missing. {how}") from None
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem}). {how}") from problem
    if not stat.S_ISREG(before.st_mode):
        raise error(f"{what} {path} is {_file_kind(before.st_mode)}, not a regular file, so it is not read. Put the "
                    f"real file there. {how}")
    if before.st_size > limit:
        raise error(f"{what} {path} is {before.st_size:,} bytes, more than the {limit:,} bytes it may have, so it "
                    f"is not read. {how}")
    try:
        # O_NONBLOCK: should the path turn into a pipe after the check above, opening it cannot block
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error(f"{what} {path} changed into something other than a regular file while it was read. "
                            f"{how}")
            data = handle.read(limit + 1)
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem}). {how}") from problem
    if len(data) > limit:
        raise error(f"{what} {path} grew past {limit:,} bytes while it was read. {how}")
    return data
