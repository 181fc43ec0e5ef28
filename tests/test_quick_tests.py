"""`make test-quick` (``pytest --quick``) runs the unit tests alone: every notebook, every test of the built site or in
Chromium, and the slow tests stay out (tests/conftest.py marks them), so that the split cannot drift as tests are
added."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTER = """
import json, os

def pytest_collection_finish(session):
    with open(os.environ["MHA_SELECTION_OUT"], "w") as out:
        json.dump([[item.nodeid, sorted(getattr(item, "fixturenames", ()))] for item in session.items], out)
"""


def quick_arguments() -> list[str]:
    """What `make test-quick` gives pytest, read from the Makefile's recipe."""
    recipe = re.search(r"^test-quick:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    return shlex.split(recipe.split(" -m pytest ", 1)[1])


def fake_item(path: str, fixtures: tuple[str, ...] = (), name: str = "test_something"):
    """What :func:`conftest.speed_marker` reads of a collected test."""
    return SimpleNamespace(path=ROOT / path, fixturenames=["request", *fixtures], originalname=name)


def fake_config(quick: bool, markexpr: str = ""):
    """What the hooks of ``--quick`` read of pytest's configuration."""
    return SimpleNamespace(getoption=lambda name: quick, option=SimpleNamespace(markexpr=markexpr),
                           addinivalue_line=lambda name, line: None)


def test_notebooks_and_the_sites_tests_are_marked_from_their_path_and_fixtures():
    assert conftest.speed_marker(fake_item("chapters/1_mechanism/1_attention_from_scratch.ipynb")) == "notebook"
    for fixture in conftest.BROWSER_FIXTURES:
        assert conftest.speed_marker(fake_item("tests/views/test_new.py", ("tmp_path", fixture))) == "browser"
    assert conftest.speed_marker(fake_item("tests/site/test_new.py")) == "browser"
    assert conftest.speed_marker(fake_item("tests/exercises/grading/test_new.py")) == "slow"
    assert conftest.speed_marker(fake_item("tests/site_new.py", ("tmp_path",))) is None  # a name, not the folder
    assert conftest.speed_marker(fake_item("tests/core/test_new.py", ("tmp_path",))) is None


def test_a_test_listed_by_name_is_slow_with_every_parametrisation_and_its_neighbours_are_not(monkeypatch):
    monkeypatch.setattr(conftest, "SLOW_PATHS", ("tests/core/test_new.py::test_big",))
    assert conftest.speed_marker(fake_item("tests/core/test_new.py", name="test_big")) == "slow"
    assert conftest.speed_marker(fake_item("tests/core/test_new.py", name="test_big_too")) is None
    assert conftest.speed_marker(fake_item("tests/core/test_other.py", name="test_big")) is None


@pytest.mark.parametrize("entry", conftest.BROWSER_PATHS + conftest.SLOW_PATHS)
def test_every_folder_file_and_test_marked_by_name_exists(entry):
    file, _, name = entry.partition("::")
    assert (ROOT / file).exists(), f"tests/conftest.py marks {entry}, which does not exist"
    assert not name or re.search(rf"^def {name}\(", (ROOT / file).read_text(), re.M), \
        f"tests/conftest.py marks {entry}, but {file} has no such test"


def test_quick_leaves_out_every_speed_marker_and_keeps_a_selection_given_with_it():
    assert conftest.QUICK == "not (notebook or browser or slow)" and set(conftest.SPEED_MARKERS) == {
        "notebook", "browser", "slow"}
    for given, selected in [("", conftest.QUICK), ("core", f"({conftest.QUICK}) and (core)")]:
        config = fake_config(quick=True, markexpr=given)
        conftest.pytest_configure(config)
        assert config.option.markexpr == selected
    config = fake_config(quick=False)
    conftest.pytest_configure(config)
    assert config.option.markexpr == ""


def test_quick_does_not_even_import_a_folder_or_file_that_holds_no_quick_test():
    quick, whole = fake_config(quick=True), fake_config(quick=False)
    for path in (ROOT / "tests" / "site", ROOT / "tests" / "tools" / "test_public_api_fuzz.py"):
        assert conftest.pytest_ignore_collect(path, quick) and conftest.pytest_ignore_collect(path, whole) is None
    for path in (ROOT / "tests" / "core", ROOT / "tests" / "pretrained" / "test_tokenizer.py"):
        assert conftest.pytest_ignore_collect(path, quick) is None


def test_make_test_quick_runs_pytest_quick_on_the_tests():
    assert quick_arguments() == ["-p", "tests.startup", "--quick", "tests"]


@pytest.mark.slow
def test_the_quick_selection_holds_no_notebook_and_no_test_of_the_site_or_the_browser(tmp_path):
    """Collected as `make test-quick` collects, with the notebooks' folder added to what it is given."""
    (tmp_path / "selection_reporter.py").write_text(REPORTER)
    out = tmp_path / "selection.json"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path, "MHA_SELECTION_OUT": str(out)}
    collected = subprocess.run([sys.executable, "-m", "pytest", *quick_arguments(), "chapters", "--collect-only",
                                "-q", "-n", "0", "-p", "selection_reporter"], cwd=ROOT, env=environment,
                               capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-4000:] + collected.stderr[-4000:]
    selection = json.loads(out.read_text())
    assert len(selection) > 1000, len(selection)
    for nodeid, fixtures in selection:
        file = Path(nodeid.split("::")[0])
        assert file.suffix != ".ipynb" and not file.is_relative_to("tests/site"), nodeid
        assert not conftest.BROWSER_FIXTURES & set(fixtures), nodeid
