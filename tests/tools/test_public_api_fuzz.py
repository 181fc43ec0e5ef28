"""The wide fuzz: every public callable of the package called with bad values (``scripts/fuzz_public_api.py``).

Every call puts one kind of bad value in one parameter (each in turn, optional ones by keyword) with plausible values
in the others. The whole fuzz is a step of ``.ci/run`` (``python -m scripts.fuzz_public_api --ratchet``); here a
small, fixed, seeded sample of the same calls runs, in one child process under an address-space cap with a limit of
CPU time per call (which a busy machine does not bring nearer). No call may hang or exhaust memory, and the calls
that end in a raw traceback (an exception from inside numpy, torch or Python rather than the package's own message)
may only become fewer: their counts, of the sample and of the whole fuzz, are held in ``tests/fuzz_ratchet.json``.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import fuzz_public_api

ROOT = Path(__file__).resolve().parents[2]
RATCHET = fuzz_public_api.RATCHET


@pytest.fixture(scope="module")
def fuzz_sample() -> dict:
    ratchet = json.loads(RATCHET.read_text())["suite_sample"]
    # each call has its own limits (the script's limited()); this one only stops a child that stops answering
    return fuzz_public_api.run_fuzz(ratchet["sample"], ratchet["seed"], timeout=900)


def _calls(summary: dict, outcome: str) -> list[str]:
    return [fuzz_public_api.described(record) for record in summary["not_clear"] if record["outcome"] == outcome]


def test_no_call_hangs_or_exhausts_memory(fuzz_sample):
    share = json.loads(RATCHET.read_text())["suite_sample"]["sample"]
    assert 0.7 * share < fuzz_sample["calls"] / fuzz_sample["planned_calls"] < 1.3 * share
    assert _calls(fuzz_sample, "timeout") == []
    assert _calls(fuzz_sample, "memory") == []


def test_a_call_that_runs_or_waits_for_ever_is_stopped_at_its_limit():
    """The hang detector can fail a call: a loop and a wait that never end are each stopped by the script's limited()
    (in a child process, as in the fuzz: a signal handler belongs to the main thread)."""
    code = ("import time\nfrom scripts.fuzz_public_api import Timeout, limited\n"
            "for forever in ('while True: pass', 'time.sleep(10**6)'):\n"
            "    try:\n        with limited(1):\n            exec(forever)\n"
            "    except Timeout:\n        print('stopped')\n")
    stopped = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert stopped.stdout.split() == ["stopped", "stopped"], stopped.stderr[-2000:]


def test_raw_tracebacks_never_rise(fuzz_sample):
    allowed = json.loads(RATCHET.read_text())["suite_sample"]["raw"]
    raw = fuzz_sample["counts"]["raw"]
    assert raw <= allowed, (
        f"{raw} calls of the fuzz's sample end in a raw traceback, more than the {allowed} allowed by "
        f"{RATCHET.relative_to(ROOT)}. Validate the new input at the boundary (mha.core.validation) so that it is "
        "refused with a message that says what to change. The raw ones:\n" + "\n".join(_calls(fuzz_sample, "raw")))
    if raw < allowed:
        print(f"\nThe fuzz's sample now has {raw} raw tracebacks; lower suite_sample.raw in {RATCHET.name} to {raw}.")


def test_the_fuzz_sees_every_subpackage_and_classifies_its_own_errors(fuzz_sample):
    assert {name.split(".")[1] for name in fuzz_sample["by_subpackage"]} == {
        "core", "corpora", "pretrained", "analysis", "lab", "views", "exercises"}
    assert fuzz_sample["counts"]["clear"] > 0 and fuzz_sample["counts"]["returned"] > 0
    assert all(reason for reason in fuzz_sample["skipped"].values())


def _attention(q, k, v, mask=None, *, dropout: float = 0.0, scale: float | None = None):
    """A stand-in with required, optional and keyword-only parameters, the kinds the plan must cover."""


def test_every_parameter_gets_each_bad_value_and_the_others_plausible_ones():
    names, reason = fuzz_public_api.fuzzed_parameters(_attention)
    assert (names, reason) == (["q", "k", "v", "mask", "dropout", "scale"], None)
    bad = object()
    args, kwargs = fuzz_public_api.arguments(_attention, "k", bad)
    assert args[1] is bad and len(args) == 3 and kwargs == {}  # the other optional ones keep their defaults
    args, kwargs = fuzz_public_api.arguments(_attention, "mask", bad)
    assert len(args) == 3 and all(arg is not bad for arg in args) and kwargs == {"mask": bad}  # optional: by keyword
    args, kwargs = fuzz_public_api.arguments(_attention, "scale", bad)
    assert kwargs == {"scale": bad}
    inspect.signature(_attention).bind(*args, **kwargs)  # a call the signature accepts


def test_a_parameter_is_left_out_only_when_another_required_one_has_no_plausible_value():
    class Opaque:
        pass

    def takes_opaque(opaque: Opaque, n: int, flag: bool = False):
        """``n`` and ``flag`` cannot be fuzzed without a plausible ``opaque``; ``opaque`` itself can."""

    names, reason = fuzz_public_api.fuzzed_parameters(takes_opaque)
    assert names == ["opaque"] and "opaque" in reason


def test_the_ratchet_fails_on_a_hang_on_exhausted_memory_and_on_more_raw_tracebacks():
    def summary(*outcomes):
        records = [{"callable": "f", "parameter": "x", "bad": "None", "outcome": outcome} for outcome in outcomes]
        return {"counts": {"raw": outcomes.count("raw")}, "not_clear": records}

    assert fuzz_public_api.ratchet_failures(summary("raw", "raw"), allowed_raw=2) == []
    assert len(fuzz_public_api.ratchet_failures(summary("raw", "raw"), allowed_raw=1)) == 1
    assert len(fuzz_public_api.ratchet_failures(summary("timeout", "memory"), allowed_raw=5)) == 2


def test_the_whole_fuzz_is_a_step_of_ci_after_the_suite_and_before_the_kernel_matrix():
    steps = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in steps if line.strip() and not line.lstrip().startswith("#")]
    fuzz = [i for i, line in enumerate(commands) if "scripts.fuzz_public_api --ratchet" in line]
    suite = [i for i, line in enumerate(commands) if line.startswith("make test ")]
    matrix = [i for i, line in enumerate(commands) if "scripts.kernel_matrix" in line]
    assert len(fuzz) == 1 and suite and matrix and suite[0] < fuzz[0] < matrix[0], commands
