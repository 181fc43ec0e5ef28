"""What every hosting file and launch link is derived from: one repository address, one version, one set of pins.

- The repository's address and branch are written once, in ``_config.yml`` (``repository:``), where Jupyter Book
  reads them for the launch buttons (Binder, Colab) and the repository button. Publishing the book under another
  address is a one-line change there; the Colab setup cells (``scripts/setup_cells.py``), the JupyterHub environment
  file and nbgitpuller links (``scripts/hosting_files.py``, ``scripts/hub_link.py``) are generated from it, and
  ``tests/test_hosting.py`` checks that no other file spells it out.
- The package's version is ``pyproject.toml``'s; a release is the git tag ``v<version>`` (:func:`release_tag`), and
  the Colab setup cells and the JupyterHub environment install the package from that tag.
- Every version is pinned once, in ``requirements.txt`` (:func:`pins`).
- PyTorch comes from PyTorch's CPU-only wheel index wherever the book installs it on Linux (:data:`TORCH_CPU_INDEX`):
  PyPI's Linux wheel of torch is the CUDA build, gigabytes of libraries a CPU never uses.

Run from anywhere; it is imported by the other scripts and by the tests (it needs PyYAML, in requirements.txt).
"""

from __future__ import annotations

import re
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
    """The branch the launch buttons open (``_config.yml``'s ``repository.branch``)."""
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


def release_requirement(root: Path = ROOT) -> str:
    """The pip requirement that installs the package from its release tag (what Colab and a JupyterHub install)."""
    return f"mha @ git+{repository_url(root)}@{release_tag(root)}"


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
