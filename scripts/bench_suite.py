"""Time the test suite as its budgets state them (every test within 10 minutes on 2 CPU cores, `make test-quick`
within 60 s): several runs and their median.

    python -m scripts.bench_suite            # `make test` three times, against 10 minutes
    python -m scripts.bench_suite --quick    # `make test-quick` three times, against 60 s
    python -m scripts.bench_suite --runs 1

One 2-core machine spreads the same suite widely from run to run, so the budget is read against the median of the
runs, not one of them. Each run also says how busy the machine's cores were over it (Linux's ``/proc/stat``): the
suite keeps both cores busy throughout, so when the share is near 100 % only less work makes it faster, and when it
is not, something waited. Nothing is written; the execution statistics page (chapters/execution_statistics.json)
takes the numbers by hand, with the day and the machine.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 600.0
SUITE = ["make", "-s", "test"]  # as the Makefile runs it (its environment, bytecode cache on)
QUICK_BUDGET_S = 60.0
QUICK = ["make", "-s", "test-quick"]
PROC_STAT = Path("/proc/stat")


def busy_and_total(stat_line: str, ticks_per_second: float) -> tuple[float, float]:
    """(busy, all) CPU-seconds since boot, all cores together, from the ``cpu`` line of ``/proc/stat``.

    Busy is user, nice, system, irq and softirq time; idle and iowait are the rest; steal (time the hypervisor gave
    to others) counts in neither, since no process of this machine could use it.
    """
    fields = stat_line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        raise ValueError(f"not the summary line of /proc/stat: {stat_line[:60]!r}")
    user, nice, system, idle, iowait, irq, softirq = (int(value) for value in fields[1:8])
    busy = user + nice + system + irq + softirq
    return busy / ticks_per_second, (busy + idle + iowait) / ticks_per_second


def cpu_seconds() -> tuple[float, float] | None:
    """(busy, all) CPU-seconds so far on this machine, or None where there is no ``/proc/stat``."""
    try:
        first_line = PROC_STAT.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return busy_and_total(first_line, os.sysconf("SC_CLK_TCK"))


def one_run(command: list[str]) -> dict:
    """Run ``command`` from the repository's root, its output discarded; its wall time, exit status and CPU share."""
    before, started = cpu_seconds(), time.perf_counter()
    status = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    seconds, after = time.perf_counter() - started, cpu_seconds()
    run = {"seconds": seconds, "status": status, "busy": None, "available": None}
    if before is not None and after is not None:
        run["busy"], run["available"] = after[0] - before[0], after[1] - before[1]
    return run


def minutes(seconds: float) -> str:
    """``312.4`` -> ``'5 min 12 s'``."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def describe(run: dict) -> str:
    """One line for a run: its time, whether it passed, and how busy the cores were."""
    outcome = "passed" if run["status"] == 0 else f"FAILED (exit {run['status']})"
    line = f"{minutes(run['seconds'])}, {outcome}"
    if run["busy"] is not None and run["available"]:
        line += (f"; {run['busy']:.0f} of {run['available']:.0f} CPU-seconds busy "
                 f"({100 * run['busy'] / run['available']:.0f} %)")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="how many times to run the suite (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help=f"time `make test-quick` against its budget of {QUICK_BUDGET_S:.0f} s instead")
    parser.add_argument("--command", help="what to time, run from the repository's root (default: the whole suite, "
                                          "or `make test-quick` with --quick)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs needs a whole number of at least 1")
    default, budget = (QUICK, QUICK_BUDGET_S) if args.quick else (SUITE, BUDGET_S)
    command = shlex.split(args.command) if args.command else default
    runs = []
    for number in range(1, args.runs + 1):
        runs.append(one_run(command))
        print(f"run {number}: {describe(runs[-1])}", flush=True)
    middle = statistics.median(run["seconds"] for run in runs)
    verdict = "within" if middle <= budget else "over"
    print(f"median of {len(runs)}: {minutes(middle)}, {verdict} the budget of {minutes(budget)}")
    return 0 if all(run["status"] == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
