"""The seven attacks of tests/exercises/grading/attacks.py, graded as an instructor grades: through the real
``otter run -a autograder.zip`` (under the strongest confinement this machine offers) and ``grade_all``, then through
the plugin's own function under every confinement the machine offers. Each attack scores no more than a blank (zero:
every point depends on its breach), leaks no seed and no test file, leaves no process behind and changes no file;
a classmate's notebook and grade come through attack 6 intact.

The autograder is 1.1's as scripts/grading.py writes its tests and configuration, zipped without ``otter generate``,
with a shorter call limit (10 s) and exercise budget (30 s) than an autograder's, so that attack 7 costs seconds,
not minutes: its calls sleep 2.5 s, within the call limit, and fail the rule that a case's calls may take at most 20
times the book's solution and 2 s more.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from attacks import attack_notebook_one, attack_notebook_two, available_modes, left_behind, truncate_classmate
from conftest import load_script
from submissions import RIGHT, SECTION, notebook

import mha
from mha.exercises.grading import protected_folders
from mha.exercises.grading.confinement import MODE_VARIABLE
from mha.exercises.grading.otter_plugin import grade_test, limits_of
from mha.exercises.grading.sandbox import Sandbox
from mha.exercises.grading.submission import read_submission

grading = load_script("grading")
grade_all = load_script("grade_all")
PLUGIN = "mha.exercises.grading.otter_plugin.IsolatedGrading"
PACKAGE_PARENT = str(Path(mha.__file__).resolve().parents[1])
SLEEP = 2.5


MODES = available_modes()


def test_this_machine_can_grade_confined():
    assert MODES, "neither namespaces nor a user id of its own: grading here would be refused"


def autograder(folder: Path) -> tuple[Path, dict]:
    exercises = grading.exercises_of(json.loads(SECTION.read_text()))
    config = grading.otter_config(exercises)
    plugin = config["plugins"][0][PLUGIN]
    plugin |= {"seconds": 10, "exercise_seconds": 30, "memory_mb": 512}
    path = folder / "autograder.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("otter_config.json", json.dumps(config))
        for exercise in exercises:
            archive.writestr(f"tests/{exercise['label']}.py", grading.test_file(exercise, grading.points_of(exercise)))
    return path, plugin


def otter_run(zipped: Path, submission: Path, out: Path) -> tuple[dict, str]:
    """results.json of ``otter run`` on ``submission``, and its text as written."""
    environment = {key: value for key, value in os.environ.items() if key != MODE_VARIABLE}
    done = subprocess.run([str(Path(sys.executable).with_name("otter")), "run", "-a", str(zipped), "-o", str(out),
                           "--no-logo", str(submission)], capture_output=True, text=True, cwd=out, env=environment,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = (out / "results.json").read_text()
    return json.loads(text), text


def scores(results: dict) -> dict[str, float]:
    return {test["name"]: float(test["score"]) for test in results["tests"] if "max_score" in test}


def secrets_of(zipped: Path, plugin: dict) -> list[str]:
    """What no feedback may show: the hidden seeds, and every line of the test files."""
    with zipfile.ZipFile(zipped) as archive:
        lines = [line.strip() for name in archive.namelist() if name.startswith("tests/")
                 for line in archive.read(name).decode().splitlines() if len(line.strip()) >= 16]
    return [str(seed) for seed in plugin["seeds"].values()] + lines


def revealed(text: str) -> str:
    """``text`` with every payload attack 4 raised (``LEAK <base64>``) decoded beside it."""
    payloads = re.findall(r"LEAK ([A-Za-z0-9+/=]{4,})", text)
    return text + "".join(base64.b64decode(payload + "===").decode(errors="replace") for payload in payloads)


def leaked(text: str, zipped: Path, plugin: dict, mode: str) -> list[str]:
    """The secrets of this autograder that ``text`` shows, decoded: under ``namespaces`` its seeds and any line of
    its test files; under ``uid``, whatever else on the machine other users may read stays readable (other copies of
    1.1's test files, such as a build of the autograders), so only this autograder's own seeds are secret."""
    secrets = secrets_of(zipped, plugin) if mode == "namespaces" else [str(seed) for seed in plugin["seeds"].values()]
    shown = revealed(text)
    found = [secret for secret in secrets if secret in shown]
    if re.search(r"HIDDEN INPUT n=\d", shown):
        found.append("a hidden input")
    if mode == "namespaces" and re.search(r"LEAK [A-Za-z0-9+/]{4}", text):
        found.append("a file found from inside the namespace")
    return found


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_attacks_one_two_three_and_five_through_otter_run_score_zero_and_change_nothing(tmp_path):
    zipped, plugin = autograder(tmp_path)
    canary = tmp_path / "canary.txt"
    canary.write_text("the instructor's file\n")
    canary.chmod(0o666)  # even a file anyone may write is out of reach
    out = tmp_path / "out"
    out.mkdir()
    path = notebook(out, attack_notebook_one(PACKAGE_PARENT, str(canary), str(out / "results.json")))
    results, text = otter_run(zipped, path, out)
    assert scores(results) == {"ex-stable-softmax": 0, "ex-attention": 0, "ex-causal-mask": 0}, text
    assert json.loads((out / "results.json").read_text()) == results  # attack 3 did not rewrite it afterwards
    assert canary.read_text() == "the instructor's file\n"
    assert left_behind() == []
    assert leaked(text, zipped, plugin, MODES[0]) == []


def test_attacks_four_and_seven_through_otter_run_score_zero_and_leak_nothing(tmp_path):
    zipped, plugin = autograder(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    results, text = otter_run(zipped, notebook(out, attack_notebook_two(SLEEP)), out)
    got = scores(results)
    assert got["ex-stable-softmax"] == 0 and got["ex-attention"] == 0, text
    assert got["ex-causal-mask"] == 1  # the public case only: the function that raises a hidden input
    assert leaked(text, zipped, plugin, MODES[0]) == []
    assert "A hidden case (other inputs of the same kind) failed: it raised an exception" in text
    assert "where the grader allows" in text or "time budget" in text, text
    assert left_behind() == []


def test_attack_six_through_grade_all_leaves_the_classmates_notebook_and_grade_intact(tmp_path):
    zipped, _ = autograder(tmp_path)
    folder = tmp_path / "submissions"
    folder.mkdir()
    classmate = notebook(folder, RIGHT, name="zoe")
    before = sha256(classmate)
    notebook(folder, truncate_classmate(str(classmate)), name="adam")
    gradebook = tmp_path / "gradebook.csv"
    assert grade_all.main([str(folder), "--autograder", str(zipped), "--out", str(gradebook)]) == 0
    rows = gradebook.read_text().splitlines()[1:]
    points = {}
    for row in rows:
        student, _, got = row.split(",")[:3]
        points[student] = points.get(student, 0) + float(got)
    assert points == {"adam": 0, "zoe": 7}, rows
    assert sha256(classmate) == before


@pytest.mark.parametrize("mode", MODES)
def test_every_attack_scores_zero_under_every_confinement_this_machine_offers(mode, tmp_path, monkeypatch):
    monkeypatch.setenv(MODE_VARIABLE, mode)
    zipped, plugin = autograder(tmp_path)
    tests = tmp_path / "tests"
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(tmp_path)
    canary = tmp_path / "canary.txt"
    canary.write_text("the instructor's file\n")
    canary.chmod(0o666)
    results_file = tmp_path / "results.json"
    results_file.write_text("{}")
    one = read_submission(notebook(tmp_path, attack_notebook_one(PACKAGE_PARENT, str(canary), str(results_file)),
                                   name="one"))
    two = read_submission(notebook(tmp_path, attack_notebook_two(SLEEP), name="two"))
    cases = ["public", "hidden_seed_1", "hidden_seed_2"]
    said = []
    for submission in (one, two):
        with Sandbox(protected_folders(tests, tmp_path), limits_of(plugin)) as sandbox:  # one per submission
            graded_tests = {name: grade_test(submission, name, cases, plugin, tests, sandbox=sandbox)
                            for name in plugin["exercises"]}
        for name, graded in graded_tests.items():
            said += [result.message for result in graded]
            passed = [result.passed for result in graded]
            allowed = [True, False, False] if submission is two and name == "ex-causal-mask" else [False] * 3
            assert passed == allowed, (mode, name, [result.message for result in graded])
    assert canary.read_text() == "the instructor's file\n" and results_file.read_text() == "{}"
    assert left_behind() == []
    assert leaked("\n".join(said), zipped, plugin, mode) == []
