"""Hostile cases run in one child process under an address-space cap and a time limit.

A size that is not refused before it is allocated either fails in the allocator (under the cap, a
``MemoryError`` or a ``RuntimeError`` from torch, not the clear refusal expected) or runs past the time limit:
both fail the test. One child runs a whole list of cases, so each test file pays for one Python start and one
``import torch``. The child reports each case as a line of JSON: its exception type, message and seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass

ADDRESS_SPACE_CAP = 3 * 2**30
"""Bytes of address space the child may map: enough to import torch and load the pretrained encoder."""

_CHILD = r"""
import json, resource, sys, time
cap = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
spec = json.loads(sys.stdin.read())
namespace = {}
exec(spec["setup"], namespace)
for name, code in spec["cases"]:
    print(json.dumps({"started": name}), flush=True)
    start = time.perf_counter()
    try:
        exec(code, dict(namespace))
        outcome = {"type": None, "message": ""}
    except BaseException as error:
        outcome = {"type": type(error).__name__, "message": str(error)}
    outcome.update(name=name, seconds=time.perf_counter() - start)
    print(json.dumps(outcome), flush=True)
"""


@dataclass(frozen=True)
class Case:
    """One hostile call: ``code`` runs after the shared setup and should raise ``error`` saying ``fragment``."""

    name: str
    code: str
    error: str
    fragment: str


def run_cases(setup: str, cases: list[Case], *, timeout: float = 90.0, per_case_seconds: float = 3.0) -> list[str]:
    """Run ``cases`` in one capped child; return a sentence for every case that did not refuse as expected."""
    spec = json.dumps({"setup": textwrap.dedent(setup), "cases": [(case.name, textwrap.dedent(case.code))
                                                                   for case in cases]})
    try:
        finished = subprocess.run([sys.executable, "-c", _CHILD, str(ADDRESS_SPACE_CAP)], input=spec,
                                  capture_output=True, text=True, timeout=timeout)
        stdout, stderr = finished.stdout, finished.stderr
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        stderr = f"the child ran past {timeout} s"
    outcomes, started = {}, None
    for line in stdout.splitlines():
        record = json.loads(line)
        if "started" in record:
            started = record["started"]
        else:
            outcomes[record["name"]] = record
    failures = []
    for case in cases:
        outcome = outcomes.get(case.name)
        if outcome is None:
            why = "hung or crashed the child" if case.name == started else "never ran"
            failures.append(f"{case.name}: {why} ({stderr.strip()[-500:]})")
        elif outcome["type"] != case.error or case.fragment not in outcome["message"]:
            failures.append(f"{case.name}: expected {case.error} saying {case.fragment!r}, got "
                            f"{outcome['type']}: {outcome['message'][:300]!r}")
        elif outcome["seconds"] > per_case_seconds:
            failures.append(f"{case.name}: refused, but only after {outcome['seconds']:.1f} s")
    return failures
