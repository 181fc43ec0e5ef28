"""What every hosting file and launch link is derived from: one repository address, one version, one set of pins.

- The repository's address and branch are written once, in ``_config.yml`` (``repository:``), where Jupyter Book
  reads them for the launch buttons (Binder, Colab) and the repository button. Publishing the book under another
  address is a one-line change there; the Colab setup cells (``scripts/setup_cells.py``), the JupyterHub environment
  file and nbgitpuller links (``scripts/hosting_files.py``, ``scripts/hub_link.py``) are generated from it, and
  ``tests/test_hosting.py`` checks that no other file spells it out.
- The package's version is ``pyproject.toml``'s. A release is a commit, tagged ``v<version>`` (:func:`release_tag`)
  and recorded in ``release.toml`` with its version (:func:`release`); the Colab setup cells, the JupyterHub
  environment and the student branch's Binder install the package from that commit, which cannot be moved as a tag
  can (:func:`release_requirement`). ``python -m scripts.book_release --record-release`` records the commit checked
  out (CONTRIBUTING.md, "Cut a release").
- Every version is pinned once, in ``requirements.txt`` (:func:`pins`); ``requirements.lock`` pins everything those
  bring, with the sha256 of each file (``scripts/lock_requirements.py``; :func:`locked`).
- PyTorch comes from PyTorch's CPU-only wheel index wherever the book installs it on Linux (:data:`TORCH_CPU_INDEX`):
  PyPI's Linux wheel of torch is the CUDA build, gigabytes of libraries a CPU never uses.

Run from anywhere; it is imported by the other scripts and by the tests (it needs PyYAML, in requirements.txt).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parents[1]
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's index of CPU-only wheels; its Linux versions carry the local label ``+cpu`` (``torch==2.13.0+cpu``)."""


def config(root: Path = ROOT) -> dict:
    """The book's ``_config.yml``."""
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def repository_url(root: Path = ROOT) -> str:
    """The repository's address, ``https://github.com/<owner>/<name>``, from ``_config.yml``: the one place it is."""
    url = str(config(root)["repository"]["url"]).rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme != "https" or len([part for part in parsed.path.split("/") if part]) != 2:
        raise ValueError(f"_config.yml's repository.url should be https://<host>/<owner>/<name>, not {url!r}")
    return url


def repository_branch(root: Path = ROOT) -> str:
    """The source's branch (``_config.yml``'s ``repository.branch``); the website's launch buttons open the reader
    edition's branch instead (``sphinx.config.reader_edition_branch``, scripts/reader_edition.py)."""
    return str(config(root)["repository"].get("branch") or "main")


def repository_name(root: Path = ROOT) -> str:
    """The repository's folder name (the last part of its address), e.g. the folder nbgitpuller clones into."""
    return repository_url(root).rsplit("/", 1)[-1].removesuffix(".git")


def version(root: Path = ROOT) -> str:
    """The package's version, from ``pyproject.toml``."""
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def release_tag(root: Path = ROOT) -> str:
    """The git tag of this version's release: ``v<version>``."""
    return f"v{version(root)}"


def release(root: Path = ROOT) -> dict[str, str]:
    """The latest release, ``{"version": ..., "commit": <40 hex digits>}``, from ``release.toml``."""
    recorded = tomllib.loads((root / "release.toml").read_text(encoding="utf-8"))
    if not re.fullmatch(r"[0-9a-f]{40}", str(recorded.get("commit", ""))) or not recorded.get("version"):
        raise ValueError("release.toml should hold a version and a commit's full 40-digit hash; record the release "
                         "with python -m scripts.book_release --record-release")
    return {"version": str(recorded["version"]), "commit": recorded["commit"]}


def release_requirement(root: Path = ROOT) -> str:
    """The pip requirement that installs the package from its release's commit (what Colab, a JupyterHub and the
    student branch's Binder install): ``mha @ git+<repository>@<commit>``."""
    return f"mha @ git+{repository_url(root)}@{release(root)['commit']}"


def record_release(root: Path = ROOT) -> dict[str, str]:
    """Write ``release.toml``: the commit checked out in ``root`` and ``pyproject.toml``'s version at it."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True,
                              check=True).stdout.strip()

    if git("status", "--porcelain", "--untracked-files=no"):
        raise SystemExit("commit first: the release is a commit, and the working tree differs from it")
    commit = git("rev-parse", "HEAD")
    released = tomllib.loads(git("show", f"{commit}:pyproject.toml"))["project"]["version"]
    (root / "release.toml").write_text(
        "# The book's latest release: the commit that the Colab setup cells, environment.yml and the student branch's\n"
        "# Binder install the package from (a commit, which cannot move, not the tag v<version>, which can).\n"
        "# Written by python -m scripts.book_release --record-release (CONTRIBUTING.md, \"Cut a release\").\n"
        f'version = "{released}"\ncommit = "{commit}"\n', encoding="utf-8")
    return {"version": released, "commit": commit}


def normalised(name: str) -> str:
    """A distribution name as PEP 503 compares them: case-insensitive, runs of '-', '_', '.' equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: Path = ROOT) -> dict[str, str]:
    """``requirements.txt``'s pins as ``{normalised name: "name==version"}``, spelled as the file spells them."""
    found = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name = line.split("==", 1)[0].strip()
            found[normalised(name)] = line
    return found


def pinned(name: str, root: Path = ROOT) -> str:
    """``name==version`` as ``requirements.txt`` pins it; ``KeyError`` naming the file if it is not pinned there."""
    try:
        return pins(root)[normalised(name)]
    except KeyError:
        raise KeyError(f"{name} is not pinned in requirements.txt (name==version); pin it there first") from None


def torch_cpu_requirement(root: Path = ROOT) -> str:
    """``torch==<pinned version>+cpu``: the CPU-only build of the pinned torch, from :data:`TORCH_CPU_INDEX`."""
    return pinned("torch", root) + "+cpu"


def package_dependencies(root: Path = ROOT) -> list[str]:
    """The normalised names of the package's own dependencies (``pyproject.toml``): installing mha brings them."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [normalised(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))
            for requirement in project["dependencies"]]


NOTEBOOK_SERVER = ("jupyterlab", "jupyterlab-myst", "ipykernel", "bertviz")
"""What a notebook server needs beside the package: JupyterLab, MyST rendering in it, a kernel, and the one library
two notebooks import that the package does not (bertviz)."""


def notebook_requirements(root: Path = ROOT) -> list[str]:
    """Pinned requirements of a place that runs the notebooks (Binder, a JupyterHub): the package's dependencies and
    :data:`NOTEBOOK_SERVER`, torch excepted (it comes from the CPU index), in ``requirements.txt``'s order."""
    wanted = set(package_dependencies(root)) | {normalised(name) for name in NOTEBOOK_SERVER}
    wanted.discard("torch")
    missing = sorted(wanted - set(pins(root)))
    if missing:
        raise KeyError(f"not pinned in requirements.txt: {missing}")
    return [requirement for name, requirement in pins(root).items() if name in wanted]


def locked(root: Path = ROOT) -> dict[str, tuple[str, list[str]]]:
    """``requirements.lock`` as ``{normalised name: (its entry: "name==version" and its --hash options, on one line,
    [the names that need it, "-r requirements.txt" where requirements.txt pins it])}``, from uv's "# via" notes."""
    entries: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in re.sub(r"\\\n\s*", " ", (root / "requirements.lock").read_text(encoding="utf-8")).splitlines():
        note = line.strip().removeprefix("#").strip().removeprefix("via").strip()
        if re.match(r"[A-Za-z0-9]", line):
            name = normalised(line.split("==", 1)[0])
            entries[name] = (line.strip(), [])
        elif not line.strip():
            name = None  # the notes after the last entry are not its own
        elif name and line.lstrip().startswith("#") and note:
            entries[name][1].append(note)
    return entries


def torch_cpu_wheel(root: Path = ROOT) -> str:
    """The locked torch CPU wheel for CPython 3.11 on x86-64 Linux (Binder, a hub) as a pip requirement: its address
    on PyTorch's index, and the lock's hash of it as the address's ``#sha256=`` (pip checks it when it downloads)."""
    entry = locked(root)["torch"][0]
    (sha256,) = re.findall(r"--hash=sha256:([0-9a-f]{64})", entry)
    version = torch_cpu_requirement(root).split("==")[1]
    file = f"torch-{version.replace('+', '%2B')}-cp311-cp311-manylinux_2_28_x86_64.whl"
    return f"torch @ {TORCH_CPU_INDEX}/{file}#sha256={sha256}"


def locked_closure(names: list[str], root: Path = ROOT) -> list[str]:
    """The lock's entries (pin and hashes) of ``names`` and of everything they need, in the lock's order."""
    entries = locked(root)
    wanted = {normalised(name) for name in names}
    missing = sorted(wanted - set(entries))
    if missing:
        raise KeyError(f"not in requirements.lock: {missing}; run python -m scripts.lock_requirements")
    grown = True
    while grown:
        before = len(wanted)
        wanted |= {name for name, (_, parents) in entries.items() if wanted & {normalised(p) for p in parents}}
        grown = len(wanted) > before
    return [entry for name, (entry, _) in entries.items() if name in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the commit checked out as the book's release.")
    parser.add_argument("--record-release", action="store_true", required=True,
                        help="write release.toml: this commit and its version (the tree must be committed)")
    parser.parse_args(argv)
    recorded = record_release()
    print(f"release.toml: version {recorded['version']}, commit {recorded['commit']}; now run "
          "python -m scripts.setup_cells and python -m scripts.hosting_files, and commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
