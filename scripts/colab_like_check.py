"""Run every notebook as Colab would: the package installed from a wheel, the notebooks alone, no repository nearby.

    python -m scripts.colab_like_check                 # every notebook under chapters/ (about 6 minutes, 2 cores)
    python -m scripts.colab_like_check 2_syntax        # only notebooks whose path contains one of these words
    python -m scripts.colab_like_check --keep          # keep the temporary folder (venv, wheel, executed notebooks)

On Colab a notebook arrives alone: no repository beside it, no ``data/`` folder, no editable install; its setup cell
(``scripts/setup_cells.py``) installs the package from a release and the few libraries Colab lacks. This check builds
the same situation from the working tree, without a network beyond what pip already reaches:

1. builds a wheel of the package (``pyproject.toml``, ``src/``, ``data/``) from a copy of those files;
2. creates a fresh virtual environment and installs, with ``requirements.txt``'s versions as constraints, the wheel
   (not editable), the other packages the notebooks' setup cells install (bertviz), and a kernel (ipykernel) and
   nbclient to run the notebooks; torch==<pin> is whatever pip finds for that pin (CI's local CPU wheel here);
3. checks that the kernel's ``mha`` and its data files come from that environment, not from a repository;
4. copies the notebooks alone into an empty folder and executes each one, one at a time, in a kernel whose working
   directory is another empty folder, two notebooks at a time (``--jobs``). Outputs are not compared (the tests do that
   with nbval); a notebook fails
   here if a cell raises, which is what a reader on Colab would see.

``.ci/run`` runs it after ``make test``. It ends with a line ``colab-like: N passed, N failed`` and exits 1 if any
notebook failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.colab_like_check")
from scripts.book_release import ROOT, pins
from scripts.setup_cells import NOTEBOOKS, setup_requirements

KERNEL = "colab-like"
RUNNER = r"""
import json, sys, time
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from traitlets.config import Config

path, workdir, kernel, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
notebook = nbformat.read(path, as_version=4)
# Unix sockets, not TCP ports: two kernels started side by side could both pick the same free port
# ("Address already in use"); a socket file named after the kernel's own connection file cannot collide
config = Config()
config.KernelManager.transport = "ipc"
started = time.perf_counter()
try:
    NotebookClient(notebook, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": workdir}},
                   config=config).execute()
    problem = None
except (CellExecutionError, CellTimeoutError) as error:
    problem = str(error)
finally:
    nbformat.write(notebook, path)
print(json.dumps({"seconds": round(time.perf_counter() - started, 1), "problem": problem}))
"""
PROBE = """
import json, mha, mha.data_files as files
from mha.lab.checkpoints import checkpoint_names
print(json.dumps({"package": mha.__file__, "data": str(files.DATA_DIRECTORY),
                  "repository": str(files.repository_root()), "checkpoints": len(checkpoint_names())}))
"""


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    """Run ``command``, printing it; on failure print its output and raise."""
    shown = " ".join("<script>" if "\n" in str(part) else str(part) for part in command)
    print("$", shown, flush=True)
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, **options)
    if result.returncode != 0:
        print(result.stdout[-6000:], result.stderr[-6000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"failed ({result.returncode}): {shown}")
    return result


def build_wheel(folder: Path) -> Path:
    """A wheel of the package, built from a copy of only what it is built from (no repository around it)."""
    source = folder / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*")
    for name in ("src", "data"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    # the build backend (setuptools) of the environment running this script: no download, no build isolation
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
         folder / "wheels", source])
    return next((folder / "wheels").glob("mha-*.whl"))


def clean_environment(venv: Path) -> dict[str, str]:
    """This process's environment, less anything that points Python at the repository or at another environment."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP", "JUPYTER_PATH")}
    environment["PATH"] = f"{venv / 'bin'}{os.pathsep}{environment.get('PATH', '')}"
    environment["VIRTUAL_ENV"] = str(venv)
    return environment


def install(folder: Path, wheel: Path, python: str, environment: dict[str, str]) -> Path:
    """A fresh venv with the wheel, the setup cells' other packages, a kernel and nbclient; returns its python."""
    venv = folder / "venv"
    run([python, "-m", "venv", venv])
    constraints = folder / "constraints.txt"
    constraints.write_text("\n".join(pins().values()) + "\n")
    extras = sorted({requirement for path in NOTEBOOKS
                     for requirement in setup_requirements(json.loads(path.read_text()))[1:]})
    runner = [pins()["ipykernel"], f"nbclient=={importlib.metadata.version('nbclient')}",
              f"nbformat=={importlib.metadata.version('nbformat')}"]
    started = time.perf_counter()
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
         "-c", constraints, wheel, *extras, *runner], env=environment, cwd=folder)
    run([venv / "bin" / "python", "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL,
         "--display-name", "colab-like"], env=environment, cwd=folder)
    size = sum(path.stat().st_size for path in venv.rglob("*") if path.is_file() and not path.is_symlink())
    print(f"installed in {time.perf_counter() - started:.0f} s: {wheel.name}, {' '.join(extras)}, "
          f"{' '.join(runner)}; the environment takes {size / 2**30:.2f} GiB", flush=True)
    return venv / "bin" / "python"


def check_the_package_is_the_installed_one(python: Path, venv: Path, workdir: Path,
                                           environment: dict[str, str]) -> None:
    found = json.loads(run([python, "-c", PROBE], cwd=workdir, env=environment).stdout.strip().splitlines()[-1])
    inside = [Path(found[key]).resolve().is_relative_to(venv.resolve()) for key in ("package", "data")]
    if not all(inside) or found["repository"] != "None" or found["checkpoints"] == 0:
        raise SystemExit(f"the kernel's mha is not the wheel installed in {venv}: {found}")
    print(f"mha and its data come from the wheel: {found['data']} ({found['checkpoints']} checkpoints)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="run only notebooks whose path contains one of these words")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="the Python that creates the fresh environment (default: this one's base interpreter)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take (default 600)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and say where it is")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at a time (default 2)")
    args = parser.parse_args(argv)
    notebooks = [path for path in NOTEBOOKS if not args.only or any(word in str(path) for word in args.only)]
    if not notebooks:
        parser.error(f"no notebook under chapters/ matches {args.only}")
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="colab-like-"))
    try:
        wheel = build_wheel(folder)
        venv = folder / "venv"
        environment = clean_environment(venv)
        environment["JUPYTER_DATA_DIR"] = str(folder / "jupyter-data")  # no kernel of the user's own shadows ours
        environment["JUPYTER_RUNTIME_DIR"] = str(folder / "run")  # a short path: a Unix socket's is at most 107
        python = install(folder, wheel, args.python, environment)
        workdir = folder / "work"
        workdir.mkdir()
        check_the_package_is_the_installed_one(python, venv, workdir, environment)
        # two notebooks at a time, one CPU thread each: on 2 cores that is about 1.6 times faster than one at a
        # time on two threads, since much of a notebook's time is single-threaded Python
        single_thread = {**environment, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

        def execute(path: Path) -> dict:
            copy = folder / "notebooks" / path.parent.name / path.name  # the notebooks alone: no data/, no src/
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
            own_workdir = workdir / path.stem  # an empty working directory of its own
            own_workdir.mkdir()
            return json.loads(run([python, "-c", RUNNER, copy, own_workdir, KERNEL, str(args.timeout)],
                                  cwd=own_workdir, env=single_thread).stdout.strip().splitlines()[-1])

        results = {}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for path, outcome in zip(notebooks, pool.map(execute, notebooks), strict=True):
                results[path] = outcome
                verdict = "ok" if outcome["problem"] is None else "FAILED"
                print(f"{verdict:>6}  {outcome['seconds']:6.1f} s  {path.relative_to(ROOT)}", flush=True)
                if outcome["problem"]:
                    print(outcome["problem"][-3000:], flush=True)
        failed = [path for path, outcome in results.items() if outcome["problem"]]
        print(f"colab-like check: {len(notebooks)} notebooks in {time.perf_counter() - started:.0f} s"
              + (f"; kept in {folder}" if args.keep else ""))
        print(f"colab-like: {len(results) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
