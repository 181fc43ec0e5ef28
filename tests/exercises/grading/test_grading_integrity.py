"""Grading that a submission cannot game (mha.exercises.grading.grade_exercise, the path the otter plugin takes):
adversarial 1.1 submissions, each graded as a notebook file, and the outcome each must get. The submissions import
numpy only, so each isolated process starts in a fraction of a second. The time limit is cut to 1.5 s only for a
submission that runs for ever, which reaches any limit however busy the machine; what it saves is shown by the calls
the grader makes (a spy), not by a clock.
``scripts/grading.py --check`` grades the same kinds of submission end to end with ``otter run`` in ``.ci/run``.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from conftest import load_script
from submissions import EXERCISES, RIGHT, SECTION, notebook

import mha.exercises.grading
import mha.exercises.mechanism
from mha.exercises.grading import grade_exercise
from mha.exercises.grading.confinement import MODE_VARIABLE
from mha.exercises.grading.sandbox import IsolatedFunction, Limits

ROOT = Path(__file__).resolve().parents[3]
LIMITS = Limits(seconds=20, memory_bytes=512 * 1024**2)  # ample for a right answer on a busy machine
HANG_LIMITS = Limits(seconds=1.5, memory_bytes=512 * 1024**2)  # limit under test: met only by loops that never end


def grade(path, function, **options):
    """(points out of 3, messages) of one exercise: the public case and two hidden seeds, 1 point each."""
    results = grade_exercise(path, "mechanism", EXERCISES[function], function, seeds=(None, 1, 2),
                             notebook_functions=list(EXERCISES), limits=options.pop("limits", LIMITS), **options)
    return sum(result.passed for result in results), [result.message for result in results]


def calls_sent(monkeypatch) -> list[str]:
    """A spy on the grader's stand-in for a submitted function: the function's name at each call sent to its
    process, appended to the list returned."""
    made, call = [], IsolatedFunction.__call__

    def counting_call(self, *args, **kwargs):
        made.append(self.__name__)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(IsolatedFunction, "__call__", counting_call)
    return made


def test_a_right_submission_gets_every_point_and_the_reference_or_a_copy_of_it_gets_none(tmp_path):
    path = notebook(tmp_path, RIGHT)
    assert [grade(path, f)[0] for f in EXERCISES] == [3, 3, 3]
    calls = notebook(tmp_path, RIGHT | {"my_softmax": "def my_softmax(scores):\n"
                                                      "    return attention_numpy.softmax(scores)\n"})
    points, said = grade(calls, "my_softmax")
    assert points == 0 and "uses attention_numpy" in said[0] and "book's own package" in said[0]
    points, said = grade(calls, "my_attention")  # through my_softmax, which it calls
    assert points == 0 and "through my_softmax" in said[0]
    is_it = notebook(tmp_path, RIGHT | {"my_softmax": "my_softmax = attention_numpy.softmax\n"})
    points, said = grade(is_it, "my_softmax")
    assert points == 0 and "the book's own implementation" in said[0]
    imported = notebook(
        tmp_path, RIGHT | {"my_softmax": "from mha.core.attention_numpy import softmax as my_softmax\n"}
    )
    assert grade(imported, "my_softmax") == (0, ["✗ my_softmax is mha.core.attention_numpy.softmax, the book's own "
                                                 "implementation, which this exercise asks you to write yourself: it "
                                                 "scores 0. Define it with `def my_softmax(...)`."] * 3)
    hidden_import = notebook(
        tmp_path,
        RIGHT
        | {
            "my_softmax": "def my_softmax(scores):\n    return __import__('mha').core.attention_numpy.softmax(scores)\n"
        },
    )
    points, said = grade(hidden_import, "my_softmax")
    assert points == 0 and "without the book's package" in said[0]


def test_reading_the_caller_frame_or_an_always_equal_answer_or_printing_gains_nothing(tmp_path):
    walker = ("def my_softmax(scores):\n    import sys\n    frame = sys._getframe(1)\n    while frame is not None:\n"
              "        for name in ('expected', 'want'):\n            if name in frame.f_locals:\n"
              "                return frame.f_locals[name]\n        frame = frame.f_back\n    return scores\n")
    always = ("class Equal:\n    def __eq__(self, other):\n        return True\n    __array_priority__ = 1000\n\n"
              "def my_causal_mask(n):\n    return Equal()\n")
    printing = ("def my_attention(q, k, v, mask=None):\n    print(q @ k.T, v)\n")
    path = notebook(tmp_path, RIGHT | {"my_softmax": walker, "my_causal_mask": always, "my_attention": printing})
    points, said = grade(path, "my_softmax")
    assert points == 0 and "wrong values" in said[0]
    points, said = grade(path, "my_causal_mask")
    assert points == 0 and "the answer is an Equal, which the grader does not read" in said[0]
    points, said = grade(path, "my_attention")
    assert points == 0 and "printed" in said[0] and "return" in said[0]


def test_a_hang_a_crash_or_a_memory_bomb_costs_only_its_own_exercise(tmp_path, monkeypatch):
    hang = "def my_causal_mask(n):\n    while True:\n        pass\n"
    crash = "def my_attention(q, k, v, mask=None):\n    import os\n    os._exit(3)\n"
    bomb = "def my_softmax(scores):\n    hoard = []\n    while True:\n        hoard.append(np.ones(10**7))\n"
    path = notebook(tmp_path, RIGHT | {"my_causal_mask": hang, "my_attention": crash})
    sent = calls_sent(monkeypatch)
    points, said = grade(path, "my_causal_mask", limits=HANG_LIMITS)
    assert points == 0 and said == ["✗ my_causal_mask did not return within 1.5 s on its call number 1. Look for a "
                                    "loop that never ends, or work that grows too fast with the input's size."] * 3
    assert sent == ["my_causal_mask"], "a hang must be stopped at the limit once for all its cases, not once each"
    points, said = grade(path, "my_attention")
    assert points == 0 and "died (exit code 3)" in said[0]
    assert grade(path, "my_softmax")[0] == 3  # the others are graded
    points, said = grade(notebook(tmp_path, RIGHT | {"my_softmax": bomb}, name="bomb"), "my_softmax")
    assert points == 0 and ("ran out of memory" in said[0] or "died" in said[0]), said[0]  # the memory limit's


def test_patching_the_grader_or_reading_its_files_changes_nothing(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    secret = "SECRET_TEST_SOURCE = 'hidden_seed_1 expects these numbers'"
    (tests / "ex-stable-softmax.py").write_text(secret + "\n")
    reader = ("def my_softmax(scores):\n    import glob\n    found = []\n"
              f"    for path in [{str(tests / 'ex-stable-softmax.py')!r}, {inspect.getfile(mha.exercises.mechanism)!r}]"
              f" + glob.glob({str(tests)!r} + '/*'):\n        try:\n            found.append(open(path).read())\n"
              "        except Exception as error:\n            found.append(str(error))\n"
              "    raise RuntimeError(' '.join(found))\n")
    patch = ("import mha.exercises.grading, mha.exercises.checking\nmha.exercises.grading.grade_exercise = "
             "lambda *a, **k: []\nmha.exercises.checking.run_check = lambda *a, **k: True\n"
             "open(__file__ if '__file__' in dir() else 'patched.txt', 'w').write('x')\n")
    path = notebook(tmp_path, RIGHT | {"my_softmax": reader}, extra=(patch,))
    points, said = grade(path, "my_softmax", protected=[str(tests)])
    assert points == 0 and "not readable from a submission" in said[0]
    sources = [secret, inspect.getsource(mha.exercises.mechanism), inspect.getsource(mha.exercises.grading)]
    quoted = [line.strip() for text in sources for line in text.splitlines() if len(line.strip()) >= 16]
    assert not [line for line in quoted if any(line in message for message in said)]
    blank = load_script("grading").student_edition.split_notebook(json.loads(SECTION.read_text()))[0]
    blank["cells"].append({"cell_type": "code", "source": patch, "metadata": {}, "outputs": []})
    (tmp_path / "blank.ipynb").write_text(json.dumps(blank))
    graded = [grade(tmp_path / "blank.ipynb", f, limits=Limits()) for f in EXERCISES]
    assert [points for points, _ in graded] == [0, 0, 0]
    said = [message for _, messages in graded for message in messages]
    assert all(message.startswith("✗ Not attempted yet") for message in said), said  # the stubs' answer, no limit's
    assert mha.exercises.grading.grade_exercise is grade_exercise  # nothing ran here


def test_each_function_is_graded_in_a_fresh_process_that_the_one_before_could_not_change(tmp_path):
    patcher = "def my_softmax(scores):\n    np.ones = np.zeros\n" + RIGHT["my_softmax"].split(":\n", 1)[1]
    path = notebook(tmp_path, RIGHT | {"my_softmax": patcher})
    assert grade(path, "my_softmax")[0] == 3
    assert grade(path, "my_causal_mask")[0] == 3  # np.ones is numpy's own again
    patched_here = "def my_causal_mask(n):\n    np.ones = np.zeros\n    return np.tril(np.ones((n, n), dtype=bool))\n"
    assert grade(notebook(tmp_path, RIGHT | {"my_causal_mask": patched_here}), "my_causal_mask")[0] == 0  # the control


@pytest.mark.parametrize("answers, expected", [
    ({"my_softmax": "def my_softmax(scores)\n    return scores\n"},
     "✗ Your cell has a syntax error at line 1 (`def my_softmax(scores)`): expected ':'. Python could not run the "
     "cell that defines my_softmax"),
    ({"my_softmax": "def my_soft_max(scores):\n    return scores\n"},
     "✗ my_softmax is not defined: the cell that calls check_softmax defines my_soft_max instead"),
])
def test_a_syntax_error_or_a_renamed_function_says_so_and_costs_only_its_exercise(tmp_path, answers, expected):
    path = notebook(tmp_path, RIGHT | answers)
    points, said = grade(path, "my_softmax")
    assert points == 0 and said[0].startswith(expected), said[0]
    assert grade(path, "my_causal_mask")[0] == 3


def test_a_name_the_grader_does_not_define_says_why_and_costs_only_its_exercise(tmp_path):
    dropped = {"my_softmax": "def pick():\n    return np.max\n\nSHIFT = pick()\n\ndef my_softmax(scores):\n"
                             "    e = np.exp(scores - SHIFT(scores, axis=-1, keepdims=True))\n"
                             "    return e / e.sum(axis=-1, keepdims=True)\n"}
    points, said = grade(notebook(tmp_path, RIGHT | dropped, name="dropped"), "my_softmax")
    assert points == 0 and said[0].startswith("✗ `SHIFT` is not defined where the grader runs my_softmax"), said[0]
    assert "`SHIFT = pick()`, a line the grader does not run" in said[0] and "inside your function" in said[0]
    broken_helper = ("def shift(scores)\n    return scores - scores.max(axis=-1, keepdims=True)\n",)
    uses_helper = {"my_softmax": "def my_softmax(scores):\n    e = np.exp(shift(scores))\n"
                                 "    return e / e.sum(axis=-1, keepdims=True)\n"}
    path = notebook(tmp_path, RIGHT | uses_helper, extra=broken_helper, name="broken_helper")
    points, said = grade(path, "my_softmax")
    assert points == 0 and "`shift` is not defined" in said[0], said[0]
    assert "syntax error at line 1 (expected ':')" in said[0] and "line 2 of your cell" in said[0]
    default = {"my_softmax": "AXIS = print(-1)\n\ndef my_softmax(scores, axis=AXIS):\n    return scores\n"}
    points, said = grade(notebook(tmp_path, RIGHT | default, name="default"), "my_softmax")
    assert points == 0 and said[0].startswith("✗ my_softmax could not be defined: NameError"), said[0]
    assert "`AXIS`: your notebook sets it with `AXIS = print(-1)`, a line the grader does not run" in said[0]
    typo = {"my_softmax": "def my_softmax(scores):\n    return scores - socres.max()\n"}
    points, said = grade(notebook(tmp_path, RIGHT | typo, name="typo"), "my_softmax")
    assert points == 0 and said[0].startswith("✗ `socres` is not defined: run the cell that defines it"), said[0]
    assert grade(path, "my_causal_mask")[0] == 3


def test_a_file_that_is_not_a_notebook_or_another_sections_notebook_gets_a_clear_message(tmp_path):
    text = tmp_path / "answers.py"
    text.write_text(RIGHT["my_softmax"])
    assert "not a Jupyter notebook" in grade(text, "my_softmax")[1][0]
    other = tmp_path / "other.ipynb"
    other.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "def my_split_heads(x, n):\n    return x\n",
                                            "metadata": {}, "outputs": []}], "metadata": {}}))
    assert "is it the submission for another section?" in grade(other, "my_softmax")[1][0]


def test_the_autograders_own_folder_with_its_hidden_seeds_is_not_readable_through_the_plugin(tmp_path, monkeypatch):
    from mha.exercises.grading.otter_plugin import IsolatedGrading, grade_test
    from mha.exercises.grading.submission import read_submission

    source, graded_in = tmp_path / "autograder" / "source", tmp_path / "autograder" / "submission"
    source.mkdir(parents=True)
    (graded_in / "tests").mkdir(parents=True)
    (source / "otter_config.json").write_text('{"seeds": {"hidden_seed_1": 987654321}}')
    reader = f"def my_softmax(scores):\n    raise RuntimeError(open({str(source / 'otter_config.json')!r}).read())\n"
    path = notebook(graded_in, RIGHT | {"my_softmax": reader})
    plugin = IsolatedGrading(str(path), {}, {})
    assert plugin._source() == [source.resolve()]
    config = {"exercises": {"ex-stable-softmax": {"module": "mechanism", "check": "check_softmax",
                                                  "function": "my_softmax"}}, "seconds": 20, "memory_mb": 512}
    submission = read_submission(path)
    confined = grade_test(submission, "ex-stable-softmax", ["public"], config, graded_in / "tests")
    assert "987654321" not in confined[0].message and "No such file" in confined[0].message  # not there at all
    monkeypatch.setenv(MODE_VARIABLE, "none")  # only the audit hook, as where no isolation is available
    with pytest.warns(UserWarning, match="grading without isolation"):
        unprotected = grade_test(submission, "ex-stable-softmax", ["public"], config, graded_in / "tests")
    assert "987654321" in unprotected[0].message  # the control: without the plugin's folder, the read works
    with pytest.warns(UserWarning, match="grading without isolation"):
        protected = grade_test(submission, "ex-stable-softmax", ["public"], config, graded_in / "tests",
                               also_protected=plugin._source())
    assert not protected[0].passed and "987654321" not in protected[0].message
    assert "not readable from a submission" in protected[0].message, protected[0].message


def test_a_right_answer_that_imports_every_allowed_module_gets_every_point(tmp_path):
    from importlib.util import find_spec

    from mha.exercises.grading.submission import ALLOWED_MODULES

    installed = [module for module in ALLOWED_MODULES if find_spec(module) is not None]
    assert {"numpy", "math", "copy", "time", "re", "random", "operator", "functools"} <= set(installed)
    imports = "".join(f"import {module}\n" for module in installed)
    uses = "def my_softmax(scores):\n    scores = copy.deepcopy(scores)\n    time.monotonic()\n" + \
        RIGHT["my_softmax"].split(":\n", 1)[1]
    path = notebook(tmp_path, RIGHT | {"my_softmax": imports + "\n" + uses})
    assert [grade(path, function)[0] for function in EXERCISES] == [3, 3, 3]


def test_constants_computed_from_the_allowed_modules_are_kept_and_calls_of_the_notebooks_own_code_are_not(tmp_path):
    from mha.exercises.grading.submission import read_submission

    constants = ("INF = float('inf')\nSHIFT = np.max\nAXES = tuple(range(-1, 0))\nSCALE = 1 / np.sqrt(4.0)\n"
                 "def my_softmax(scores, axis=AXES[0]):\n"
                 "    e = np.exp(scores - SHIFT(scores, axis=axis, keepdims=True))\n    assert INF > SCALE\n"
                 "    return e / e.sum(axis=axis, keepdims=True)\n")
    dropped = ("X = np.ones((2, 3))\nY = my_softmax(X)\nZ = open('/etc/hostname')\nW = __import__('os')\n"
               "V = np.__name__\n")
    failing_first = "WEIGHTS = np.load('weights.npy')  # a file the grader does not have\n\n" + constants
    path = notebook(tmp_path, RIGHT | {"my_softmax": failing_first}, extra=(dropped,))
    assert grade(path, "my_softmax")[0] == 3  # the failing constant costs only itself
    submission = read_submission(path)
    assert {"INF", "SHIFT", "AXES", "SCALE", "X"} <= submission.defined
    assert {"Y", "Z", "W", "V"} <= set(submission.assigned) and not {"Y", "Z", "W", "V"} & submission.defined
