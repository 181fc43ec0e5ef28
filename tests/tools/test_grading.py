"""The autograder (scripts/grading.py, mha.exercises.grading): one otter test file per "Write and check"
exercise (predictions, explanations and investigations are not graded automatically), with the
check's own feedback, and the answer key as a submission. Grading real submissions with ``otter run`` takes a
minute, so ``.ci/run`` does it after the main suite: ``python -m scripts.grading --check <notebook>`` gives the key
full marks, the untouched student edition zero, and a typical wrong answer partial credit with its check's feedback.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import load_script

from mha.exercises.grading import grade

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


grading = load_script("grading")


def stable_softmax(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)


def naive_softmax(scores):
    return np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)


def test_grade_passes_a_right_answer_and_fails_a_wrong_one_with_the_checks_feedback():
    assert grade({"my_softmax": stable_softmax}, "mechanism", "check_softmax", "my_softmax", seed=2).startswith("✓")
    with pytest.raises(AssertionError, match="exp overflows unless you shift first"):
        grade({"my_softmax": naive_softmax}, "mechanism", "check_softmax", "my_softmax")
    with pytest.raises(AssertionError, match="my_softmax is not defined"):
        grade({}, "mechanism", "check_softmax", "my_softmax")

    def stub(scores):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="Not attempted yet"):
        grade({"my_softmax": stub}, "mechanism", "check_softmax", "my_softmax")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_gets_a_test_file_with_points_and_hidden_variants(path, tmp_path):
    book = json.loads(path.read_text())
    exercises = grading.exercises_of(book)
    _, solutions = grading.student_edition.split_notebook(book)
    checked = [e.label for e in grading.student_edition.exercises(book) if e.kind == "check"]
    assert [e["label"] for e in exercises] == checked == [s.label for s in solutions if s.label in checked]
    assert len(checked) >= 3, f"{path.name}: too few graded exercises ({checked})"
    for exercise in exercises:
        worth = grading.points_of(exercise)
        assert worth == {1: 2, 2: 3, 3: 5}[exercise["difficulty"]], exercise  # ★ 2, ★★ 3, ★★★ 5 by default
        text = grading.test_file(exercise, worth)
        namespace = {}
        exec(compile(text, exercise["label"], "exec"), namespace)  # a valid otter test file
        assert namespace["points"] == worth and namespace["name"] == exercise["label"]
        seeded = grading.takes_seed_of(exercise)
        assert "public" in namespace and all((f"hidden_seed_{seed}" in namespace) == seeded
                                             for seed in grading.HIDDEN_SEEDS)
        points = [float(value) for value in re.findall(r"@test_case\(points=([0-9.]+)", text)]
        assert sum(points) == pytest.approx(worth), text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_key_submission_answers_every_stub_with_the_books_solution(path):
    book = json.loads(path.read_text())
    key = grading.key_submission(book)
    code = "\n".join("".join(c["source"]) for c in key["cells"] if c["cell_type"] == "code")
    assert "NotImplementedError" not in code
    assert not re.search(r"\bsolution_\w+", code), "a solution_ name is left in the key"
    for exercise in grading.exercises_of(book):
        assert re.search(rf"^def {exercise['function']}\(", code, re.M), exercise
        assert f"{exercise['check']}({exercise['function']}" in code


def test_the_points_scheme_is_read_from_the_command_line_and_refuses_what_it_cannot_use():
    assert grading.parse_points("1,2,4") == {1: 1.0, 2: 2.0, 3: 4.0}
    for wrong in ("2,3", "2,x,5", "2,0,5"):
        with pytest.raises(Exception, match="three positive numbers"):
            grading.parse_points(wrong)
    with pytest.raises(ValueError, match="give the exercise a header line"):
        grading.points_of({"label": "ex-unrated", "difficulty": None})


@pytest.mark.slow
def test_the_autograder_zip_carries_the_package_and_pins_what_grading_installs(tmp_path):
    """What Gradescope's image installs from the zip (``.ci/run``'s ``grading.py --clean-check`` installs it)."""
    from scripts.book_release import TORCH_CPU_INDEX, package_dependencies, pins, version

    wheel = grading.build_package(tmp_path)
    folder = grading.write_autograder(ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb",
                                      tmp_path, wheel)
    zipped = folder / "autograder.zip"
    assert zipped.stat().st_size < 8 * 2**20, "the zip should carry the package's wheel, not torch's"
    with zipfile.ZipFile(zipped) as archive:
        names = archive.namelist()
        environment = yaml.safe_load(archive.read("environment.yml"))
        inner = zipfile.ZipFile(io.BytesIO(archive.read(f"files/{wheel.name}")))
    assert f"python={grading.PYTHON_VERSION}" in environment["dependencies"]
    listed = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    # every line is hashed (pip's hash-checking mode), otter's own unhashed line included: it is replaced by ours
    assert all(re.search(r" --hash=sha256:[0-9a-f]{64}", line) for line in listed), listed
    assert not [line for line in listed if "index-url" in line or line.startswith("otter-grader[")], listed
    assert listed[0].startswith(f"torch @ {TORCH_CPU_INDEX}/torch-2.13.0%2Bcpu-")
    for name in [*package_dependencies(), "otter-grader"]:
        assert name == "torch" or any(line.startswith(pins()[name] + " ") for line in listed), name
    wheel_sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()  # the wheel the zip carries, hashed by the oracle
    assert listed[-1] == f"/autograder/source/files/{wheel.name} --hash=sha256:{wheel_sha256}"
    assert f"files/{wheel.name}" in names
    assert not [name for name in names if "torch" in name.lower()]
    inside = inner.namelist()
    for module in ("grading/otter_plugin", "grading/sandbox_worker", "grading/submission", "mechanism"):
        assert f"mha/exercises/{module}.py" in inside, module
    assert f"mha-{version()}.dist-info/METADATA" in inside
    source = tmp_path / "unpacked"
    python, requirements = grading.zip_requirements(zipped, source, torch_index="")
    assert python == grading.PYTHON_VERSION and not [r for r in requirements if TORCH_CPU_INDEX in r]
    assert requirements[0] == "torch==2.13.0+cpu " + listed[0].split(" ", 3)[3]  # the same hash, wherever pip looks
    assert requirements[-1] == f"{source / 'files' / wheel.name} --hash=sha256:{wheel_sha256}"
    assert Path(requirements[-1].split()[0]).is_file()
    # the outline of the exercises marked by hand lies beside the zip, for the instructor, and not in it
    assert (folder / "manual_questions.md").read_text().startswith("# Marked by hand")
    assert not [name for name in names if "manual" in name]
    # a week's zip installs what the section's does, so --clean-check-week grades weeks in one environment
    week = grading.write_week(grading.course.read_syllabus()[0], tmp_path, wheel)
    assert grading.what_it_installs(week / "autograder.zip") == grading.what_it_installs(zipped)


def test_grading_installs_every_file_by_its_hash_and_torch_from_the_cpu_index_alone(tmp_path):
    """What the zip's environment installs, read by pip's own requirements parser: every requirement hashed (so pip
    runs in hash-checking mode, as `make` does with requirements.lock), no index option (--extra-index-url would look
    torch's name up in two indexes), torch as the lock's CPU wheel at its address on PyTorch's CPU index, and the
    package's wheel with the sha256 of its bytes (hashlib, the oracle)."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import install_req_from_parsed_requirement
    from pip._internal.req.req_file import parse_requirements

    from scripts.book_release import TORCH_CPU_INDEX, locked

    wheel = tmp_path / "files" / "mha-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"a stand-in wheel")
    text = grading.grading_requirements(wheel).replace(grading.GRADESCOPE_SOURCE, str(tmp_path))
    assert "index-url" not in text and "find-links" not in text
    (tmp_path / "requirements.txt").write_text(text)
    requirements = [install_req_from_parsed_requirement(parsed) for parsed in
                    parse_requirements(str(tmp_path / "requirements.txt"), session=PipSession())]
    assert len(requirements) > 100 and not [str(r.req) for r in requirements if not r.hash_options]
    (torch,) = [r for r in requirements if r.name == "torch"]
    assert torch.link.url.startswith(f"{TORCH_CPU_INDEX}/torch-2.13.0%2Bcpu-cp311-cp311-manylinux")
    assert torch.hash_options == {"sha256": re.findall(r"--hash=sha256:([0-9a-f]{64})", locked()["torch"][0])}
    assert requirements[-1].hash_options == {"sha256": [hashlib.sha256(b"a stand-in wheel").hexdigest()]}
    assert {r.name for r in requirements} >= {"otter-grader", "ipykernel", "numpy", "tokenizers"}


def test_every_weekly_zip_is_checked_with_a_typical_wrong_answer():
    weeks = grading.course.read_syllabus()
    first = grading.course.week_book(weeks[0])
    assert grading.wrong_answer("weeks/week_1", first) == grading.WRONG_ANSWERS["1_mechanism/1_attention_from_scratch"]
    for each in weeks[1:]:
        book = grading.course.week_book(each)
        function, code = grading.wrong_answer(f"weeks/{each.name}", book)
        assert function == grading.exercises_of(book)[0]["function"]
        namespace: dict = {}
        exec(code, namespace)  # it defines the function, which computes and returns nothing
        assert namespace[function](1, 2, extra=3) is None
