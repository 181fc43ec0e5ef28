"""Hostile cases run in one child process under an address-space cap and a CPU-time limit per case.

A size that is not refused before it is allocated fails in the allocator (under the cap, a ``MemoryError`` or a
``RuntimeError`` from torch, not the clear refusal expected), and work that grows with a huge size runs for ever:
the child's CPU clock (``RLIMIT_CPU``, which a busy machine does not advance) kills it after
:data:`CPU_SECONDS_PER_CASE`, and the case fails as the one that ran into the limit. Both fail the test; a refusal
that does work proportional to a merely large input is for the test itself to show, by the work it skips (a spy on
the expensive call), not by the clock. One child runs a whole list of cases, so each test file pays for one Python
start and one ``import torch``. The child reports each case as a line of JSON: its exception type and message.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass

ADDRESS_SPACE_CAP = 3 * 2**30
"""Bytes of address space the child may map: enough to import torch and load the pretrained encoder."""
CPU_SECONDS_PER_CASE = 20
"""CPU-seconds one case may use before the child is killed: a refusal takes a fraction of one, a case that runs for
ever reaches it on any machine, however busy."""

_CHILD = r"""
import json, math, resource, sys, time
cap, cpu_seconds = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
spec = json.loads(sys.stdin.read())
namespace = {}
exec(spec["setup"], namespace)
for name, code in spec["cases"]:
    print(json.dumps({"started": name}), flush=True)
    used, hard = math.ceil(time.process_time()), resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = used + cpu_seconds  # the setup's and the cases' before, and cpu_seconds more for this case
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    try:
        exec(code, dict(namespace))
        outcome = {"type": None, "message": ""}
    except BaseException as error:
        outcome = {"type": type(error).__name__, "message": str(error)}
    outcome.update(name=name)
    print(json.dumps(outcome), flush=True)
"""


@dataclass(frozen=True)
class Case:
    """One hostile call: ``code`` runs after the shared setup and should raise ``error`` saying ``fragment``."""

    name: str
    code: str
    error: str
    fragment: str


def run_cases(setup: str, cases: list[Case], *, timeout: float = 300.0) -> list[str]:
    """Run ``cases`` in one capped child; return a sentence for every case that did not refuse as expected.

    ``timeout`` (wall-clock seconds for the whole child) only stops a case that waits without using the CPU."""
    spec = json.dumps({"setup": textwrap.dedent(setup), "cases": [(case.name, textwrap.dedent(case.code))
                                                                   for case in cases]})
    try:
        finished = subprocess.run([sys.executable, "-c", _CHILD, str(ADDRESS_SPACE_CAP), str(CPU_SECONDS_PER_CASE)],
                                  input=spec, capture_output=True, text=True, timeout=timeout)
        stdout, stderr = finished.stdout, finished.stderr
        if finished.returncode == -signal.SIGXCPU:
            stderr = f"killed at its limit of {CPU_SECONDS_PER_CASE} CPU-seconds: it does work that grows with the size"
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
    return failures
