"""The wide fuzz: every public callable of the package called with bad values (``scripts/fuzz_public_api.py``).

A fixed, seeded sample of the calls runs here, in one child process under an address-space cap with a limit of CPU
time per call (which a busy machine does not bring nearer); the whole fuzz is the script's to run. No call may hang
or exhaust memory, and the calls that end in a raw traceback (an exception from inside numpy, torch or Python rather
than the package's own message) may only become fewer: their count is held in ``tests/fuzz_ratchet.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import fuzz_public_api

ROOT = Path(__file__).resolve().parents[2]
RATCHET = ROOT / "tests" / "fuzz_ratchet.json"


@pytest.fixture(scope="module")
def fuzz_sample() -> dict:
    ratchet = json.loads(RATCHET.read_text())
    # each call has its own limits (the script's limited()); this one only stops a child that stops answering
    return fuzz_public_api.run_fuzz(ratchet["sample"], ratchet["seed"], timeout=900)


def _calls(summary: dict, outcome: str) -> list[str]:
    return [f"{record.get('callable')}({record.get('bad')}): {record.get('error', '')} {record.get('message', '')}"
            for record in summary["not_clear"] if record["outcome"] == outcome]


def test_no_call_hangs_or_exhausts_memory(fuzz_sample):
    share = json.loads(RATCHET.read_text())["sample"]
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
    allowed = json.loads(RATCHET.read_text())["raw"]
    raw = fuzz_sample["counts"]["raw"]
    assert raw <= allowed, (
        f"{raw} calls of the fuzz's sample end in a raw traceback, more than the {allowed} allowed by "
        f"{RATCHET.relative_to(ROOT)}. Validate the new input at the boundary (mha.core.validation) so that it is "
        "refused with a message that says what to change. The raw ones:\n" + "\n".join(_calls(fuzz_sample, "raw")))
    if raw < allowed:
        print(f"\nThe fuzz's sample now has {raw} raw tracebacks; lower 'raw' in {RATCHET.name} to {raw} to keep it.")


def test_the_fuzz_sees_every_subpackage_and_classifies_its_own_errors(fuzz_sample):
    assert {name.split(".")[1] for name in fuzz_sample["by_subpackage"]} == {
        "core", "corpora", "pretrained", "analysis", "lab", "views", "exercises"}
    assert fuzz_sample["counts"]["clear"] > 0 and fuzz_sample["counts"]["returned"] > 0
    assert all(reason for reason in fuzz_sample["skipped"].values())
