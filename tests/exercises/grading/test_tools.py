"""Real-model exercises: a check that declares ``tools`` lets its learner's function import and use those modules of
the book's package in the sandbox, from a private, read-only copy of only them and what they import
(mha.exercises.grading.tools), while every other exercise of the same submission keeps the package out of reach.

Fake checks, defined here and graded through ``grade_exercise`` in one sandbox per confinement mode, call the
learner's function with the pretrained encoder (which crosses the pipe as ``MiniLMEncoder.load()``, its
``__reduce_ex__``) and report what the function found; their learner's functions first disable the audit hook, as
attack 1 does, so that only the operating system's barrier stands.
"""

from __future__ import annotations

import copy
import os
import pickle
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from attacks import UNHOOK, available_modes

import mha
import mha.exercises.checking as checking
from mha.exercises.checking import CheckResult, answer_array, matches, run_check, uses_tools
from mha.exercises.grading import grade_exercise, protected_folders
from mha.exercises.grading.confinement import MODE_VARIABLE
from mha.exercises.grading.sandbox import Limits, Sandbox
from mha.exercises.grading.submission import problem_with, read_submission
from mha.exercises.grading.tools import closure, copy_tools
from mha.lab.checkpoints import load_checkpoint
from mha.pretrained.encoder import MiniLMEncoder

MODES = available_modes()
PACKAGE = Path(mha.__file__).resolve().parent
SENTENCE = "The cat sat on the mat because it was warm."
LAYER, HEAD = 2, 5
ENCODER_TOOLS = ("mha.pretrained.encoder", "mha.pretrained.overrides")
LAB_TOOLS = ("mha.lab.tasks", "mha.lab.tiny_model", "mha.lab.training")
CHECKPOINT = "induction_2layer_seed0"
NOT_COPIED = ("exercises", "analysis", "views", "book", "core/attention_numpy.py")


def check_plain_attention(function):  # no tools: the package stays out of reach
    encoder = MiniLMEncoder.load()
    expected = encoder.trace(SENTENCE).sentence().attention[LAYER, HEAD]
    return run_check(function, [("one sentence", (encoder, SENTENCE), {}, expected)],
                     lambda got, want: None if matches(answer_array(got, "the weights"), want, atol=1e-5)
                     else "wrong values", f"reads head {LAYER}.{HEAD}'s weights")


check_tool_attention = uses_tools(*ENCODER_TOOLS)(lambda function: check_plain_attention(function))
check_tool_attention.__name__ = "check_tool_attention"


@uses_tools(*ENCODER_TOOLS)
def check_tool_probe(function):
    """Passes, and says in its message what the learner's function found inside a real-model exercise."""
    return CheckResult(True, repr(function(MiniLMEncoder.load(), str(PACKAGE))))


@uses_tools("mha.lab.checkpoints", "mha.lab.tiny_model")
def check_stored_model(function):
    """The learner's function loads a stored model of the lab, from the data its tool folder holds."""
    expected = sum(value.sum().item() for value in load_checkpoint(CHECKPOINT)[0].state_dict().values())
    return run_check(function, [("a stored model", (CHECKPOINT,), {}, expected)],
                     lambda got, want: None if matches(got, want, atol=1e-3) else "wrong values", "loads the model")


def check_plain_probe(function):
    """Passes, and says what the learner's function found of the tool folder ``folder`` from a plain exercise."""
    return CheckResult(True, repr(function(check_plain_probe.folder)))


LEARNER = '''
import time
import numpy as np
from mha.pretrained.encoder import MiniLMEncoder
import mha.core.attention_numpy as attention_numpy


def head_weights(encoder, sentence):
    assert isinstance(encoder, MiniLMEncoder)
    return encoder.trace(sentence).sentence().attention[2, 5]


def uses_the_encoder_unasked(encoder, sentence):
    return MiniLMEncoder.load().trace(sentence).sentence().attention[2, 5]


def uses_attention_numpy(encoder, sentence):
    return attention_numpy.softmax(np.zeros(3))


def imports_attention_numpy(encoder, sentence):
    from mha.core.attention_numpy import softmax
    return softmax(np.zeros(3))
''' + UNHOOK + '''

def tries(action):
    try:
        action()
        return "done"
    except Exception as error:
        return type(error).__name__


def unhooked():
    return tries(lambda: open("/dev/null", "w").close()) == "done"  # a write the audit hook refuses


def probe_tools(encoder, package):
    spent = time.process_time()  # the work this forked worker did before its call: no import of torch or mha
    unhook()
    import importlib, os, sys
    tools = os.path.dirname(os.path.dirname(sys.modules["mha"].__file__))
    return {"loaded": encoder is MiniLMEncoder.load(), "spent": spent, "tools": tools, "unhooked": unhooked(),
            "encoder_file": sys.modules["mha.pretrained.encoder"].__file__,
            "read_checks": tries(lambda: open(package + "/exercises/mechanism.py").read()),
            "read_copied_checks": tries(lambda: open(tools + "/mha/exercises/mechanism.py").read()),
            "read_reference": tries(lambda: open(package + "/core/attention_numpy.py").read()),
            "list_analysis": tries(lambda: os.listdir(package + "/analysis")),
            "list_package": tries(lambda: os.listdir(package)),
            "import_reference": tries(lambda: importlib.import_module("mha.core.attention_numpy")),
            "import_analysis": tries(lambda: importlib.import_module("mha.analysis.statistics")),
            "import_checks": tries(lambda: importlib.import_module("mha.exercises.mechanism"))}


def stored_model(name):
    from mha.lab.checkpoints import load_checkpoint
    return sum(value.sum().item() for value in load_checkpoint(name)[0].state_dict().values())


def probe_plain(folder):
    unhook()
    import os
    return {"unhooked": unhooked(), "list_tools": tries(lambda: os.listdir(folder)),
            "list_copy": tries(lambda: os.listdir(folder + "/mha")),
            "read_copy": tries(lambda: open(folder + "/mha/pretrained/encoder.py").read())}
'''


def learner_notebook() -> dict:
    return {"cells": [{"cell_type": "code", "source": LEARNER, "metadata": {}, "outputs": []}], "metadata": {},
            "nbformat": 4, "nbformat_minor": 5}


def cpu_of_importing_the_encoder() -> float:
    """The CPU time a fresh Python spends importing torch and the encoder's module."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import torch, mha.pretrained.encoder"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def test_the_closures_hold_only_what_the_tools_import():
    encoder = {name: path.relative_to(PACKAGE.parent).as_posix() if path.is_relative_to(PACKAGE.parent) else name
               for name, path in closure(ENCODER_TOOLS).items()}
    assert sorted(encoder) == ["mha", "mha.core", "mha.core.argument_checks", "mha.core.attention", "mha.core.masks",
                               "mha.core.validation",
                               "mha.data", "mha.data_files", "mha.pretrained", "mha.pretrained.encoder",
                               "mha.pretrained.model_files", "mha.pretrained.overrides", "mha.pretrained.tokenizer",
                               "mha.pretrained.traces"]
    lab = closure(LAB_TOOLS)
    assert sorted(lab) == ["mha", "mha.core", "mha.core.argument_checks", "mha.core.attention", "mha.core.masks",
                           "mha.core.validation",
                           "mha.data", "mha.data_files", "mha.lab", "mha.lab.tasks", "mha.lab.tiny_model",
                           "mha.lab.training"]
    for found in (closure(ENCODER_TOOLS), lab):
        assert not [path for path in found.values() for part in NOT_COPIED if f"/mha/{part}" in path.as_posix()]
    with pytest.raises(ValueError, match="never lets a submission read"):
        closure(("mha.exercises.mechanism",))
    with pytest.raises(ValueError, match="not a module"):
        closure(("mha.pretrained.no_such_module",))


def test_a_tool_folder_is_a_copy_only_its_group_reads(tmp_path):
    copy_tools(ENCODER_TOOLS, tmp_path, None)
    files = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*.py"))
    assert "mha/pretrained/encoder.py" in files and "mha/data/__init__.py" in files
    assert not [file for file in files for part in NOT_COPIED if file.startswith(f"mha/{part}")]
    assert all(path.stat().st_mode & 0o077 == 0 for path in tmp_path.rglob("*"))
    lab = tmp_path / "lab"
    lab.mkdir()
    copy_tools(("mha.lab.checkpoints",), lab, None)  # the stored models it reads come along, and nothing else
    assert (lab / "mha/data/lab" / f"{CHECKPOINT}.safetensors").is_file()
    assert sorted(path.name for path in (lab / "mha/data").iterdir()) == ["SHA256SUMS", "__init__.py", "lab"]
    if os.geteuid() == 0:
        grouped = tmp_path / "grouped"
        grouped.mkdir()
        copy_tools(LAB_TOOLS, grouped, 212_345)
        for path in [grouped, *grouped.rglob("*")]:
            status = path.stat()
            assert (status.st_uid, status.st_gid, status.st_mode & 0o777) == \
                (0, 212_345, 0o750 if path.is_dir() else 0o640)


def test_the_loaded_encoder_pickles_as_a_call_to_load_and_copies_still_copy():
    encoder = MiniLMEncoder.load()
    assert len(pickle.dumps(encoder)) < 1000 and pickle.loads(pickle.dumps(encoder)) is encoder
    copied = copy.deepcopy(encoder)
    assert copied is not encoder and torch.equal(copied.word_embeddings, encoder.word_embeddings)
    with torch.no_grad():
        copied.word_embeddings.zero_()
    assert encoder.word_embeddings.abs().sum() > 0  # the shared encoder is untouched
    assert copy.copy(encoder) is not encoder
    random = encoder.with_random_weights(seed=3)  # anything but load()'s own encoder pickles with its weights
    again = pickle.loads(pickle.dumps(random))
    assert again is not encoder and torch.equal(again.layers[0].W_in, random.layers[0].W_in)
    assert not torch.equal(again.layers[0].W_in, encoder.layers[0].W_in)


def test_only_the_declared_modules_names_are_allowed_and_their_imports_run():
    submission = read_submission(learner_notebook())
    tools = ENCODER_TOOLS
    assert problem_with(submission, "head_weights", "check", ["head_weights"], tools) is None
    assert "MiniLMEncoder" in problem_with(submission, "head_weights", "check", ["head_weights"])
    for name in ("uses_attention_numpy", "imports_attention_numpy"):
        said = problem_with(submission, name, "check", [name], tools)
        assert "attention_numpy" in said and "from the book's own package" in said and "scores 0" in said
    kept = [line for _, source, _ in submission.setup_for(tools) for line in source.splitlines() if "import" in line]
    assert "from mha.pretrained.encoder import MiniLMEncoder" in kept
    assert "import mha.core.attention_numpy as attention_numpy" not in kept
    plain = [line for _, source, _ in submission.setup_for(()) for line in source.splitlines()]
    assert not [line for line in plain if line.startswith(("import mha", "from mha"))]
    assert "MiniLMEncoder" in [name for _, _, names in submission.setup_for(tools) for name in names]


@pytest.mark.parametrize("mode", MODES)
def test_a_real_model_exercise_uses_its_tools_and_nothing_else_under_every_confinement(mode, tmp_path, monkeypatch):
    monkeypatch.setenv(MODE_VARIABLE, mode)
    for check in (check_tool_attention, check_tool_probe, check_plain_attention, check_plain_probe,
                  check_stored_model):
        monkeypatch.setattr(checking, check.__name__, check, raising=False)
    submission = read_submission(learner_notebook())
    importing = cpu_of_importing_the_encoder()

    def grade(check: str, function: str) -> CheckResult:
        [result] = grade_exercise(submission, "checking", check, function, protected=[str(tmp_path)],
                                  sandbox=sandbox)
        return result

    with Sandbox(protected_folders(tmp_path), Limits(seconds=60)) as sandbox:
        passed = grade("check_tool_attention", "head_weights")
        assert passed.passed, passed.message  # (a)
        stored = grade("check_stored_model", "stored_model")  # the lab's tools, with the stored models they read
        assert stored.passed, stored.message
        for function in ("uses_attention_numpy", "imports_attention_numpy"):  # a tool exercise: its tools alone
            refused = grade("check_tool_attention", function)
            assert not refused.passed and "from the book's own package" in refused.message, refused.message
        for function in ("head_weights", "uses_the_encoder_unasked", "imports_attention_numpy"):  # (b)
            refused = grade("check_plain_attention", function)
            assert not refused.passed and "from the book's own package" in refused.message, refused.message
        probe = grade("check_tool_probe", "probe_tools")
        found = eval(probe.message, {})  # noqa: S307 - the check's own repr of plain data
        folder = sandbox.confinement_for(tuple(sorted(ENCODER_TOOLS))).setup["tools"]
        assert found["tools"] == folder and found["encoder_file"] == f"{folder}/mha/pretrained/encoder.py"
        assert not Path(folder).is_relative_to(PACKAGE)
        assert found["unhooked"] is True  # the operating system alone stands in the way
        for key in ("read_checks", "read_copied_checks", "read_reference", "list_analysis", "list_package",
                    "import_reference", "import_analysis", "import_checks"):  # (c)
            assert found[key] != "done", (mode, key, found)
        assert found["loaded"] is True  # (e): the encoder crossed as MiniLMEncoder.load(), loaded there...
        assert found["spent"] < 0.25 * importing, (found["spent"], importing)  # ... cached: the worker imported
        # and loaded nothing (its CPU time since the fork, before the call, is a fraction of importing torch alone)
        check_plain_probe.folder = folder
        plain = eval(grade("check_plain_probe", "probe_plain").message, {})  # noqa: S307
        assert plain.pop("unhooked") is True and len(plain) == 3 and "done" not in plain.values(), (mode, plain)  # (d)
    assert not Path(folder).exists()  # removed with the sandbox
