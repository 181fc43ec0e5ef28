"""The process a submitted function runs in at grading time (instructors' page, "Grading"): started by
:mod:`mha.exercises.grading.sandbox` as ``python -I sandbox_worker.py --zygote``, never imported by the grader itself.

That process (:func:`serve`) imports only what the submissions' allowed imports name (numpy, torch, math...), never
the book's package, and forks a fresh worker (:func:`main`) for each function graded, so that each one starts with
those imports done instead of repeating them. The worker installs an audit hook (which Python code cannot remove)
that refuses to import ``mha`` or ``otter``, to open the grader's files or write any file, and to start or signal
other processes. Under that hook it runs the submission's definitions, then answers calls: each request holds the
inputs (pickled by the grader), each reply the function's answer as plain data (JSON: numbers, text, arrays as
bytes), so that no object of the submission's reaches the grader and the expected answers never reach this process.
"""

import base64
import contextlib
import io
import json
import linecache
import os
import pickle
import resource
import signal
import socket
import sys
import traceback

BLOCKED_EVENTS = {"os.kill", "os.killpg", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                  "os.forkpty", "subprocess.Popen", "socket.connect", "socket.bind", "os.remove", "os.rename",
                  "os.rmdir", "os.truncate", "os.chmod", "shutil.rmtree", "ctypes.dlopen", "ctypes.dlsym",
                  "ctypes.cdata", "pty.spawn"}
BLOCKED_MODULES = ("mha", "otter")
MAX_ITEMS = 10_000


def _refuse(protected):
    def hook(event, args):
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"the grader does not let a submission call {event}")
        if event == "import" and args[0].split(".")[0] in BLOCKED_MODULES:
            raise PermissionError(f"the grader runs your function without the book's package: `import {args[0]}` "
                                  "is not allowed; write the computation yourself with numpy or torch")
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            if any(flag in mode for flag in "wax+"):
                raise PermissionError("the grader does not let a submission write files")
            if any(path == folder or path.startswith(folder + os.sep) for folder in protected):
                raise PermissionError("the grader's own files are not readable from a submission")
        if event in ("os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if any(path == folder or path.startswith(folder + os.sep) for folder in protected):
                raise PermissionError("the grader's own files are not readable from a submission")
    return hook


def _plain(value, depth=0):
    """The answer as JSON-ready plain data; {"unreadable": type} for anything else."""
    import numpy as np

    torch = sys.modules.get("torch")
    if depth > 4:
        return {"unreadable": "deeply nested " + type(value).__name__}
    if value is None or type(value) in (bool, int, float, str):
        return value if not isinstance(value, str) else value[:MAX_ITEMS]
    if type(value) is complex:
        return {"complex": [value.real, value.imag]}
    tensor = torch is not None and isinstance(value, torch.Tensor)
    if tensor:
        try:
            value = value.detach().cpu().resolve_conj().resolve_neg().numpy()
        except Exception:
            return {"unreadable": type(value).__name__}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if type(array) is not np.ndarray:
            array = np.array(array, copy=True).view(np.ndarray)
        if array.dtype.kind in "biufc":
            array = np.ascontiguousarray(array)
            return {"array": array.dtype.str, "shape": list(array.shape), "torch": tensor,
                    "scalar": isinstance(value, np.generic), "data": base64.b64encode(array.tobytes()).decode()}
        if array.dtype.kind in "US" and array.size <= MAX_ITEMS:
            return {"text": [str(item) for item in array.ravel().tolist()], "shape": list(array.shape)}
        return {"unreadable": f"numpy array of dtype {array.dtype}"}
    if type(value) in (tuple, list) and len(value) <= MAX_ITEMS:
        return {type(value).__name__: [_plain(item, depth + 1) for item in value]}
    if type(value) is dict and len(value) <= MAX_ITEMS:
        return {"dict": [[str(key)[:100], _plain(item, depth + 1)] for key, item in value.items()]}
    return {"unreadable": type(value).__name__}


def _where(error):
    """' (line 3: return 1 / 0)' for the last line of the submission's cells in the traceback, or ''."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename.startswith("<cell")]
    if not frames:
        return ""
    text = f": {frames[-1].line.strip()}" if frames[-1].line else ""
    return f" (line {frames[-1].lineno} of your cell{text})"


def _define(setup, namespace):
    """Run the submission's imports and definitions; the problems met, by the names they concern."""
    problems = {}
    for filename, source, names in setup:
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        try:
            exec(compile(source, filename, "exec"), namespace)
        except BaseException as error:  # a definition that fails costs only the functions it defines
            problems.update({name: f"{type(error).__name__}: {error}{_where(error)}"[:500] for name in names})
    return problems


def _import(modules):
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def main():
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what the submission writes to fd 1 goes nowhere
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.stdout = io.StringIO()
    request = json.loads(sys.stdin.readline())
    _import(request["modules"])
    sys.addaudithook(_refuse([os.path.realpath(folder) for folder in request["protected"]]))
    pages = int(open("/proc/self/statm").read().split()[0]) if os.path.exists("/proc/self/statm") else 0
    limit = pages * os.sysconf("SC_PAGE_SIZE") + request["memory"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    namespace = {"__name__": "__submission__"}
    problems = _define(request["setup"], namespace)
    function = namespace.get(request["function"])
    reply = {"ready": True} if callable(function) else {
        "missing": problems.get(request["function"], "not defined"), "kind": type(function).__name__}
    channel.write(json.dumps(reply) + "\n")
    channel.flush()
    for line in sys.stdin:
        args, kwargs = pickle.loads(base64.b64decode(line))
        printed = sys.stdout = io.StringIO()
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                answer = {"answer": _plain(function(*args, **kwargs))}
        except MemoryError:
            answer = {"memory": True}
        except BaseException as error:  # the learner's exception, SystemExit included, is feedback
            answer = {"error": type(error).__name__, "message": str(error)[:500], "where": _where(error)}
            missing = getattr(error, "name", None) if isinstance(error, NameError) else None
            if isinstance(missing, str) and not isinstance(error, UnboundLocalError):
                answer["name"] = missing[:200]  # the grader says why that name is missing here
        answer["printed"] = printed.getvalue()[:300]
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError, OverflowError):
            text = json.dumps({"answer": {"unreadable": "value"}, "printed": ""})
        channel.write(text + "\n")
        channel.flush()


def serve(control_fd: int, modules: list[str]) -> None:
    """The zygote: import ``modules``, then fork a worker for each request on the control socket (a Unix socket to
    the grader), whose three file descriptors are the worker's input, its output and where its exit code goes."""
    _import(modules)
    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps the monitors
    control.sendall(b"ready\n")
    while True:
        message, fds, _, _ = socket.recv_fds(control, 16, 3)
        if not message:
            os._exit(0)  # the grader has gone
        if len(fds) == 3 and os.fork() == 0:
            try:
                control.close()
                _monitor(*fds)
            finally:
                os._exit(0)  # never back into the zygote's loop
        for fd in fds:
            os.close(fd)


def _monitor(input_fd: int, output_fd: int, status_fd: int) -> None:
    """Fork the worker on ``input_fd`` and ``output_fd``; write its pid, then its exit code as subprocess gives it
    (minus the signal's number when killed), each on a line of ``status_fd``."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(status_fd)
            os.dup2(input_fd, 0)
            os.dup2(output_fd, 1)
            os.close(input_fd)
            os.close(output_fd)
            main()
            code = 0
        finally:
            os._exit(code)
    os.close(input_fd)
    os.close(output_fd)
    os.write(status_fd, f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(status_fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        serve(int(sys.argv[2]), json.loads(sys.argv[3]))
    else:
        main()
