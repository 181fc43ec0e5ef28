"""The process a submitted function runs in at grading time (instructors' page, "Grading"): started by
:mod:`mha.exercises.grading.sandbox` as ``python -I -c <this file's text> --zygote``, never imported by the grader.

That process (:func:`serve`) first confines itself (:func:`confine`, the operating system's barrier of
:mod:`~mha.exercises.grading.confinement`): it builds the root it will see, read-only and without the grader's files,
and gives up every privilege, before any of the submission's code is read. Then it imports only what the
submissions' allowed imports name (numpy, torch, math...), never the book's package, and forks a fresh worker
(:func:`main`) for each function graded, so that each one starts with those imports done. The zygote of a real-model
exercise also sees its tool folder (a read-only copy of only the modules its check declares,
:mod:`~mha.exercises.grading.tools`), first on its path, and imports those modules from it before forking.

The worker also installs an audit hook that refuses to import ``mha`` (but the tool folder's modules) or ``otter``,
to open the grader's files or write any file, and to start or signal other processes. Code that finds the hook can
disable it, so the hook only makes the usual mistakes fail with a clear message; the confinement is what keeps the
grader safe. Under it, the
worker runs the submission's definitions, then answers calls: each request holds the inputs (pickled by the
grader), each reply the function's answer as plain data (JSON: numbers, text, arrays as bytes), so that no object of
the submission's reaches the grader and the expected answers never reach this process.
"""

import base64
import contextlib
import ctypes
import errno
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
PROCESSES = 64  # processes and threads a sandbox's user may have at once, beyond those it has when it starts
_MS = {"rdonly": 1, "nosuid": 2, "nodev": 4, "noexec": 8, "remount": 32, "bind": 4096, "rec": 16384,
       "private": 1 << 18, "relatime": 1 << 21}


def _mount(source, target, kind, flags, data=None):
    libc = ctypes.CDLL(None, use_errno=True)
    code = libc.mount(source and source.encode(), target.encode(), kind and kind.encode(), ctypes.c_ulong(flags),
                      data and data.encode())
    if code != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"mount {source} on {target}: {os.strerror(number)}")


def _bind_read_only(source, target):
    """Bind ``source`` on ``target``, read-only, keeping the flags the kernel locks (nosuid, nodev, noexec)."""
    try:
        _mount(source, target, None, _MS["bind"])
    except OSError as error:  # a folder with mounts the namespace may not uncover: take them along
        if error.errno != errno.EINVAL:
            raise
        _mount(source, target, None, _MS["bind"] | _MS["rec"])
    kept = os.statvfs(target).f_flag & (1 | 2 | 4 | 8 | 1024 | 2048)
    kept |= _MS["relatime"] if os.statvfs(target).f_flag & 4096 else 0
    _mount(None, target, None, _MS["bind"] | _MS["remount"] | _MS["rdonly"] | kept)


def _place(path, root):
    """Make ``path`` (a folder, a file or a link) in the new ``root``; whether it must be bound there."""
    target = root + path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(path) and os.path.dirname(path) == "/":  # /bin -> usr/bin: the same link
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return False
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        open(target, "w").close()
    return True


def _drop_privileges(uid):
    """Become ``uid`` (as root) and give up every capability, for good (no_new_privs: no setuid program restores
    any)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    nothing = (ctypes.c_uint32 * 6)()
    if libc.capset(header, nothing) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "no_new_privs")


def confine(setup):
    """Before any submission is read: build the namespace's root (``setup["mode"] == "namespaces"``) or take the
    sandbox's user id (``"uid"``), then give up every privilege. See :mod:`mha.exercises.grading.confinement`."""
    if setup.get("mode") == "namespaces":
        root = setup["root"]
        _mount(None, "/", None, _MS["rec"] | _MS["private"])
        _mount("tmpfs", root, "tmpfs", _MS["nosuid"] | _MS["nodev"], "mode=0755,size=16m")
        os.makedirs(root + "/tmp", mode=0o1777, exist_ok=True)  # the scratch first: a Python under /tmp binds on it
        _mount("tmpfs", root + "/tmp", "tmpfs", _MS["nosuid"] | _MS["nodev"],
               f"mode=1777,size={int(setup.get('scratch_mb', 64))}m")
        for path in setup["binds"]:
            if _place(path, root):
                _bind_read_only(path, root + path)
        for path in setup["protected"]:  # covered by an empty, read-only folder wherever a bind shows it
            if os.path.isdir(root + path):
                _mount("tmpfs", root + path, "tmpfs", _MS["rdonly"] | _MS["nosuid"] | _MS["nodev"], "mode=000,size=4k")
        if setup.get("tools") and _place(setup["tools"], root):  # a real-model exercise's copy of its modules
            _bind_read_only(setup["tools"], root + setup["tools"])
        os.makedirs(root + "/dev", exist_ok=True)
        for device in ("null", "zero", "random", "urandom"):
            open(f"{root}/dev/{device}", "w").close()
            _mount(f"/dev/{device}", f"{root}/dev/{device}", None, _MS["bind"])
        os.makedirs(root + "/proc", exist_ok=True)
        try:
            _mount("proc", root + "/proc", "proc", _MS["nosuid"] | _MS["nodev"] | _MS["noexec"])
        except OSError:
            pass  # a container that hides parts of /proc: the memory limit then counts from zero
        _mount(None, root, None, _MS["bind"] | _MS["remount"] | _MS["rdonly"] | _MS["nosuid"] | _MS["nodev"])
        os.chroot(root)
        os.chdir("/tmp")
        _drop_privileges(setup.get("uid"))
    elif setup.get("mode") == "uid":
        os.chdir("/")
        _drop_privileges(setup["uid"])
    else:
        return
    for key in [key for key in sys.path_importer_cache]:
        del sys.path_importer_cache[key]
    sys.path[:] = [path for path in sys.path if os.path.isdir(path)]
    import importlib

    importlib.invalidate_caches()
    running = len(os.listdir("/proc")) if os.path.isdir("/proc/self") else 0
    resource.setrlimit(resource.RLIMIT_NPROC, (running + PROCESSES, running + PROCESSES))


def _refuse(protected, tools=frozenset()):
    """The audit hook: ``protected`` folders are not read, and of the book's package only ``tools`` (the modules of
    a real-model exercise's tool folder) are imported."""
    def hook(event, args, tools=tools):
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"the grader does not let a submission call {event}")
        if event == "import" and args[0].split(".")[0] in BLOCKED_MODULES and args[0] not in tools:
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
    """Run the submission's imports, constants and definitions, one statement at a time, so that one that fails (a
    constant read from a file the grader does not have) costs only the names it binds; the problems met, by name."""
    import ast

    problems = {}
    for filename, source, names in setup:
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        try:
            statements = ast.parse(source, filename).body
        except BaseException as error:
            problems.update({name: f"{type(error).__name__}: {error}"[:500] for name in names})
            continue
        for statement in statements:
            try:
                exec(compile(ast.Module([statement], type_ignores=[]), filename, "exec"), namespace)
            except BaseException as error:  # a definition that fails costs only the names it binds
                bound = [target.id for target in ast.walk(statement) if isinstance(target, ast.Name)
                         and isinstance(target.ctx, ast.Store)] + [getattr(statement, "name", "")]
                problems.update({name: f"{type(error).__name__}: {error}{_where(error)}"[:500]
                                 for name in bound if name})
    return problems


def _import(modules):
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _warm():
    """Where a real-model exercise imported the pretrained encoder, load it (and its tokenizer) once, in the zygote:
    each worker then finds it cached when a call's arguments, pickled as ``MiniLMEncoder.load()``, ask for it."""
    module = sys.modules.get("mha.pretrained.encoder")
    if module is not None:
        with contextlib.suppress(Exception):
            module.MiniLMEncoder.load()
            module.load_wordpieces()


def main():
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what the submission writes to fd 1 goes nowhere
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.stdout = io.StringIO()
    request = json.loads(sys.stdin.readline())
    _import(request["modules"])
    sys.addaudithook(_refuse([os.path.realpath(folder) for folder in request["protected"]],
                             frozenset(request.get("tools", ()))))
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


def serve(control_fd: int, modules: list[str], setup: dict) -> None:
    """The zygote: confine itself (:func:`confine`), import ``modules``, then fork a worker for each request on the
    control socket (a Unix socket to the grader), whose three file descriptors are the worker's input, its output and
    where its exit code goes. A request ``k`` kills every other process of the sandbox (the end of an exercise)."""
    control = socket.socket(fileno=control_fd)
    try:
        confine(setup)
    except OSError as error:
        control.sendall(f"failed {error}"[:900].encode() + b"\n")
        os._exit(1)
    if setup.get("tools"):  # a real-model exercise: its tool folder's modules come first, before any installed mha
        sys.path.insert(0, setup["tools"])
    _import(modules)
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps the monitors
    control.sendall(b"ready\n")
    while True:
        message, fds, _, _ = socket.recv_fds(control, 16, 3)
        if not message:
            os._exit(0)  # the grader has gone
        if message == b"k":
            if setup.get("mode") in ("namespaces", "uid"):  # every process this user may signal but the zygote
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)
            control.sendall(b"swept\n")
            continue
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
        serve(int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4]) if len(sys.argv) > 4 else {})
    else:
        main()
