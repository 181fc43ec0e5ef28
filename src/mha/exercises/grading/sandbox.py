"""A submitted function run in a process of its own, for grading (instructors' page, "Grading").

:class:`IsolatedFunction` runs the function in a fresh process, forked from a plain Python (``python -I``, not the
student's kernel) running :mod:`~mha.exercises.grading.sandbox_worker` that has imported the submission's modules
once for every function graded. It hands that process the submission's definitions and stands in for the function:
calling it sends the inputs to that process and reads back the answer as plain data (numbers, text, arrays), so the
book's checks run unchanged in the grader, with the expected answers computed here and never sent. The process has a
time limit for each call and a memory limit (:class:`Limits`); when it hangs, dies or runs out of memory the check
ends with :class:`Stopped`, whose message says so.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import pickle
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..checking import AnswerError
from ..learner_errors import UndefinedName

__all__ = ["IsolatedFunction", "Limits", "Stopped", "WORKER"]

WORKER = Path(__file__).with_name("sandbox_worker.py")


@dataclass(frozen=True)
class Limits:
    """How long one call of a submitted function may take, and how much memory it may take beyond numpy and torch."""

    seconds: float = 60.0
    memory_bytes: int = 2 * 1024**3

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
    name = kind if kind.isidentifier() else "Exception"
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
    """``python -I sandbox_worker.py --zygote``: it imports ``modules`` once and forks a worker for each function."""

    def __init__(self, modules: frozenset[str], environment: dict[str, str], seconds: float):
        self.modules, self.environment = modules, environment
        self.control, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", str(WORKER), "--zygote", str(theirs.fileno()), json.dumps(sorted(modules))],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
                cwd="/tmp" if os.path.isdir("/tmp") else None, pass_fds=[theirs.fileno()])
        finally:
            theirs.close()
        self.control.settimeout(seconds)
        try:
            ready = self.control.recv(16)
        except OSError:
            ready = b""
        self.control.settimeout(None)
        if ready != b"ready\n":
            self.close()
            raise Stopped(f"✗ The grader could not start the process that runs submissions within {seconds:g} s.")

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

    def close(self) -> None:
        self.control.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _worker(modules: list[str], seconds: float) -> _Worker:
    """A fresh worker forked from the zygote, which is started again for modules it has not imported (or a changed
    environment), or once more if it has died."""
    global _zygote
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "OTTER"))}
    environment |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    with _zygote_lock:
        for attempt in range(2):
            if _zygote is None or not set(modules) <= _zygote.modules or _zygote.environment != environment:
                if _zygote is not None:
                    _zygote.close()
                _zygote = None  # so that a start that fails leaves none behind
                _zygote = _Zygote(frozenset(modules), environment, seconds)
            try:
                return _zygote.fork()
            except OSError:
                if attempt:
                    raise
                _zygote.close()
                _zygote = None


@atexit.register
def _close_zygote() -> None:
    if _zygote is not None:
        _zygote.close()


class IsolatedFunction:
    """Stands in for the submission's ``name``: each call runs the real function in a separate process.

    ``setup`` is what that process runs first: ``(filename, source, names defined)`` for each cell, the
    submission's own definitions and allowed imports only; ``modules`` the modules it imports before that
    (those the submission's imports name); ``protected`` the folders it may not read (the grader's tests, the
    package); ``undefined`` says, for a name the submission reads but the grader does not define, why (a line it does
    not run). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, name: str, setup: list, modules: list[str], protected: list[str], limits: Limits = Limits(),
                 undefined: dict[str, str] | None = None):
        self.__name__ = name
        self.limits = limits
        self.undefined = dict(undefined or {})
        self.calls = 0
        self.process = _worker(modules, limits.seconds + 60.0)
        self._buffer = b""
        request = {"setup": setup, "modules": modules, "protected": protected, "memory": limits.memory_bytes,
                   "function": name}
        reply = self._exchange(json.dumps(request), "while defining it", startup=True)
        self.missing = None if reply.get("ready") else reply.get("missing", "not defined")

    def __enter__(self) -> IsolatedFunction:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            pipe.close()

    def _exchange(self, line: str, when: str, startup: bool = False) -> dict:
        """Send one line, read one reply within the time limit (a minute more while starting, which runs the
        submission's definitions)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.write(line.encode() + b"\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                pass
        limit = self.limits.seconds + (60.0 if startup else 0.0)
        deadline = time.monotonic() + limit
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    self.close()
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
        reply = self._exchange(base64.b64encode(pickle.dumps((args, kwargs))).decode(), when)
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
