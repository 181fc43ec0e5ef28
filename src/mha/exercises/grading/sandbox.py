"""A submitted function run in a process of its own, for grading (instructors' page, "Grading").

:class:`Sandbox` is where one submission's code runs: a confinement of its own
(:mod:`~mha.exercises.grading.confinement`: namespaces, or a user id of its own) and, inside it, a plain Python
(``python -I``, not the student's kernel) running :mod:`~mha.exercises.grading.sandbox_worker`, which imports the
submission's modules once and forks a fresh process for every function graded. :class:`IsolatedFunction` hands that
process the submission's definitions and stands in for the function: calling it sends the inputs to that process and
reads back the answer as plain data (numbers, text, arrays), so the book's checks run unchanged in the grader, with
the expected answers computed here and never sent. The process has a time limit for each call, a time budget for the
exercise and the submission, and a memory limit (:class:`Limits`); when it hangs, dies or runs out of memory the
check ends with :class:`Stopped`, whose message says so. At the end of each exercise every process it started is
killed.

A real-model exercise (its check declares ``tools``, :mod:`~mha.exercises.grading.tools`) runs in a zygote of its
own, started lazily, one per set of tools: its confinement
(:meth:`~mha.exercises.grading.confinement.Confinement.with_tools`) shows it a read-only copy of only the modules it
declares and what they import, which no other exercise's process can read, and it imports them (and loads the
pretrained encoder, if they hold it) before forking. A call's arguments may include that encoder, which crosses the
pipe as a call to ``MiniLMEncoder.load()``, cached there. The copies are removed when the sandbox closes."""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import os
import pickle
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..checking import AnswerError
from ..learner_errors import UndefinedName
from . import confinement
from .confinement import Confinement, Unconfined
from .tools import closure, copy_tools

__all__ = ["IsolatedFunction", "Limits", "Sandbox", "Stopped", "WORKER"]

WORKER = Path(__file__).with_name("sandbox_worker.py")


@dataclass(frozen=True)
class Limits:
    """How long a submitted function may take (each call, one exercise in all, a whole submission), and how much
    memory beyond numpy and torch."""

    seconds: float = 60.0  # each call (and the definitions, before the first)
    memory_bytes: int = 2 * 1024**3
    exercise_seconds: float = 120.0  # every call of one exercise, its hidden cases' included
    submission_seconds: float = 1800.0  # every exercise of one submission
    slow_factor: float = 20.0  # a case fails if its calls take longer than this many times the check's own work...
    slow_floor_seconds: float = 2.0  # ... and this many seconds more

    def memory_words(self) -> str:
        return f"{self.memory_bytes / 1024**3:g} GB"


class Stopped(BaseException):
    """The submitted function's process ended a check without an answer (a time limit, a crash, no memory left).

    A BaseException, so a check's handling of the learner's errors lets it through to the grader."""


class _RemoteError(Exception):
    """An exception raised by the submitted function in its own process, rebuilt under the same type name."""


def _rebuilt(kind: str, message: str) -> Exception:
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    builtin = getattr(builtins, kind, None) if kind.isidentifier() else None
    name = kind if isinstance(builtin, type) and issubclass(builtin, BaseException) else "Exception"
    return type(name, (_RemoteError,), {})(message)


def _decode(value):
    """The plain data the worker sent, as Python, numpy and torch values; AnswerError for an unreadable one."""
    if not isinstance(value, dict):
        return value
    if "array" in value:
        dtype = np.dtype(value["array"])
        if dtype.kind not in "biufc":
            raise AnswerError("the answer could not be read as numbers.")
        array = np.frombuffer(base64.b64decode(value["data"]), dtype=dtype).reshape(value["shape"]).copy()
        if value.get("torch"):
            return torch.from_numpy(array)
        return array[()] if value.get("scalar") else array
    if "text" in value:
        return np.array(value["text"], dtype=str).reshape(value["shape"])
    if "complex" in value:
        return complex(*value["complex"])
    if "tuple" in value:
        return tuple(_decode(item) for item in value["tuple"])
    if "list" in value:
        return [_decode(item) for item in value["list"]]
    if "dict" in value:
        return {key: _decode(item) for key, item in value["dict"]}
    kind = value.get("unreadable", "object")
    raise AnswerError(f"the answer is {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}, which the grader does not "
                      "read: return a numpy array, a torch tensor, a number, or a tuple of them, as the exercise asks.")


class _Worker:
    """One forked worker, used as :class:`subprocess.Popen` is: ``stdin``, ``stdout``, ``poll``, ``wait``, ``kill``.
    Its exit code comes from the zygote's monitor of it, which writes the worker's pid and then its exit code."""

    def __init__(self, input_fd: int, output_fd: int, status_fd: int):
        self.stdin = os.fdopen(input_fd, "wb")
        self.stdout = os.fdopen(output_fd, "rb", buffering=0)
        self.returncode: int | None = None
        self._status, self._lines = status_fd, b""
        pid = self._line(block=True)
        if not pid:
            self._finish(b"")
            self.stdin.close()
            self.stdout.close()
            raise OSError("the grader's zygote started no worker")
        self.pid = int(pid)

    def _line(self, block: bool) -> bytes | None:
        """The monitor's next line; b"" if it ended without one, None if none has come yet and ``block`` is False."""
        while b"\n" not in self._lines:
            if not block and not select.select([self._status], [], [], 0)[0]:
                return None
            chunk = os.read(self._status, 64)
            if not chunk:
                return b""
            self._lines += chunk
        line, self._lines = self._lines.split(b"\n", 1)
        return line

    def _finish(self, line: bytes) -> int:
        self.returncode = int(line) if line else -signal.SIGKILL  # no line: the monitor itself was killed
        os.close(self._status)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            line = self._line(block=False)
            if line is not None:
                self._finish(line)
        return self.returncode

    def wait(self) -> int:
        return self.returncode if self.returncode is not None else self._finish(self._line(block=True))

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class _Zygote:
    """``python -I -c <sandbox_worker> --zygote``, started inside the sandbox's confinement: it confines itself,
    imports ``modules`` once and forks a worker for each function."""

    def __init__(self, modules: frozenset[str], confinement: Confinement, seconds: float):
        self.modules = modules
        self.control, theirs = socket.socketpair()
        command = [*confinement.command, sys.executable, "-I", "-c", WORKER.read_text(), "--zygote",
                   str(theirs.fileno()), json.dumps(sorted(modules)), json.dumps(confinement.setup)]
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, env=_environment(), cwd="/",
                                            pass_fds=[theirs.fileno()], start_new_session=True)
        finally:
            theirs.close()
        reply = self._reply(seconds)
        if reply != b"ready":
            self.close()
            if reply.startswith(b"failed"):
                raise Unconfined(f"✗ The grader could not confine the process that runs submissions "
                                 f"({confinement.mode}: {reply[7:].decode(errors='replace')}); nothing was graded.")
            raise Stopped(f"✗ The grader could not start the process that runs submissions within {seconds:g} s.")

    def _reply(self, seconds: float) -> bytes:
        self.control.settimeout(seconds)
        try:
            reply = self.control.recv(1024)
        except OSError:
            reply = b""
        self.control.settimeout(None)
        return reply.strip()

    def fork(self) -> _Worker:
        pipes = [os.pipe() for _ in range(3)]  # the worker's input, its output, and its monitor's status lines
        try:
            socket.send_fds(self.control, [b"w"], [pipes[0][0], pipes[1][1], pipes[2][1]])
        except OSError:
            for read, write in pipes:
                os.close(read)
                os.close(write)
            raise
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
        return _Worker(pipes[0][1], pipes[1][0], pipes[2][0])

    def sweep(self, seconds: float = 10.0) -> bool:
        """Kill every process of the sandbox but the zygote; whether the zygote said it did."""
        try:
            self.control.sendall(b"k")
        except OSError:
            return False
        return self._reply(seconds) == b"swept"

    def close(self) -> None:
        self.control.close()
        if self.process.poll() is None:
            self.process.kill()  # unshare, whose --kill-child ends the namespace and every process in it
        self.process.wait()
        if self.process.pid:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)


def _environment() -> dict[str, str]:
    """What a submission's process sees of the environment: the CPU kernels' settings, one thread, and nothing of
    the grader's (no tokens, no paths)."""
    kept = ("PATH", "LANG", "LC_ALL", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE")
    environment = {key: os.environ[key] for key in kept if key in os.environ}
    return environment | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                          "TOKENIZERS_PARALLELISM": "false", "HOME": "/tmp", "TMPDIR": "/tmp"}


class Sandbox:
    """Where one submission's functions run: a confinement of their own (:mod:`~mha.exercises.grading.confinement`),
    a zygote inside it, and the submission's time budget. :meth:`sweep` at the end of each exercise kills whatever
    it left running; :meth:`close` ends them all. Use it as a context manager.

    ``protected``: the folders the submission may not read, as real paths. Raises
    :class:`~mha.exercises.grading.confinement.Unconfined` where no isolation is available (and not overridden)."""

    def __init__(self, protected: list[str], limits: Limits = Limits()):
        self.confinement = confinement.choose(protected)
        self.limits = limits
        self.deadline = time.monotonic() + limits.submission_seconds
        self._zygotes: dict[tuple[str, ...], _Zygote] = {}  # one per set of tools; () for the plain exercises
        self._tools: dict[tuple[str, ...], Confinement] = {}  # each set of tools' confinement, its folder inside
        self._lock = threading.Lock()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()

    def confinement_for(self, tools: tuple[str, ...] = ()) -> Confinement:
        """The confinement of the exercises that use ``tools`` (:data:`confinement` for none): made on first use,
        with a fresh copy of their modules that only its zygote may read (:func:`~.tools.copy_tools`)."""
        if not tools:
            return self.confinement
        if tools not in self._tools:
            folder = os.path.realpath(tempfile.mkdtemp(prefix="mha-tools-"))
            try:
                made = self.confinement.with_tools(folder)
                copy_tools(tools, Path(folder), made.setup.get("uid"))
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._tools[tools] = made
        return self._tools[tools]

    def tool_folders(self) -> list[str]:
        """The tool folders made so far (no plain exercise's process may read them)."""
        return [made.setup["tools"] for made in self._tools.values()]

    def worker(self, modules: list[str], tools: tuple[str, ...] = ()) -> _Worker:
        """A fresh worker forked from the zygote of ``tools`` (none: the plain exercises'), which is started again
        for modules it has not imported, or once more if it has died."""
        with self._lock:
            for attempt in range(2):
                zygote = self._zygotes.get(tools)
                if zygote is None or not set(modules) <= zygote.modules:
                    if zygote is not None:
                        zygote.close()
                    self._zygotes.pop(tools, None)  # so that a start that fails leaves none behind
                    zygote = _Zygote(frozenset(modules), self.confinement_for(tools), self.limits.seconds + 60.0)
                    self._zygotes[tools] = zygote
                try:
                    return zygote.fork()
                except OSError:
                    if attempt:
                        raise
                    zygote.close()
                    del self._zygotes[tools]

    def sweep(self, tools: tuple[str, ...] = ()) -> None:
        """End every process the last exercise (which used ``tools``) left: in the namespace, the zygote kills them
        (a zygote that does not answer is started afresh, its namespace gone with it); under ``uid``, the grader
        kills every process of the exercise's user, the zygote included, which starts afresh for the next
        exercise."""
        with self._lock:
            zygote = self._zygotes.get(tools)
            if zygote is None:
                return
            if self.confinement.mode == "uid":
                zygote.close()
                del self._zygotes[tools]
                self.confinement_for(tools).kill_everything()
            elif not zygote.sweep():
                zygote.close()
                del self._zygotes[tools]

    def close(self) -> None:
        with self._lock:
            for zygote in self._zygotes.values():
                zygote.close()
            self._zygotes.clear()
            for made in [self.confinement, *self._tools.values()]:
                made.kill_everything()
            for made in self._tools.values():
                shutil.rmtree(made.setup["tools"], ignore_errors=True)
            self._tools.clear()
            self.confinement.release()


class IsolatedFunction:
    """Stands in for the submission's ``name``: each call runs the real function in a separate process.

    ``setup`` is what that process runs first: ``(filename, source, names defined)`` for each cell, the
    submission's own definitions and allowed imports only; ``modules`` the modules it imports before that
    (those the submission's imports name); ``protected`` the folders it may not read (the grader's tests, the
    package); ``undefined`` says, for a name the submission reads but the grader does not define, why (a line it does
    not run); ``tools`` the book's modules it may use (a real-model exercise's, in a process of their own that
    alone may read a copy of them). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, name: str, setup: list, modules: list[str], protected: list[str], limits: Limits = Limits(),
                 undefined: dict[str, str] | None = None, sandbox: Sandbox | None = None, tools: tuple[str, ...] = ()):
        self.__name__ = name
        self.tools = tuple(sorted(set(tools)))
        self.limits = limits
        self.undefined = dict(undefined or {})
        self.calls = 0
        self.seconds_in_calls = 0.0  # the time spent waiting for the function's answers
        self._own = sandbox is None
        self.sandbox = Sandbox(protected, limits) if sandbox is None else sandbox
        self.deadline = min(time.monotonic() + limits.exercise_seconds, self.sandbox.deadline)
        self._buffer, self._closed = b"", False
        modules = [*modules, *(tool for tool in self.tools if tool not in modules)]
        try:
            self.process = self.sandbox.worker(modules, self.tools)
            others = [folder for folder in self.sandbox.tool_folders()
                      if folder != self.sandbox.confinement_for(self.tools).setup.get("tools")]
        except BaseException:
            if self._own:
                self.sandbox.close()
            raise
        request = {"setup": setup, "modules": modules, "protected": [*protected, *others],
                   "memory": limits.memory_bytes, "function": name, "tools": sorted(closure(self.tools))}
        reply = self._exchange(json.dumps(request), "while defining it")
        self.missing = None if reply.get("ready") else reply.get("missing", "not defined")

    def __enter__(self) -> IsolatedFunction:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """End the function's process, and every process it started (the sandbox's too, if it is this one's own)."""
        if self._closed:
            return
        self._closed = True
        if self._own:
            self.sandbox.close()  # its zygote, and with it every process it started
        elif self.sandbox.confinement.confined:
            self.sandbox.sweep(self.tools)  # the worker's pid is the namespace's: the zygote kills it there
        elif self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            pipe.close()

    def _exchange(self, line: str, when: str) -> dict:
        """Send one line, read one reply within the time limit: the call's, or what is left of the exercise's or the
        submission's budget, whichever ends first."""
        if self.process.poll() is None:
            try:
                self.process.stdin.write(line.encode() + b"\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                pass
        started = time.monotonic()
        deadline = min(started + self.limits.seconds, self.deadline)
        budget = deadline < started + self.limits.seconds
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    self.close()
                    if budget:
                        whose = ("the submission's" if self.deadline == self.sandbox.deadline else "this exercise's")
                        limit = (self.limits.submission_seconds if whose == "the submission's"
                                 else self.limits.exercise_seconds)
                        raise Stopped(f"✗ {self.__name__} used up {whose} time budget ({limit:g} s for all its calls) "
                                      f"{when}. Look for work that grows too fast with the input's size, or a "
                                      "sleep.")
                    raise Stopped(f"✗ {self.__name__} did not return within {self.limits.seconds:g} s {when}. Look for "
                                  "a loop that never ends, or work that grows too fast with the input's size.")
                chunk = os.read(self.process.stdout.fileno(), 1 << 20)
                if not chunk:
                    code = self.process.wait()
                    self.close()
                    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                    raise Stopped(f"✗ The process running {self.__name__} died ({how}) {when}: look for os._exit, a "
                                  f"crash in compiled code, or memory beyond the grader's "
                                  f"{self.limits.memory_words()}.")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.close()
            raise Stopped(f"✗ The process running {self.__name__} sent something the grader could not read {when}.")
        return reply

    def __call__(self, *args, **kwargs):
        self.calls += 1
        when = f"on its call number {self.calls}"
        started = time.monotonic()
        try:
            reply = self._exchange(base64.b64encode(pickle.dumps((args, kwargs))).decode(), when)
        finally:
            self.seconds_in_calls += time.monotonic() - started
        if reply.get("memory"):
            raise Stopped(f"✗ {self.__name__} ran out of memory {when}: the grader gives it "
                          f"{self.limits.memory_words()}. Look for an array that grows without end.")
        if "error" in reply and isinstance(reply.get("name"), str):
            raise UndefinedName(reply["name"], self.undefined.get(reply["name"]), str(reply.get("where", "")))
        if "error" in reply:
            raise _rebuilt(str(reply["error"]), f"{reply.get('message', '')}{reply.get('where', '')}")
        answer = _decode(reply.get("answer"))
        if answer is None and reply.get("printed"):
            raise AnswerError(f"{self.__name__} printed {reply['printed'][:80]!r} and returned None: the grader reads "
                              "what the function returns. End it with `return ...` instead of print(...).")
        return answer
