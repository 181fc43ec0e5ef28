"""Where a submission's code runs: kept from the grader by the operating system (instructors' page, "Grading").

The grader never relies on the submission's own process to police itself. :func:`choose` picks the strongest
separation this machine offers, and :mod:`~mha.exercises.grading.sandbox_worker` sets it up before any of the
submission's code is read:

- ``namespaces`` (Linux with ``unshare``, as any user): new user, mount, pid, network, IPC and UTS namespaces. The
  process sees a root of its own made of read-only views of the system's folders and of Python's, with the book's
  package, otter and every folder the grader names (its tests, its configuration, the other submissions) covered by
  empty ones; a small scratch ``/tmp`` it may write; no network; no capability left. When the grader is root, it also
  runs as an unprivileged user id of its own. Ending the namespace's first process kills every process in it;
- ``uid`` (root without namespaces, as in some containers): the code runs as an unprivileged user id of its own, and
  the folders the grader names are made unreadable to other users (``chmod o-rwx``) first. Whatever else on the
  machine other users may read stays readable (a copy of the autograders elsewhere, say), so keep those private;
- ``none`` (no isolation to be had: macOS, or Linux with user namespaces turned off): grading untrusted submissions
  is refused, unless the instructor says otherwise (:data:`UNCONFINED_VARIABLE`), with a warning.

Every mode limits the processes a submission may start, and at the end of each exercise kills every process the
exercise left behind.

A real-model exercise, whose check declares tools (:mod:`~mha.exercises.grading.tools`), runs in a confinement of
its own (:meth:`Confinement.with_tools`): the same, with a read-only copy of only the modules it declares (and what
they import) bound into its root and first on its path, and, where the grader is root, a user id of its own that
alone may read that copy. The package's own folder stays covered, or unreadable, for every exercise.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import pathlib
import shutil
import signal
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
from dataclasses import dataclass, field

__all__ = ["Confinement", "MODES", "Unconfined", "UNCONFINED_VARIABLE", "MODE_VARIABLE", "choose"]

MODES = ("namespaces", "uid", "none")
MODE_VARIABLE = "MHA_GRADING_CONFINEMENT"
"""Set to one of :data:`MODES` to choose the mode instead of the strongest available (for testing each mode)."""
UNCONFINED_VARIABLE = "MHA_GRADING_UNCONFINED"
"""Set to 1 to grade where no isolation is available, with the submission's code running as the grader's user."""
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt/conda")
UNPRIVILEGED_IDS = 200_000  # the first user id handed to a submission in ``uid`` mode, one per sandbox from here
_NEXT_ID = itertools.count()
_ID_LOCK = threading.Lock()


class Unconfined(RuntimeError):
    """No isolation is available here, and the instructor has not accepted grading without it."""


@dataclass(frozen=True)
class Confinement:
    """How one sandbox keeps a submission from the grader: its ``mode`` and what it needs to set it up."""

    mode: str
    why: str  # in words: what this mode does, or why nothing stronger is available
    command: tuple[str, ...] = ()  # what runs the zygote's interpreter inside the namespaces
    setup: dict = field(default_factory=dict)  # what the zygote sets up before reading any submission

    @property
    def confined(self) -> bool:
        return self.mode != "none"

    def kill_everything(self) -> None:
        """``uid`` mode: kill every process of the sandbox's user, wherever it went (a detached one too), from a
        child of the grader that takes that user id (a signal to -1 reaches every process of its user, in one pass
        of the kernel). Namespaces need none of this: the namespace's first process takes all the others with it."""
        uid = self.setup.get("uid")
        if self.mode != "uid" or not isinstance(uid, int) or not UNPRIVILEGED_IDS <= uid < UNPRIVILEGED_IDS * 10:
            return  # only a user id this module handed out: never root's, never a person's
        for _ in range(2):  # a second pass for any process forked while the first was delivered
            pid = os.fork()
            if pid == 0:
                try:
                    os.setgroups([])
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)

    def with_tools(self, folder: str) -> Confinement:
        """The confinement of the zygote that grades a real-model exercise: this one, with ``folder`` (its tool
        folder, :func:`~mha.exercises.grading.tools.copy_tools`) bound read-only in its root at the same path and
        first on its ``sys.path``, and a user id of its own where this one has one (the only id that may read
        ``folder``). :meth:`release` stays this one's."""
        uid = _new_id() if self.setup.get("uid") is not None else None
        return dataclasses.replace(self, why=f"{self.why}; with a read-only copy of the modules its check declares",
                                   setup=self.setup | {"tools": folder, "uid": uid})

    def release(self) -> None:
        """Remove what :func:`choose` made for this confinement (the empty folder the namespace's root is built on)."""
        root = self.setup.get("root")
        if root:
            try:
                os.rmdir(root)
            except OSError:
                pass


def _unshare(as_root: bool) -> tuple[str, ...]:
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    common = ("--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child=SIGKILL")
    if as_root:  # the zygote drops to an unprivileged user id itself once its root is built
        return (unshare, *common)
    return (unshare, "--user", "--map-user=65534", "--map-group=65534", "--keep-caps", *common)


@functools.cache
def _namespaces_work(as_root: bool) -> str | None:
    """None if ``unshare`` can make the namespaces here; otherwise what it said."""
    command = _unshare(as_root)
    if not os.path.exists(command[0]):
        return "util-linux's unshare is not installed"
    try:
        done = subprocess.run([*command, sys.executable, "-I", "-c", "pass"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare could not run ({error})"
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["unshare failed"])[-1]


def _python_folders() -> list[str]:
    """The folders the submission's Python needs: its prefixes and site-packages (never the grader's working folder
    or the book's source, which ``sys.path`` may also name)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platlib"], sysconfig.get_paths()["purelib"],
             os.path.dirname(os.path.realpath(sys.executable))}
    return sorted({os.path.realpath(path) for path in paths if os.path.isdir(path)})


def _new_id() -> int:
    with _ID_LOCK:
        return UNPRIVILEGED_IDS + (os.getpid() * 97 + next(_NEXT_ID)) % 1_000_000


def choose(protected: list[str]) -> Confinement:
    """The strongest confinement this machine offers for a sandbox whose submission may not read ``protected``
    (folders, as real paths), or the mode :data:`MODE_VARIABLE` names. Raises :class:`Unconfined` where there is none
    and :data:`UNCONFINED_VARIABLE` is not set."""
    if not isinstance(protected, (list, tuple)) or not all(isinstance(path, str) and os.path.isabs(path)
                                                          for path in protected):
        raise TypeError(f"protected must be a list of absolute paths (str), got {type(protected).__name__}: pass "
                        "mha.exercises.grading.protected_folders(...)")
    wanted = os.environ.get(MODE_VARIABLE, "")
    if wanted and wanted not in MODES:
        raise ValueError(f"{MODE_VARIABLE}={wanted!r}: use one of {', '.join(MODES)}, or unset it for the strongest "
                         "available")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    problem = "this is not Linux" if not sys.platform.startswith("linux") else None
    if wanted in ("", "namespaces") and problem is None:
        problem = _namespaces_work(as_root)
        if problem is None:
            setup = {"mode": "namespaces", "root": tempfile.mkdtemp(prefix="mha-sandbox-root-"),
                     "binds": [path for path in (*SYSTEM_FOLDERS, *_python_folders()) if os.path.lexists(path)],
                     "protected": protected, "uid": _new_id() if as_root else None, "scratch_mb": 64}
            return Confinement("namespaces", "its own user, mount, pid and network namespaces, with read-only system "
                               "and Python folders, the grader's files absent, and no network",
                               _unshare(as_root), setup)
        if wanted == "namespaces":
            raise Unconfined(f"{MODE_VARIABLE}=namespaces, but namespaces are not available here: {problem}")
    if wanted in ("", "uid") and as_root:
        _hide_from_others(protected)
        _open_to_others(_python_folders())
        return Confinement("uid", f"an unprivileged user id of its own, with {len(protected)} grader folders made "
                           "unreadable to other users", (), {"mode": "uid", "uid": _new_id()})
    if wanted == "uid":
        raise Unconfined(f"{MODE_VARIABLE}=uid needs the grader to run as root, and it runs as user {os.geteuid()}")
    why = (f"no isolation is available here ({problem or 'namespaces were not asked for'}; the grader is not root, "
           "so it cannot run the code as another user)")
    if os.environ.get(UNCONFINED_VARIABLE) != "1" and wanted != "none":
        raise Unconfined(
            f"✗ Refusing to grade: {why}. A submission's code would run as you, able to read the grader's files and "
            "change any file you can. Grade on Linux with user namespaces (util-linux's unshare; most distributions "
            f"allow them), or as root (Gradescope, a course server); or, for submissions you trust, set "
            f"{UNCONFINED_VARIABLE}=1 (grade_all: --unconfined) to grade without isolation.")
    warnings.warn(f"grading without isolation: {why}. Only the audit hook inside the submission's own process stands "
                  "between it and your files.", stacklevel=2)
    return Confinement("none", why, (), {"mode": "none"})


def _hide_from_others(protected: list[str]) -> None:
    """``chmod o-rwx`` each protected folder that other users could read or enter (``uid`` mode, as root): never the
    root folder, a system folder or one that holds Python, which the sandbox's user needs."""
    needed = {*SYSTEM_FOLDERS, *_python_folders()}
    for path in protected:
        path = os.path.realpath(path)
        if path == "/" or any(folder == path or folder.startswith(path.rstrip("/") + "/") for folder in needed):
            continue
        try:
            mode = os.stat(path).st_mode
            if mode & stat.S_IRWXO:
                os.chmod(path, mode & ~stat.S_IRWXO)
        except OSError:
            pass


def _open_to_others(folders: list[str]) -> None:
    """Let other users pass through (``chmod o+x``, not list) each folder above Python's (``uid`` mode, as root):
    a Python installed under /root, as in some grading images, is otherwise out of the sandbox's reach."""
    for folder in folders:
        for above in [folder, *map(str, pathlib.Path(folder).parents)]:
            try:
                mode = os.stat(above).st_mode
                if not mode & stat.S_IXOTH:
                    os.chmod(above, mode | stat.S_IXOTH)
                    print(f"grading: let other users pass through {above} (chmod o+x), so that the sandbox's user "
                          "can run Python", file=sys.stderr)
            except OSError:
                pass








