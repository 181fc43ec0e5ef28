"""Write requirements.lock: the book's whole environment, every package pinned with the sha256 of its files.

    python -m scripts.lock_requirements --torch-wheels DIR   # rewrite requirements.lock (needs uv: pip install uv)

``requirements.txt`` pins the book's direct dependencies; the lock pins those and everything they bring, for Python
3.11 on x86-64 Linux (where ``make`` and ``.ci/run`` install it with ``pip install --require-hashes``), each with
the hashes of the files PyPI serves for that version. torch is its CPU-only build, ``torch==<pin>+cpu``, hashed from
the wheel in ``DIR``: download it from PyTorch's CPU index, the one ``make`` installs it from, first::

    pip download --no-deps "torch==<pin>+cpu" --index-url https://download.pytorch.org/whl/cpu -d DIR

Everything else is resolved against PyPI alone. uv keeps the versions the lock already has where they still fit, so
changing one pin in ``requirements.txt`` moves only what must move. The book's own package (``-e .``) is not in the
lock: an editable install has no file to hash, so ``make`` installs it afterwards without its dependencies, which
the lock has already installed. ``tests/test_requirements_lock.py`` fails when a pin of ``requirements.txt``
differs from the lock's, or the lock misses a dependency of what it pins.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.lock_requirements")
from scripts.book_release import ROOT, torch_cpu_requirement

LOCK = ROOT / "requirements.lock"
PYTHON = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
"""The platform the lock is for: x86-64 Linux with glibc 2.28 or later (the tag torch's CPU wheel carries)."""
COMMAND = "python -m scripts.lock_requirements --torch-wheels DIR"


def compile_command(uv: str, overrides: Path, torch_wheels: Path) -> list[str]:
    """The uv command that writes the lock: requirements.txt, torch replaced by its CPU build from ``torch_wheels``."""
    return [uv, "pip", "compile", "requirements.txt", "--output-file", LOCK.name, "--generate-hashes",
            "--python-version", PYTHON, "--python-platform", PLATFORM, "--index-url", "https://pypi.org/simple",
            "--find-links", str(torch_wheels), "--overrides", str(overrides), "--no-emit-package", "mha",
            "--custom-compile-command", COMMAND, "--quiet"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-wheels", type=Path, required=True,
                        help="a folder holding the torch==<pin>+cpu wheel downloaded from PyTorch's CPU index")
    parser.add_argument("--uv", default=shutil.which("uv") or "uv", help="the uv executable (default: uv on PATH)")
    args = parser.parse_args(argv)
    wheel = f"torch-{torch_cpu_requirement().split('==')[1]}-cp311-cp311-manylinux_2_28_x86_64.whl"
    if not (args.torch_wheels / wheel).is_file():
        parser.error(f"{args.torch_wheels} holds no {wheel}; download it as this script's docstring shows")
    if shutil.which(args.uv) is None:
        parser.error("uv is not installed: pip install uv (or name it with --uv)")
    with tempfile.TemporaryDirectory() as folder:
        overrides = Path(folder) / "torch-cpu.txt"
        overrides.write_text(torch_cpu_requirement() + "\n", encoding="utf-8")
        result = subprocess.run(compile_command(args.uv, overrides, args.torch_wheels.resolve()), cwd=ROOT)
        if result.returncode:
            return result.returncode
        # the override file was temporary: name what it said instead
        LOCK.write_text(LOCK.read_text(encoding="utf-8").replace(
            f"--override {overrides}", "torch's CPU build (scripts/lock_requirements.py)"), encoding="utf-8")
    print(f"wrote {LOCK.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
