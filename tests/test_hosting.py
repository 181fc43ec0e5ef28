"""The book runs anywhere: package data found through the package, CPU-only torch wherever the book installs it,
Binder, JupyterHub and Colab files generated from one repository address, and JupyterLab with MyST rendering.

The slow whole-system check, every notebook executed from a wheel in a fresh environment with no repository beside
it, is ``scripts/colab_like_check.py`` (``.ci/run`` runs it after the suite).
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from conftest import book_text_files, load_script

import mha.data_files
from mha.core.low_rank_fitting import PATTERN_FITS_PATH
from mha.corpora.treebank import SAMPLE_TREEBANK_PATH, read_conllu
from mha.lab.checkpoints import LAB_DIRECTORY, MANIFEST_NAME, CheckpointError, read_manifest
from scripts import book_release, hosting_files, hub_link, setup_cells

ROOT = Path(__file__).resolve().parents[1]

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_PIN = book_release.pins()["torch"].split("==")[1]


# ---- data files are package data, found through the package ----

def test_data_is_found_through_the_package_and_is_the_repositorys_data_folder():
    assert mha.data_files.DATA_DIRECTORY == Path(os.fspath(importlib.resources.files("mha.data"))).resolve()
    # in this (editable) install the package data is the repository's data/ folder itself
    assert mha.data_files.DATA_DIRECTORY == (ROOT / "data").resolve()
    assert mha.data_files.repository_root() == ROOT
    for path in (LAB_DIRECTORY, PATTERN_FITS_PATH, SAMPLE_TREEBANK_PATH):
        assert path.is_relative_to(mha.data_files.DATA_DIRECTORY) and path.exists(), path


@pytest.mark.slow
def test_data_files_are_read_from_any_working_directory(tmp_path):
    code = ("from mha.corpora.treebank import SAMPLE_TREEBANK_PATH, read_conllu\n"
            "from mha.lab.checkpoints import load_checkpoint\n"
            "from mha.core.low_rank_fitting import load_pattern_fits\n"
            "print(len(read_conllu(SAMPLE_TREEBANK_PATH)), load_checkpoint('induction_2layer_seed0')[1].name,"
            " len(load_pattern_fits().targets))")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[:2] == [str(len(read_conllu(SAMPLE_TREEBANK_PATH))), "induction_2layer_seed0"]


def test_the_package_list_covers_every_subpackage_and_maps_data_into_the_package():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    subpackages = {".".join(path.relative_to(ROOT / "src").parent.parts)
                   for path in (ROOT / "src" / "mha").rglob("__init__.py")}
    data_packages = {"mha.data"} | {f"mha.data.{folder.name}" for folder in (ROOT / "data").iterdir()
                                     if folder.is_dir() and not folder.name.startswith((".", "_"))}
    assert set(setuptools["packages"]) == subpackages | data_packages, (
        "pyproject.toml lists the packages by hand (data/ lies outside src/): add the new subpackage there")
    assert setuptools["package-dir"] == {"": "src", "mha.data": "data"}


def _data_files() -> list[str]:
    """Every file the notebooks may read, as the wheel should hold it (relative to mha/data/)."""
    manifest = read_manifest(LAB_DIRECTORY)
    lab = [entry["file"] for entry in manifest["checkpoints"].values()] + list(manifest["files"]) + [MANIFEST_NAME]
    treebank = [f"ud_english_ewt/{path.name}" for path in sorted((ROOT / "data" / "ud_english_ewt").iterdir())
                if path.is_file() and path.suffix in (".conllu", ".txt", ".md")]
    return ["__init__.py", "sample.conllu", "pattern_fits.json", "pruning_spread.json", "citations.json", *treebank] + \
        [f"lab/{name}" for name in lab]


@pytest.mark.slow
def test_a_built_wheel_carries_every_data_file(tmp_path):
    wheel = load_script("colab_like_check").build_wheel(tmp_path)  # from a copy of only what it is built from
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [name for name in _data_files() if f"mha/data/{name}" not in names]
        assert not missing, f"the wheel lacks package data: {missing}"
        assert archive.read("mha/data/lab/manifest.json") == (LAB_DIRECTORY / MANIFEST_NAME).read_bytes()


def test_an_installed_wheels_damaged_file_says_how_to_reinstall_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(mha.data_files, "repository_root", lambda: None)  # as from a wheel: no repository around
    message = mha.data_files.how_to_restore("python -m scripts.train_checkpoints", LAB_DIRECTORY)
    assert "pip install --force-reinstall --no-deps" in message and "python -m scripts.train_checkpoints" in message
    assert "clone of the book's repository" in message
    # a folder of one's own (not the package's data) is regenerated, not reinstalled
    with pytest.raises(CheckpointError) as raised:
        read_manifest(tmp_path)
    assert "pip install" not in str(raised.value) and "clone of the book's repository" in str(raised.value)


def test_in_a_clone_the_message_names_the_repository_root():
    message = mha.data_files.how_to_restore("python -m scripts.fit_head_patterns", PATTERN_FITS_PATH)
    assert "python -m scripts.fit_head_patterns" in message and str(ROOT) in message


# ---- torch is the CPU-only build wherever the book installs it on Linux ----

def _requirement_lines(lines: list[str]) -> list[str]:
    """A requirements file's requirements, one a line: continuations joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines()
    return [line.split("#", 1)[0].strip() if not line.lstrip().startswith(("torch @", '"torch @')) else line.strip()
            for line in joined if line.split("#", 1)[0].strip()]


def _locked_torch_sha256() -> str:
    """The sha256 requirements.lock records for torch's CPU wheel (the lock's entry read here on its own)."""
    entry = re.search(r"^torch==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", (ROOT / "requirements.lock").read_text(),
                      re.M)
    assert entry and entry.group(1) == f"{TORCH_PIN}+cpu", "requirements.lock locks torch's CPU build with one hash"
    return entry.group(2)


def _check_cpu_torch(lines: list[str], where: str) -> None:
    """torch is the CPU build of the pin, the one wheel the lock hashes, fetched by its address on PyTorch's index with
    that hash: no index is searched for it, so no other index can answer for the name (dependency confusion)."""
    assert not [line for line in lines if "index-url" in line or "find-links" in line], f"{where} names an index"
    torch = [line.strip('"') for line in lines if re.match(r'"?torch\s*[=<>~!@ ]', line)]
    wheel = f"torch-{TORCH_PIN}%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert len(torch) == 1 and re.fullmatch(
        rf"torch @ {re.escape(CPU_INDEX)}/{re.escape(wheel)}(#sha256=| --hash=sha256:){_locked_torch_sha256()}",
        torch[0]), f"{where} should take torch's locked CPU wheel from {CPU_INDEX} with its hash, not {torch}"


def test_binder_takes_the_cpu_build_of_the_pinned_torch_and_checks_every_files_hash():
    lines = _requirement_lines((ROOT / "binder" / "requirements.txt").read_text().splitlines())
    _check_cpu_torch(lines, "binder/requirements.txt")
    # pip's hash-checking mode: every requirement pinned with a hash, or pip refuses the whole file
    assert all("--hash=sha256:" in line and ("==" in line or line.startswith("torch @")) for line in lines), [
        line for line in lines if "--hash=sha256:" not in line]
    post_build = (ROOT / "binder" / "postBuild").read_text()
    assert post_build.startswith("#!/bin/bash\n") and os.access(ROOT / "binder" / "postBuild", os.X_OK)
    assert post_build.splitlines()[-1] == "python -m pip install --no-deps --no-build-isolation .", (
        "Binder installs the book's package from its checkout, after the hashed file has installed what it needs")
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_binders_hashed_file_holds_everything_its_packages_need():
    """What pip's hash-checking mode demands, read from the installed packages' own metadata."""
    from test_requirements_lock import unlisted_requirements

    lines = _requirement_lines((ROOT / "binder" / "requirements.txt").read_text().splitlines())
    listed = {book_release.normalised(re.split(r"==| @ ", line)[0]): line for line in lines}
    versions = {name: (f"{TORCH_PIN}+cpu" if name == "torch" else line.split("==")[1].split()[0])
                for name, line in listed.items()}
    assert {"bertviz", "jupyterlab", "ipykernel", "transformers", "setuptools"} <= set(listed)
    checked, missing = unlisted_requirements(versions)
    assert checked > 0.9 * len(listed) and not missing, (checked, missing)


def test_the_jupyterhub_environment_takes_the_cpu_build_of_the_pinned_torch():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    _check_cpu_torch(pip, "environment.yml")
    assert "python=3.11" in environment["dependencies"]
    assert book_release.release_requirement() in pip and book_release.pinned("nbgitpuller") in pip


def _make_install_commands(*variables: str) -> list[str]:
    """The commands `make` would run to install .venv (dry run, as if requirements.txt had just changed)."""
    # run as a fresh `make` would be: not with the variables of a make that runs these tests (`make test
    # TORCH_INDEX=` in CI passes TORCH_INDEX to every make below it through MAKEFLAGS)
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH_INDEX")}
    result = subprocess.run(["make", "-n", "-W", "requirements.txt", ".venv/.installed", *variables], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, env=environment)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if "pip install" in line or line.startswith("sed ")]


@pytest.mark.skipif(shutil.which("make") is None or sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="the Makefile's default on x86-64 Linux")
def test_make_on_linux_takes_torch_from_the_cpu_index_unless_told_not_to():
    commands = _make_install_commands()
    torch = [line for line in commands if "torch.lock" in line and "pip install" in line]
    assert torch and f"--index-url {CPU_INDEX}" in torch[0] and "--require-hashes" in torch[0], commands
    # that index alone, for torch alone: no package is looked up in two indexes (dependency confusion); torch's own
    # dependencies come from PyPI with the lock
    assert "--extra-index-url" not in torch[0] and "--no-deps" in torch[0], torch[0]
    # what it installs is the lock's own entry for torch: the CPU build of the pin, with its hash
    (extract,) = [line for line in commands if line.startswith("sed ")]
    entry = subprocess.run(extract.split(" > ")[0], shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert re.fullmatch(rf"torch=={re.escape(TORCH_PIN)}\+cpu \\\n(    --hash=sha256:[0-9a-f]{{64}}( \\)?\n)+",
                        entry.stdout), entry.stdout
    assert commands.index(torch[0]) < next(i for i, line in enumerate(commands) if "-r requirements.lock" in line), (
        "the CPU build goes in before the lock, whose torch entry it then satisfies")
    assert not [line for line in _make_install_commands("TORCH_INDEX=") if "torch" in line or CPU_INDEX in line]
    assert re.search(rf"^TORCH_INDEX \?= {re.escape(CPU_INDEX)}$", (ROOT / "Makefile").read_text(), re.M)


def test_ci_installs_torch_from_what_pip_finds_and_runs_the_colab_like_check_after_the_suite():
    script = (ROOT / ".ci" / "run").read_text()
    makes = [line for line in script.splitlines() if line.startswith("make ")]
    assert makes and all("TORCH_INDEX=" in line and CPU_INDEX not in line for line in makes), makes
    lines = [line.strip() for line in script.splitlines()]
    assert lines.index(".venv/bin/python -m scripts.colab_like_check") > lines.index(
        'make test PYTHON="$PYTHON" TORCH_INDEX=')


# ---- the files for Binder and a JupyterHub are generated from requirements.txt and _config.yml ----

def test_the_hosting_files_are_what_scripts_hosting_files_writes():
    stale = [str(path.relative_to(ROOT)) for path in hosting_files.outdated()]
    assert not stale, f"{stale} differ from what they are generated from: run python -m scripts.hosting_files"


def test_the_hosting_files_pin_what_requirements_txt_pins():
    pins = book_release.pins()
    binder = _requirement_lines((ROOT / "binder" / "requirements.txt").read_text().splitlines())
    versions = {book_release.normalised(line.split("==")[0]): line.split()[0] for line in binder if "==" in line}
    for name, requirement in versions.items():
        if name in pins:
            assert pins[name] == requirement, (pins[name], requirement)
    for package in ("jupyterlab", "jupyterlab-myst", "ipykernel", "bertviz", "myst-nb"):
        assert versions[package] == pins[package]


def test_the_repository_address_is_written_once():
    """_config.yml holds it; generated files may repeat it (their tests check them); nothing else spells it out."""
    address = urlparse(book_release.repository_url()).netloc + urlparse(book_release.repository_url()).path
    generated = {ROOT / "_config.yml", ROOT / "environment.yml"}
    found = []
    for path in book_text_files():
        if path in generated:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if path.suffix == ".ipynb":
            cells = json.loads(text)["cells"]
            text = "\n".join("".join(cell["source"]) for cell in cells if not setup_cells.is_setup_cell(cell))
        if address in text:
            found.append(str(path.relative_to(ROOT)))
    assert not found, (f"{found} spell out the repository's address {address}; keep it in _config.yml only and "
                       "derive it (scripts/book_release.py), so that publishing elsewhere is a one-line change")


# ---- Colab: each notebook's setup cell installs what it imports, from the release, on Colab only ----

@pytest.mark.parametrize("path", setup_cells.NOTEBOOKS, ids=lambda path: path.stem)
@pytest.mark.slow
def test_every_notebooks_setup_cell_is_the_generated_one(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    first = setup_cells.first_code_cell(notebook)
    expected = setup_cells.setup_cell(notebook, first.get("id", "colab-setup"))
    assert ("".join(first["source"]), first["metadata"].get("tags")) == (
        "".join(expected["source"]), expected["metadata"]["tags"]), (
        f"{path.relative_to(ROOT)}'s first code cell is not its generated setup cell: python -m scripts.setup_cells")
    assert not first.get("outputs"), "the setup cell prints nothing outside Colab"


def _run_setup_cell(source: str, on_colab: bool) -> list[tuple[str, str]]:
    """Run a setup cell's code with a stand-in IPython; returns the magics it ran as (name, argument)."""
    from IPython.core.inputtransformer2 import TransformerManager

    calls = []
    shell = types.SimpleNamespace(run_line_magic=lambda name, line: calls.append((name, line)))
    saved = sys.modules.get("google.colab")
    try:
        if on_colab:
            sys.modules["google.colab"] = types.ModuleType("google.colab")
        else:
            sys.modules.pop("google.colab", None)
        exec(TransformerManager().transform_cell(source), {"get_ipython": lambda: shell})
    finally:
        if saved is not None:
            sys.modules["google.colab"] = saved
        else:
            sys.modules.pop("google.colab", None)
    return calls


@pytest.mark.parametrize("path", setup_cells.NOTEBOOKS, ids=lambda path: path.stem)
def test_the_setup_cell_installs_what_the_notebook_imports_from_the_release_on_colab_only(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    source = setup_cells.setup_source(notebook)
    assert _run_setup_cell(source, on_colab=False) == []
    ((magic, line),) = _run_setup_cell(source, on_colab=True)
    assert magic == "pip" and line.startswith("install --quiet ")
    requested = re.findall(r'"([^"]+)"', line)
    commit = tomllib.loads((ROOT / "release.toml").read_text())["commit"]
    assert requested[0] == f"mha @ git+{book_release.repository_url()}@{commit}", (
        "the package comes from the release's commit, which no one can move as a tag can be moved")
    imported = setup_cells.imported_distributions(notebook)
    others = {book_release.normalised(requirement.split("==")[0]) for requirement in requested[1:]}
    assert others <= imported, "nothing the notebook does not import"
    brought = set(book_release.package_dependencies()) | setup_cells.KERNEL_DISTRIBUTIONS | {"mha"}
    assert imported <= others | brought, "everything it imports: directly, or as the package's dependency"
    assert all(requirement == book_release.pinned(requirement.split("==")[0]) for requirement in requested[1:])


def _git(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *arguments], capture_output=True, text=True, timeout=60)


def test_the_release_is_a_commit_of_this_repositorys_history_with_the_recorded_version():
    release = tomllib.loads((ROOT / "release.toml").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", release["commit"]), "a full commit hash: a short one could come to mean two"
    assert _git("merge-base", "--is-ancestor", release["commit"], "HEAD").returncode == 0, (
        f"release.toml's commit {release['commit']} is not in this branch's history")
    at_release = tomllib.loads(_git("show", f"{release['commit']}:pyproject.toml").stdout)
    assert at_release["project"]["version"] == release["version"], "the commit is the release of that version"
    assert (_git("cat-file", "-e", f"{release['commit']}:src/mha/__init__.py").returncode == 0
            and _git("cat-file", "-e", f"{release['commit']}:data/__init__.py").returncode == 0), (
        "pip builds the package from that commit: its source and data are there")


def test_recording_a_release_takes_the_commit_checked_out_and_refuses_an_uncommitted_tree(tmp_path):
    def git(*arguments: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *arguments], capture_output=True, text=True,
                              check=True).stdout.strip()

    git("init", "--quiet")
    git("config", "user.email", "a@example.org")
    git("config", "user.name", "A maintainer")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mha"\nversion = "9.8.7"\n')
    git("add", "pyproject.toml")
    git("commit", "--quiet", "-m", "a release")
    assert book_release.record_release(tmp_path) == {"version": "9.8.7", "commit": git("rev-parse", "HEAD")}
    assert book_release.release(tmp_path) == {"version": "9.8.7", "commit": git("rev-parse", "HEAD")}
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mha"\nversion = "9.8.8"\n')
    with pytest.raises(SystemExit, match="commit first"):
        book_release.record_release(tmp_path)
    (tmp_path / "release.toml").write_text('version = "9.8.7"\ncommit = "v9.8.7"\n')
    with pytest.raises(ValueError, match="40-digit"):
        book_release.release(tmp_path)


@pytest.mark.slow
def test_notebooks_that_show_bertviz_install_it_and_the_others_do_not():
    for path in setup_cells.NOTEBOOKS:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        uses = "bertviz" in setup_cells.imported_modules(notebook)
        assert (book_release.pinned("bertviz") in setup_cells.setup_requirements(notebook)) == uses, path.name


# ---- JupyterHub: nbgitpuller links ----

def test_the_hub_link_pulls_the_repository_and_opens_the_notebook():
    link = hub_link.hub_link("https://hub.example.edu/", "chapters/3_head_roles/5_induction_heads.ipynb")
    parsed = urlparse(link)
    assert (parsed.scheme, parsed.netloc, parsed.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    query = parse_qs(parsed.query)
    assert query == {"repo": [book_release.repository_url()], "branch": [book_release.repository_branch()],
                     "urlpath": [f"lab/tree/{book_release.repository_name()}/chapters/3_head_roles/"
                                 "5_induction_heads.ipynb"]}
    notebook = parse_qs(urlparse(hub_link.hub_link("https://hub.example.edu", interface="notebook")).query)
    assert notebook["urlpath"] == [f"tree/{book_release.repository_name()}/chapters"]


@pytest.mark.parametrize("hub, path", [("hub.example.edu", "chapters"), ("https://hub.example.edu", "../etc"),
                                       ("https://hub.example.edu", "/etc/passwd"),
                                       ("https://hub.example.edu", "chapters/no_such_notebook.ipynb")])
def test_the_hub_link_refuses_what_would_not_work(hub, path):
    with pytest.raises(ValueError):
        hub_link.hub_link(hub, path)


def test_the_hub_link_script_prints_one_link_per_notebook(capsys):
    assert hub_link.main(["https://hub.example.edu", "--all"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "git-pull?" in line]
    assert len(rows) == len(setup_cells.NOTEBOOKS)


# ---- JupyterLab renders the notebooks' MyST markup ----

@pytest.mark.slow
def test_jupyterlab_loads_jupyterlab_myst():
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.exists():
        pytest.skip("JupyterLab is not installed in this environment: pip install -r requirements.txt")
    result = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True, text=True, timeout=120)
    listing = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # without the colours
    line = next((line for line in listing.splitlines() if "jupyterlab-myst" in line and "enabled" in line), "")
    assert re.search(r"\bOK\b", line), f"JupyterLab does not load jupyterlab-myst (pins out of step?):\n{listing}"


# ---- the student edition: the student branch, on a hub, Binder and Colab ----

def test_a_student_hub_link_pulls_the_student_branch_into_its_own_folder():
    query = parse_qs(urlparse(hub_link.hub_link("https://hub.example.edu", "weeks/week_5.ipynb", student=True)).query)
    folder = f"{book_release.repository_name()}-student"
    assert query == {"repo": [book_release.repository_url()], "branch": ["student"], "targetPath": [folder],
                     "urlpath": [f"lab/tree/{folder}/weeks/week_5.ipynb"]}
    with pytest.raises(ValueError):  # the weekly notebooks are on the student branch only
        hub_link.hub_link("https://hub.example.edu", "weeks/week_5.ipynb")


def test_binder_and_colab_links_open_the_book_or_the_student_branch():
    owner_and_name = urlparse(book_release.repository_url()).path.strip("/")
    notebook = "chapters/1_mechanism/1_attention_from_scratch.ipynb"
    for student, branch in ((False, book_release.repository_branch()), (True, "student")):
        binder = urlparse(hub_link.binder_link(notebook, student=student))
        assert (binder.scheme, binder.netloc, binder.path) == ("https", "mybinder.org",
                                                               f"/v2/gh/{owner_and_name}/{branch}")
        assert parse_qs(binder.query) == {"urlpath": [f"lab/tree/{notebook}"]}
        assert hub_link.colab_link(notebook, student=student) == (
            f"https://colab.research.google.com/github/{owner_and_name}/blob/{branch}/{notebook}")
    with pytest.raises(ValueError, match="Colab opens one notebook"):
        hub_link.colab_link("chapters", student=True)


def test_the_link_script_prints_student_links_for_every_notebook(capsys):
    assert hub_link.main(["colab", "--all", "--student"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "/blob/student/" in line]
    assert len(rows) == len(setup_cells.NOTEBOOKS)
    assert hub_link.main(["binder", "weeks/week_2.ipynb", "--student"]) == 0
    assert "/student?urlpath=lab%2Ftree%2Fweeks%2Fweek_2.ipynb" in capsys.readouterr().out
