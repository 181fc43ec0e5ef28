"""Call every public callable of the package with bad values and count how each call ends.

Every name in the ``__all__`` of every module of ``mha.core``, ``mha.corpora``, ``mha.pretrained``,
``mha.analysis``, ``mha.lab``, ``mha.views`` and ``mha.exercises`` that can be called is called once per kind of
bad value in :data:`BAD_VALUES`, the bad value in its first parameter and a plausible value in every other
required one (:func:`good_value`). A callable whose other required parameters have no plausible value here, or
that is listed in :data:`SKIPPED`, is left out and named in the summary with the reason.

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
``memory``. ``tests/tools/test_public_api_fuzz.py`` runs a fixed, seeded sample and holds the count of raw tracebacks to
``tests/fuzz_ratchet.json``.

    python -m scripts.fuzz_public_api                   # every call; the summary in fuzz_public_api.json
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
from pathlib import Path

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
}
"""Callables whose plausible calls take longer than :data:`SECONDS_PER_CALL`: their own limit (CPU-seconds), and
why."""
OUTCOMES = ("returned", "suspicious", "clear", "raw", "timeout", "memory")

BAD_VALUES: dict[str, str] = {
    "None": "None",
    "text": "'not a number'",
    "bool": "True",
    "nan": "float('nan')",
    "inf": "float('inf')",
    "complex": "complex(1, 2)",
    "empty list": "[]",
    "empty array": "np.array([])",
    "0-d array": "np.array(3.0)",
    "object array": "np.array([1, 'a', None], dtype=object)",
    "complex array": "np.ones((2, 3), dtype=complex)",
    "huge int": "10**12",
    "negative int": "-1",
    "ragged nested list": "[[1, 2], [3, [4]]]",
    "dict": "{'a': 1}",
}
"""Each kind of bad value, as the expression that builds a fresh one for every call."""



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
}
"""Callables (or whole modules) left out, each with the reason: they train, write files or start processes."""


# --------------------------------------------------------------------------- the child: runs the calls

def in_sample(qualified: str, bad: str, fraction: float | None, seed: int) -> bool:
    """Whether the call of ``qualified`` with ``bad`` is in the seeded sample: a fixed share of all calls, each chosen
    by a hash of its own name, so that adding a callable adds calls to the sample but changes no other."""
    if fraction is None:
        return True
    digest = hashlib.sha256(f"{seed}:{qualified}:{bad}".encode()).digest()
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


def _child(first: int, sample: float | None, seed: int) -> None:
    import resource
    import traceback
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
    warnings.simplefilter("ignore")
    import numpy as np  # noqa: F401  (the bad values' expressions use it)
    import torch

    torch.set_num_threads(1)
    plan, skipped = build_plan()
    if first == 0:
        print(json.dumps({"plan": len(plan), "callables": len({c for c, _ in plan}), "skipped": skipped}), flush=True)
    from mha.pretrained.tokenizer import load_tokenizer

    _encoder(), load_tokenizer()  # loaded once here, so that no call's time limit pays for it
    package = str(ROOT / "src" / "mha")
    callables = dict(public_callables())
    chosen = [index for index, (qualified, bad) in enumerate(plan)
              if index >= first and in_sample(qualified, bad, sample, seed)]
    for index in chosen:
        qualified, bad = plan[index]
        print(json.dumps({"start": index}), flush=True)
        started = time.perf_counter()
        record = {"index": index, "callable": qualified, "bad": bad}
        try:
            for attempt in (1, 2):
                try:
                    with limited(SLOW.get(qualified, (SECONDS_PER_CALL,))[0]), \
                            contextlib.redirect_stdout(io.StringIO()):  # this process's stdout is the report's
                        args, kwargs = arguments(callables[qualified], eval(BAD_VALUES[bad]))
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
    if not parameters:
        return "takes no arguments"
    for parameter in _required(parameters)[1:]:
        if good_value(parameter) is _NONE:
            return f"no plausible value here for {parameter.name} ({parameter.annotation})"
    return None


def build_plan() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Every ``(callable, bad value)`` pair, in a fixed order; and the callables left out, with the reason."""
    plan, skipped = [], {}
    for qualified, value in public_callables():
        reason = _skip_reason(qualified, value)
        if reason is not None:
            skipped[qualified] = reason
        else:
            plan.extend((qualified, bad) for bad in BAD_VALUES)
    return plan, skipped


def _parameters(value) -> list:
    import inspect

    return [p for p in inspect.signature(value).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _required(parameters: list) -> list:
    """The first parameter, fuzzed even when it has a default, and every other one without a default."""
    return parameters[:1] + [p for p in parameters[1:] if p.default is p.empty]


_NONE = object()
_CACHE: dict[str, object] = {}


def _cached(key: str, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def _encoder():
    from mha.pretrained.encoder import MiniLMEncoder

    return _cached("encoder", MiniLMEncoder.load)


def _tiny_config():
    from mha.lab.tiny_model import TinyTransformerConfig

    return TinyTransformerConfig(vocab_size=8, max_seq_len=8, d_model=8, n_layers=1, n_heads=2)


def _tiny_model():
    from mha.lab.tiny_model import TinyTransformer

    return TinyTransformer(_tiny_config())


def _training():
    from mha.lab.training import TrainingConfig

    return TrainingConfig(steps=1, batch_size=2, log_every=1, eval_batch_size=2)


def _task():
    from mha.lab.tasks import InductionTask

    return InductionTask()


def _array():
    import numpy as np

    return np.random.default_rng(0).random((2, 4, 4))


def _tensor():
    import torch

    return torch.rand(2, 4, 4, generator=torch.Generator().manual_seed(0))


_OBJECTS = (("MiniLMEncoder", _encoder), ("TracedEncoder", _encoder),
            ("EncoderTrace", lambda: _encoder().trace("the cat sat on the mat .")),
            ("TokenizedBatch", lambda: _encoder().tokenize("the cat sat on the mat .")),
            ("TinyTransformerConfig", _tiny_config), ("TinyTransformer", _tiny_model), ("nn.Module", _tiny_model),
            ("TrainingConfig", _training), ("InductionTask", _task), ("Task", _task), ("Tensor", _tensor),
            ("ndarray", _array), ("ArrayLike", _array), ("Path", tempfile.gettempdir),
            ("Callable", lambda: lambda *args, **kwargs: None))
_CONTAINERS = ((("Sequence[str]", "list[str]", "tuple[str"), lambda: ["the", "cat", "sat"]),
               (("Sequence[int", "list[int", "tuple[int", "Sequence[float", "tuple[float", "Iterable[int"),
                lambda: [1, 2]),
               (("dict", "Mapping"), dict))
_SCALARS = {"bool": False, "int": 2, "float": 0.5, "str": "the cat sat", "int | None": 2, "float | None": 0.5,
            "str | None": "the cat sat"}


def good_value(parameter):
    """What makes a plausible value for ``parameter``, from its annotation (without one, a small float array);
    ``_NONE`` for a type that has none here."""
    annotation = parameter.annotation
    text = "" if annotation is parameter.empty else str(annotation)
    if not text:
        return _array
    for name, make in _OBJECTS:
        if name in text:
            return make
    for starts, make in _CONTAINERS:
        if text.startswith(starts):
            return make
    if text in _SCALARS:
        return lambda: _SCALARS[text]
    return _NONE


def arguments(value, bad) -> tuple[list, dict]:
    """``(args, kwargs)`` for one call: ``bad`` in the first parameter, plausible values in the other required ones."""
    parameters = _parameters(value)
    args, kwargs = [], {}
    for position, parameter in enumerate(_required(parameters)):
        given = bad if position == 0 else good_value(parameter)()
        if parameter.kind == parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = given
        else:
            args.append(given)
    return args, kwargs


# --------------------------------------------------------------------------- the parent: restarts, summary

def run_fuzz(sample: float | None = None, seed: int = 0, timeout: float = 1800.0) -> dict:
    """Run the fuzz (every call, or the seeded share ``sample`` of them: :func:`in_sample`) in capped children;
    return the summary."""
    records: dict[int, dict] = {}
    header: dict = {}
    first, deadline = 0, time.monotonic() + timeout
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        while True:
            environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
            request = json.dumps({"first": first, "sample": sample, "seed": seed})
            child = subprocess.run([sys.executable, __file__, "--child", request], cwd=folder, env=environment,
                                   capture_output=True, text=True, timeout=max(deadline - time.monotonic(), 1))
            last_started = None
            for line in child.stdout.splitlines():
                record = json.loads(line)
                if "plan" in record:
                    header = record
                elif "start" in record:
                    last_started = record["start"]
                else:
                    records[record["index"]] = record
            if child.returncode == 0 and (last_started is None or last_started in records):
                break
            if last_started is None or last_started in records:
                raise RuntimeError(f"the fuzz's child failed before a call:\n{child.stderr[-3000:]}")
            records[last_started] = {"index": last_started, "outcome": "memory",
                                     "error": f"the child ended with code {child.returncode}"}
            first = last_started + 1
    return summarise(header, records, time.perf_counter() - started, sample, seed)


def summarise(header: dict, records: dict[int, dict], seconds: float, sample: float | None, seed: int) -> dict:
    counts = Counter(record["outcome"] for record in records.values())
    by_subpackage: dict[str, Counter] = {}
    raw_callables = Counter()
    for record in records.values():
        subpackage = ".".join(record.get("callable", "mha.?").split(".")[:2])
        by_subpackage.setdefault(subpackage, Counter())[record["outcome"]] += 1
        if record["outcome"] == "raw":
            raw_callables[record["callable"]] += 1
    return {
        "callables": header.get("callables"), "planned_calls": header.get("plan"), "calls": len(records),
        "sample": sample, "seed": seed, "seconds": round(seconds, 1),
        "counts": {outcome: counts.get(outcome, 0) for outcome in OUTCOMES},
        "by_subpackage": {name: dict(counter) for name, counter in sorted(by_subpackage.items())},
        "raw_by_callable": dict(raw_callables.most_common()),
        "skipped": header.get("skipped", {}),
        "raw_python_type_errors": sorted({f"{record['callable']}: {record['message']}" for record in records.values()
                                          if record["outcome"] == "raw" and record.get("error") == "TypeError"
                                          and PYTHON_SAYS.search(record.get("message", ""))}),
        "not_clear": [record for _, record in sorted(records.items())
                      if record["outcome"] in ("raw", "timeout", "memory", "suspicious")],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=float, default=None,
                        help="run only this share of the calls (0 to 1), chosen by a hash of each call and --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="fuzz_public_api.json", help="where to write the summary")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        request = json.loads(options.child)
        _child(request["first"], request["sample"], request["seed"])
        return
    summary = run_fuzz(options.sample, options.seed)
    Path(options.json).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['calls']} calls of {summary['callables']} callables in {summary['seconds']} s: "
          + ", ".join(f"{count} {outcome}" for outcome, count in summary["counts"].items())
          + f"; {len(summary['skipped'])} left out. Summary: {options.json}")


if __name__ == "__main__":
    main()
