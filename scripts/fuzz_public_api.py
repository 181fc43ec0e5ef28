"""Call every public callable of the package with bad values and count how each call ends.

Every name in the ``__all__`` of every module of ``mha.core``, ``mha.corpora``, ``mha.pretrained``,
``mha.analysis``, ``mha.lab``, ``mha.views`` and ``mha.exercises`` that can be called is called once per kind of
bad value in :data:`~scripts.fuzz_values.BAD_VALUES` and per parameter: the bad value in that parameter (a required
one where it stands, an optional one by keyword) and a plausible value in every other required one
(:func:`~scripts.fuzz_values.good_value`; optional ones keep their defaults). A parameter is left out when another
required parameter of its callable has no plausible value here; a callable with no parameter left, or listed in
:data:`SKIPPED`, is left out and named in the summary with the reason.

Each call ends one of five ways:

* ``returned``: it gave a result (``suspicious`` when that result holds NaN, infinity or complex numbers);
* ``clear``: it raised an error of the package's own, from a ``raise`` statement in ``src/mha`` or of a class
  that the package defines, whose message says what was wrong;
* ``raw``: any other exception, raised inside numpy, torch or Python (an ``AttributeError`` on ``None``, an
  ``IndexError`` from numpy): a traceback that does not tell the reader what to change;
* ``timeout``: it ran past :data:`SECONDS_PER_CALL` of CPU time, or waited :data:`WAITING_TIMES_CPU` times as long;
* ``memory``: it ran out of the address space the calls share (:data:`ADDRESS_SPACE_CAP`), or killed the process.

All calls run in one child process under an address-space cap and per-call alarms, with the working folder a
temporary one; if a call kills the child, a new child goes on from the next call and that call counts as
``memory``; ``--jobs`` splits the calls among that many such children. ``--ratchet`` (a step of ``.ci/run``) runs
every call and fails if any hangs or exhausts memory, or if more end in a raw traceback than
``tests/fuzz_ratchet.json`` allows; ``tests/tools/test_public_api_fuzz.py`` runs a small seeded sample of the same calls
in the suite, against its own count in that file.

    python -m scripts.fuzz_public_api                   # every call; the summary in fuzz_public_api.json
    python -m scripts.fuzz_public_api --ratchet --jobs 2
    python -m scripts.fuzz_public_api --only 'mha.core.geometry' --json /tmp/geometry.json
    python -m scripts.fuzz_public_api --sample 0.1 --seed 0 --json /tmp/sample.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.fuzz_public_api")
from scripts.fuzz_values import BAD_VALUES, NO_VALUE, encoder, good_value  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("mha.core", "mha.corpora", "mha.pretrained", "mha.analysis", "mha.lab", "mha.views", "mha.exercises")
ADDRESS_SPACE_CAP = 4 * 2**30
"""Bytes of address space the child may map: torch, the pretrained encoder and room for honest work."""
SECONDS_PER_CALL = 10
"""A call's limit in CPU-seconds, the child's own CPU time, which a busy machine does not advance: a call stopped
there runs for ever, not slowly. A call that runs past it is tried once more (its first try may have paid for
importing a library such as scikit-learn, or for data a check caches) and counts as a timeout only if it runs past it
again."""
WAITING_TIMES_CPU = 6
"""A call's wall-clock limit, as a multiple of its CPU limit: for a call that waits without computing (on a lock, on
input), which uses no CPU time; a busy machine stretches a call's wall time far less."""
SLOW: dict[str, tuple[int, str]] = {
    "mha.views.induction_explorer.InductionLabExplorer": (30, "None asks for every stored model, each loaded and "
                                                               "measured"),
    "mha.exercises.emergence.check_trained_previous_token_head": (60, "a seed other than 0 trains a model afresh"),
}
"""Callables whose plausible calls take longer than :data:`SECONDS_PER_CALL`: their own limit (CPU-seconds), and
why."""
OUTCOMES = ("returned", "suspicious", "clear", "raw", "timeout", "memory")
RATCHET = ROOT / "tests" / "fuzz_ratchet.json"
"""The most raw tracebacks allowed: of the whole fuzz (``--ratchet``) and of the suite's sample."""
SLOW_CALL_SECONDS = 8
"""A call that took longer than this by the wall clock is listed in the summary as slow (not a failure)."""

PYTHON_SAYS = re.compile(r"not iterable|unhashable type|not supported between instances|object is not subscriptable|"
                         r"argument must be|missing \d+ required|unexpected keyword")
"""Python's own ``TypeError`` messages that name the wrong type: raw tracebacks, but ones that say what is wrong
(listed apart in the summary, ``raw_python_type_errors``)."""


def holds_bad_numbers(result) -> bool:
    """True if ``result`` (a number, an array, a tensor, or a tuple, list or dict of them) holds NaN, infinity or a
    complex number: a result that a bad value may have made wrong without a word."""
    import numpy as np
    import torch

    if isinstance(result, (list, tuple)):
        return any(holds_bad_numbers(item) for item in result[:50])
    if isinstance(result, dict):
        return any(holds_bad_numbers(item) for item in list(result.values())[:50])
    if isinstance(result, torch.Tensor):
        result = result.detach().cpu().numpy() if result.numel() <= 10**6 else np.zeros(0)
    kind = result.dtype.kind if isinstance(result, np.ndarray) else ""
    if isinstance(result, (complex, np.complexfloating)) or kind == "c":
        return True
    if isinstance(result, (float, np.floating)) or kind == "f":
        return not bool(np.isfinite(result).all())
    return False

SKIPPED: dict[str, str] = {
    "mha.lab.training.train": "a training loop",
    "mha.lab.induction.train_until_induction": "a training loop",
    "mha.lab.head_count_sweep.train_two_relation_model": "a training loop",
    "mha.lab.checkpoints.save_checkpoint": "writes a checkpoint and the lab's manifest in data/lab",
    "mha.lab.checkpoints.record_file": "writes the lab's manifest in data/lab",
    "mha.data_files.write_recorded_json": "writes a data file and data/SHA256SUMS",
    "mha.pretrained.web_export.export_web_model": "writes the site's model files to a folder",
    "mha.exercises.grading.sandbox": "starts a sandboxed child process with limits of its own",
    "mha.exercises.grading.autograder": "grades through the sandbox's child process",
    "mha.exercises.grading.otter_plugin": "grades through the sandbox's child process",
    "mha.exercises.grading.submission": "reads and writes submission files",
    "mha.exercises.grading.tools.copy_tools": "copies the package into a folder and changes the modes of all it holds",
}
"""Callables (or whole modules) left out, each with the reason: they train, write files or start processes."""


# --------------------------------------------------------------------------- the child: runs the calls

def in_sample(call: tuple[str, str, str], fraction: float | None, seed: int) -> bool:
    """Whether ``call``, ``(callable, parameter, bad value)``, is in the seeded sample: a fixed share of all calls,
    each chosen by a hash of its own name, so that adding a callable adds calls to the sample but changes no other."""
    if fraction is None:
        return True
    digest = hashlib.sha256(":".join((str(seed), *call)).encode()).digest()
    return int.from_bytes(digest[:4], "big") < fraction * 2**32


class Timeout(BaseException):
    """A call ran past its limit (:func:`limited`); a BaseException, so that no ``except Exception`` of the call's
    own catches it."""


@contextlib.contextmanager
def limited(cpu_seconds: int):
    """Raise :class:`Timeout` in the block once it has used ``cpu_seconds`` of the process's CPU time (ITIMER_PROF),
    or waited :data:`WAITING_TIMES_CPU` times as long by the wall clock. The main thread only, as any signal handler."""

    def stop(signum, frame):
        raise Timeout

    handlers = signal.signal(signal.SIGPROF, stop), signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, WAITING_TIMES_CPU * cpu_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, handlers[0])
        signal.signal(signal.SIGALRM, handlers[1])


def _child(first: int, sample: float | None, seed: int, only: str | None, shard: tuple[int, int]) -> None:
    import resource
    import traceback
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
    warnings.simplefilter("ignore")
    import numpy as np  # noqa: F401  (the bad values' expressions use it)
    import torch

    torch.set_num_threads(1)
    plan, skipped = build_plan(only)
    if first == 0:
        print(json.dumps({"plan": len(plan), "callables": len({c for c, _, _ in plan}), "skipped": skipped}),
              flush=True)
    from mha.pretrained.tokenizer import load_tokenizer

    encoder(), load_tokenizer()  # loaded once here, so that no call's time limit pays for it
    package = str(ROOT / "src" / "mha")
    callables = dict(public_callables())
    chosen = [index for index, call in enumerate(plan)
              if index >= first and index % shard[1] == shard[0] and in_sample(call, sample, seed)]
    for index in chosen:
        qualified, parameter, bad = plan[index]
        print(json.dumps({"start": index, "call": plan[index]}), flush=True)
        started = time.perf_counter()
        record = {"index": index, "callable": qualified, "parameter": parameter, "bad": bad}
        try:
            for attempt in (1, 2):
                try:
                    with limited(SLOW.get(qualified, (SECONDS_PER_CALL,))[0]), \
                            contextlib.redirect_stdout(io.StringIO()):  # this process's stdout is the report's
                        args, kwargs = arguments(callables[qualified], parameter, eval(BAD_VALUES[bad]))
                        result = callables[qualified](*args, **kwargs)
                        record["outcome"] = "suspicious" if holds_bad_numbers(result) else "returned"
                    break
                except Timeout:
                    if attempt == 2:
                        raise
        except Timeout:
            record["outcome"] = "timeout"
        except MemoryError:
            record["outcome"] = "memory"
        except SystemExit as error:  # a library function that ends the process instead of raising
            record.update(outcome="raw", error="SystemExit", message=f"exit code {error.code}")
        except Exception as error:  # noqa: BLE001  (every exception is what is being counted)
            frames = traceback.extract_tb(error.__traceback__)
            last = frames[-1] if frames else None
            own_class = type(error).__module__.startswith("mha.")
            own_raise = (last is not None and last.filename.startswith(package)
                         and (last.line or "").lstrip().startswith("raise"))
            allocator = isinstance(error, RuntimeError) and "allocat" in str(error).lower()
            record["outcome"] = "memory" if allocator else "clear" if own_class or own_raise else "raw"
            record["error"] = type(error).__name__
            record["message"] = str(error)[:200]
            if last is not None:
                record["where"] = f"{os.path.relpath(last.filename, ROOT)}:{last.lineno}"
        record["seconds"] = round(time.perf_counter() - started, 3)
        print(json.dumps(record), flush=True)


def public_callables() -> list[tuple[str, object]]:
    """``(module.name, object)`` for every callable in an ``__all__`` of the subpackages, each object once."""
    import importlib
    import pkgutil

    found, seen = [], set()
    for subpackage in SUBPACKAGES:
        package = importlib.import_module(subpackage)
        modules = [subpackage] + sorted(info.name for info in pkgutil.walk_packages(package.__path__, f"{subpackage}."))
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                if not callable(value) or id(value) in seen:
                    continue
                seen.add(id(value))
                home = getattr(value, "__module__", None) or module_name
                found.append((f"{home}.{getattr(value, '__qualname__', name)}", value))
    return sorted(found, key=lambda item: item[0])


def _skip_reason(qualified: str, value) -> str | None:
    """Why the whole callable is left out, or None."""
    import inspect

    for prefix, reason in SKIPPED.items():
        if qualified == prefix or qualified.startswith(prefix + "."):
            return reason
    if isinstance(value, type) and issubclass(value, BaseException):
        return "an exception or warning class: calling it only builds the error"
    if getattr(value, "__module__", "") in ("typing", "collections.abc") or not (
            inspect.isroutine(value) or inspect.isclass(value) or hasattr(value, "__wrapped__")):
        return "a type alias, not a function or a class"
    try:
        parameters = _parameters(value)
    except (TypeError, ValueError):
        return "no signature to read"
    return None if parameters else "takes no arguments"


def fuzzed_parameters(value) -> tuple[list[str], str | None]:
    """The names of the parameters of ``value`` to put bad values in, in order; and, if some are left out, why
    the first was: every other required parameter needs a plausible value, and an optional parameter that can only
    be passed by position is not fuzzed."""
    parameters = _parameters(value)
    missing = [p for p in parameters if p.default is p.empty and good_value(p) is NO_VALUE]
    names, reason = [], None
    for parameter in parameters:
        others = [p for p in missing if p is not parameter]
        if parameter.default is not parameter.empty and parameter.kind == parameter.POSITIONAL_ONLY:
            reason = reason or f"{parameter.name} is optional and can only be passed by position"
        elif others:
            reason = reason or f"no plausible value here for {others[0].name} ({others[0].annotation})"
        else:
            names.append(parameter.name)
    return names, reason


def build_plan(only: str | None = None) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Every ``(callable, parameter, bad value)`` call, in a fixed order; and the callables left out (or some of
    whose parameters are), with the reason. ``only``: a regular expression that a callable's name must match."""
    plan, skipped = [], {}
    for qualified, value in public_callables():
        if only is not None and not re.search(only, qualified):
            continue
        reason = _skip_reason(qualified, value)
        names, left_out = ([], reason) if reason is not None else fuzzed_parameters(value)
        if not names:
            skipped[qualified] = left_out
        elif left_out is not None:
            skipped[f"{qualified} (some parameters)"] = left_out
        plan.extend((qualified, name, bad) for name in names for bad in BAD_VALUES)
    return plan, skipped


def _parameters(value) -> list:
    import inspect

    return [p for p in inspect.signature(value).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def arguments(value, fuzzed: str, bad) -> tuple[list, dict]:
    """``(args, kwargs)`` for one call: ``bad`` in the parameter named ``fuzzed`` (by keyword if it is optional),
    plausible values in the other required ones; the other optional ones keep their defaults."""
    args, kwargs = [], {}
    for parameter in _parameters(value):
        optional = parameter.default is not parameter.empty
        if parameter.name != fuzzed and optional:
            continue
        given = bad if parameter.name == fuzzed else good_value(parameter)()
        if parameter.kind == parameter.KEYWORD_ONLY or (optional and parameter.kind != parameter.POSITIONAL_ONLY):
            kwargs[parameter.name] = given
        else:
            args.append(given)
    return args, kwargs

# --------------------------------------------------------------------------- the parent: restarts, summary

def run_fuzz(sample: float | None = None, seed: int = 0, timeout: float = 1800.0, *, only: str | None = None,
             jobs: int = 1) -> dict:
    """Run the fuzz (every call, or the seeded share ``sample`` of them: :func:`in_sample`; only the callables whose
    name ``only`` matches) in capped children, ``jobs`` at a time, each with every ``jobs``-th call; return the
    summary."""
    deadline = time.monotonic() + timeout
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(jobs) as pool:
        shards = list(pool.map(lambda shard: _run_shard((shard, jobs), sample, seed, only, deadline, folder),
                               range(jobs)))
    header = next((header for header, _ in shards if header), {})
    records = {index: record for _, part in shards for index, record in part.items()}
    return summarise(header, records, time.perf_counter() - started, sample, seed)


def _run_shard(shard: tuple[int, int], sample: float | None, seed: int, only: str | None, deadline: float,
               folder: str) -> tuple[dict, dict[int, dict]]:
    """The header and the records of one shard's calls, run in a child that is started again after a call that
    killed it."""
    records: dict[int, dict] = {}
    header: dict = {}
    first = 0
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), str(ROOT))), "OMP_NUM_THREADS": "1"}
    while True:
        request = json.dumps({"first": first, "sample": sample, "seed": seed, "only": only, "shard": shard})
        child = subprocess.run([sys.executable, "-m", "scripts.fuzz_public_api", "--child", request], cwd=folder,
                               env=environment, capture_output=True, text=True,
                               timeout=max(deadline - time.monotonic(), 1))
        last_started, last_call = None, ("?", "?", "?")
        for line in child.stdout.splitlines():
            record = json.loads(line)
            if "plan" in record:
                header = header or record
            elif "start" in record:
                last_started, last_call = record["start"], record.get("call", last_call)
            else:
                records[record["index"]] = record
        if child.returncode == 0 and (last_started is None or last_started in records):
            return header, records
        if last_started is None or last_started in records:
            raise RuntimeError(f"the fuzz's child failed before a call:\n{child.stderr[-3000:]}")
        records[last_started] = {"index": last_started, "callable": last_call[0], "parameter": last_call[1],
                                 "bad": last_call[2], "outcome": "memory",
                                 "error": f"the child ended with code {child.returncode}"}
        first = last_started + 1


def summarise(header: dict, records: dict[int, dict], seconds: float, sample: float | None, seed: int) -> dict:
    """The counts of each outcome, overall and by subpackage; the raw tracebacks grouped by callable (and parameter)
    and by error; the slow calls; and every call that did not end clearly or with a plain result."""
    counts = Counter(record["outcome"] for record in records.values())
    by_subpackage: dict[str, Counter] = {}
    raw_callables, raw_parameters, raw_errors = Counter(), Counter(), Counter()
    for record in records.values():
        subpackage = ".".join(record.get("callable", "mha.?").split(".")[:2])
        by_subpackage.setdefault(subpackage, Counter())[record["outcome"]] += 1
        if record["outcome"] == "raw":
            raw_callables[record["callable"]] += 1
            raw_parameters[f"{record['callable']}({record['parameter']})"] += 1
            raw_errors[f"{record['error']}: {re.sub(r'[0-9]+', 'N', record['message'][:80])}"] += 1
    return {
        "callables": header.get("callables"), "planned_calls": header.get("plan"), "calls": len(records),
        "sample": sample, "seed": seed, "seconds": round(seconds, 1),
        "counts": {outcome: counts.get(outcome, 0) for outcome in OUTCOMES},
        "raw_share": round(counts.get("raw", 0) / max(len(records), 1), 4),
        "by_subpackage": {name: dict(counter) for name, counter in sorted(by_subpackage.items())},
        "raw_by_callable": dict(raw_callables.most_common()),
        "raw_by_parameter": dict(raw_parameters.most_common()),
        "raw_by_error": dict(raw_errors.most_common()),
        "slow": [f"{record['callable']}({record['parameter']}={record['bad']}): {record['seconds']} s"
                 for record in records.values() if record.get("seconds", 0) > SLOW_CALL_SECONDS],
        "skipped": header.get("skipped", {}),
        "raw_python_type_errors": sorted({f"{record['callable']}: {record['message']}" for record in records.values()
                                          if record["outcome"] == "raw" and record.get("error") == "TypeError"
                                          and PYTHON_SAYS.search(record.get("message", ""))}),
        "not_clear": [record for _, record in sorted(records.items())
                      if record["outcome"] in ("raw", "timeout", "memory", "suspicious")],
    }


def described(record: dict) -> str:
    """One call and how it ended, on one line."""
    return (f"{record.get('callable')}({record.get('parameter')}={record.get('bad')}): {record.get('error', '')} "
            f"{record.get('message', '')}".strip())


def ratchet_failures(summary: dict, allowed_raw: int) -> list[str]:
    """What is wrong with a run of the fuzz: a call that hung or exhausted memory, or more raw tracebacks than
    ``allowed_raw``; empty if nothing is."""
    failures = [f"{record['outcome']}: {described(record)}" for record in summary["not_clear"]
                if record["outcome"] in ("timeout", "memory")]
    raw = summary["counts"]["raw"]
    if raw > allowed_raw:
        failures.append(
            f"{raw} calls end in a raw traceback, more than the {allowed_raw} allowed by "
            f"{RATCHET.relative_to(ROOT)}. Validate the new input at the boundary (mha.core.validation) so that it is "
            "refused with a message that says what to change. The raw ones:\n"
            + "\n".join(described(record) for record in summary["not_clear"] if record["outcome"] == "raw"))
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=float, default=None,
                        help="run only this share of the calls (0 to 1), chosen by a hash of each call and --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="only the callables whose name this regular expression matches")
    parser.add_argument("--jobs", type=int, default=1, help="child processes running calls at once")
    parser.add_argument("--ratchet", action="store_true",
                        help=f"every call; fail on a hang, on exhausted memory or on more raw tracebacks than "
                             f"{RATCHET.name}'s whole_fuzz allows")
    parser.add_argument("--json", default="fuzz_public_api.json", help="where to write the summary")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        request = json.loads(options.child)
        _child(request["first"], request["sample"], request["seed"], request["only"], tuple(request["shard"]))
        return
    if options.ratchet and (options.sample is not None or options.only is not None):
        parser.error("--ratchet runs every call: leave out --sample and --only")
    summary = run_fuzz(options.sample, options.seed, timeout=4 * 3600, only=options.only, jobs=options.jobs)
    Path(options.json).parent.mkdir(parents=True, exist_ok=True)
    Path(options.json).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['calls']} calls of {summary['callables']} callables in {summary['seconds']} s: "
          + ", ".join(f"{count} {outcome}" for outcome, count in summary["counts"].items())
          + f" ({100 * summary['raw_share']:.1f}% raw); {len(summary['slow'])} slow; {len(summary['skipped'])} "
            f"left out. Summary: {options.json}")
    if options.ratchet:
        allowed = json.loads(RATCHET.read_text())["whole_fuzz"]["raw"]
        failures = ratchet_failures(summary, allowed)
        if failures:
            sys.exit("\n".join(failures))
        if summary["counts"]["raw"] < allowed:
            print(f"Fewer raw tracebacks than allowed: lower whole_fuzz.raw in {RATCHET.relative_to(ROOT)} from "
                  f"{allowed} to {summary['counts']['raw']} to keep them.")


if __name__ == "__main__":
    main()
