"""No test bounds the wall-clock time of real work under 10 s: on a shared, loaded CI machine such a bound fails a
correct run. A refusal "at once" is shown by the work it skips (a spy on the expensive call, a counter that stays at
0), a hang by a limit of 10 s or more (or of CPU time), and a timing belongs to a benchmark (``scripts/bench_*.py``).

The scan reads every ``tests/**/*.py`` and flags, under :data:`FLOOR_SECONDS`:

* an upper bound on a time: ``<``, ``<=`` (or ``>``, ``>=`` the other way round) between a number and a reading of
  ``time.perf_counter``, ``monotonic``, ``time`` or ``process_time``, a variable assigned from one (``start``,
  ``elapsed = time.perf_counter() - start``), or a name, attribute or key that says ``elapsed``, ``seconds`` or
  ``duration``;
* a deadline set that close: ``time.monotonic() + 5``;
* a limit handed to the code: a keyword, a dict key or a parameter's default named ``timeout`` or ``seconds`` (or
  ``per_case_seconds``...), in milliseconds for Playwright's ``goto``, ``wait_for*`` and ``click``; and a
  hypothesis ``settings`` whose deadline is not None.

Numbers are folded through the module's own constants (``5 * SECONDS`` with ``SECONDS = 1000``). A line that tests a
limit itself, with an input that runs for ever, keeps its bound with the marker ``# limit under test: <why>``.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FLOOR_SECONDS = 10
MARKER = "# limit under test:"
CLOCKS = {"perf_counter", "monotonic", "time", "process_time"}
TIMING_WORDS = re.compile(r"elapsed|seconds|duration", re.IGNORECASE)
LIMIT_NAMES = re.compile(r"timeout|seconds", re.IGNORECASE)
PLAYWRIGHT_MS = re.compile(r"goto$|wait_for|click$")
FIX = ("show the work instead (a spy on the expensive call, a counter), or bound a hang at 10 s or more (or in CPU "
       "time), or move the timing to a benchmark; a limit the test is about, met by an input that runs for ever, "
       f"may keep its line with '{MARKER} <why>'")
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _number(node: ast.AST, constants: dict[str, float]) -> float | None:
    """The value of a number written with literals, + - * /, and the module's numeric constants; else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand, constants)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _number(node.left, constants), _number(node.right, constants)
        if left is not None and right not in (None, 0):
            return _ARITHMETIC[type(node.op)](left, right)
    return None


def _dotted(node: ast.AST) -> str:
    """``time.monotonic`` for the attribute ``time.monotonic``, ``monotonic`` for the name; else ""."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


class _Scan:
    """One module's offences: ``found`` holds ``(line, what)`` for each."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST]):
        self.clock_calls = {f"time.{name}" for name in CLOCKS} | {
            alias.asname or alias.name for node in nodes if isinstance(node, ast.ImportFrom)
            and node.module == "time" for alias in node.names if alias.name in CLOCKS}
        self.constants: dict[str, float] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = _number(node.value, self.constants)
                if value is not None:
                    self.constants[node.targets[0].id] = value
        self.clock_names: set[str] = set()
        self._add_names_set_from_clocks(nodes)
        self.found: list[tuple[int, str]] = []

    def _reads_clock(self, node: ast.AST) -> bool:
        """Whether ``node`` calls a clock or reads a name set from one."""
        return any(isinstance(sub, ast.Call) and _dotted(sub.func) in self.clock_calls
                   or isinstance(sub, ast.Name) and sub.id in self.clock_names for sub in ast.walk(node))

    def _add_names_set_from_clocks(self, nodes: list[ast.AST]) -> None:
        """Names assigned a clock reading, or an expression of them (``start``, ``elapsed``, ``deadline``)."""
        assignments = [(target.id, node.value) for node in nodes if isinstance(node, ast.Assign)
                       for target in node.targets if isinstance(target, ast.Name)]
        more = {name for name, value in assignments if self._reads_clock(value)}
        while more - self.clock_names:
            self.clock_names |= more
            more = {name for name, value in assignments if self._reads_clock(value)}

    def _timing(self, node: ast.AST) -> bool:
        """Whether ``node`` is a time: it reads a clock, or a name, attribute or key in it says so."""
        words = [sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute)
                 else sub.value if isinstance(sub, ast.Constant) and isinstance(sub.value, str) else ""
                 for sub in ast.walk(node)]
        return self._reads_clock(node) or any(TIMING_WORDS.search(word) for word in words)

    def _short(self, node: ast.AST, scale: float = 1.0) -> float | None:
        """The bound ``node`` writes, in seconds, if it is a number under the floor."""
        value = _number(node, self.constants)
        return value / scale if value is not None and value / scale < FLOOR_SECONDS else None

    def compare(self, node: ast.Compare) -> None:
        """An upper bound on a time, ``time < bound`` or ``bound > time``; a busy machine cannot break a lower one."""
        sides = [node.left, *node.comparators]
        for left, op, right in zip(sides, node.ops, sides[1:], strict=False):
            if isinstance(op, (ast.Lt, ast.LtE)):
                time, bound = left, right
            elif isinstance(op, (ast.Gt, ast.GtE)):
                time, bound = right, left
            else:
                continue
            if self._timing(time) and not self._reads_clock(bound) and self._short(bound) is not None:
                self.found.append((node.lineno, f"a time bounded by {ast.unparse(bound)} s"))

    def deadline(self, node: ast.BinOp) -> None:
        """A clock reading plus a short span: a deadline that a busy machine reaches before the work is done."""
        if isinstance(node.op, ast.Add) and self._reads_clock(node.left) and self._short(node.right) is not None:
            self.found.append((node.lineno, f"a deadline {ast.unparse(node.right)} s ahead"))

    def call(self, node: ast.Call) -> None:
        """A short ``timeout=`` or ``seconds=`` handed to a call, and hypothesis's settings without deadline=None."""
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ast.unparse(node.func)
        scale = 1000.0 if PLAYWRIGHT_MS.match(name) else 1.0
        for keyword in node.keywords:
            if LIMIT_NAMES.search(keyword.arg or "") and self._short(keyword.value, scale) is not None:
                self.found.append((node.lineno, f"{keyword.arg}={ast.unparse(keyword.value)} in {name}()"))
        deadline = next((keyword.value for keyword in node.keywords if keyword.arg == "deadline"), None)
        if name in ("settings", "register_profile") and not (isinstance(deadline, ast.Constant)
                                                             and deadline.value is None):
            self.found.append((node.lineno, "hypothesis's deadline (200 ms of wall clock unless deadline=None)"))

    def dictionary(self, node: ast.Dict) -> None:
        """A short limit in a configuration: ``{"seconds": 3}``."""
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and LIMIT_NAMES.search(str(key.value)) and self._short(value) is not None:
                self.found.append((node.lineno, f"the limit {key.value!r} = {ast.unparse(value)}"))

    def defaults(self, node: ast.arguments) -> None:
        """A short limit as a parameter's default: ``def run(..., timeout=3.0)``."""
        positional = [*node.posonlyargs, *node.args]
        pairs = [*zip(positional[len(positional) - len(node.defaults):], node.defaults, strict=True),
                 *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
        for parameter, default in pairs:
            if default is not None and LIMIT_NAMES.search(parameter.arg) and self._short(default) is not None:
                self.found.append((default.lineno, f"the default {parameter.arg}={ast.unparse(default)}"))


def offences(source: str, path: str = "<snippet>") -> list[str]:
    """``path:line: what, and the fix`` for every wall-clock bound under the floor in ``source`` not marked."""
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    scan = _Scan(tree, nodes)
    visit = {ast.Compare: scan.compare, ast.BinOp: scan.deadline, ast.Call: scan.call, ast.Dict: scan.dictionary,
             ast.arguments: scan.defaults}
    for node in nodes:
        if type(node) in visit:
            visit[type(node)](node)
    lines = source.splitlines()
    return [f"{path}:{line}: {what}: {FIX}" for line, what in sorted(set(scan.found)) if MARKER not in lines[line - 1]]


def test_no_test_bounds_wall_clock_time_under_ten_seconds():
    found = [offence for path in sorted(TESTS.rglob("*.py")) if "__pycache__" not in path.parts
             for offence in offences(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert not found, "wall-clock bounds under 10 s, which a busy machine can break:\n" + "\n".join(found)


def test_the_scan_flags_a_short_bound_and_passes_a_marked_long_or_unrelated_one():
    snippet = '''
import time
from time import perf_counter
SECONDS = 1000
start = time.perf_counter()
elapsed = perf_counter() - start
assert elapsed < 1.5
assert time.monotonic() - start < 1.5  # limit under test: a loop that never ends, stopped at 1.5 s
assert time.monotonic() - start < 1.5 + 10
assert len(items) < 3 and elapsed > 0
subprocess.run(command, timeout=5)
page.wait_for_function(DRAWN, timeout=5 * SECONDS)
page.wait_for_function(DRAWN, timeout=30 * SECONDS)
deadline = time.monotonic() + 2
config = {"seconds": 3}
@settings(max_examples=10)
def run(cases, timeout=90.0, per_case_seconds=3.0): pass
'''
    assert [offence.split(": ")[0:2] for offence in offences(snippet)] == [
        ["<snippet>:7", "a time bounded by 1.5 s"],
        ["<snippet>:11", "timeout=5 in run()"],
        ["<snippet>:12", "timeout=5 * SECONDS in wait_for_function()"],
        ["<snippet>:14", "a deadline 2 s ahead"],
        ["<snippet>:15", "the limit 'seconds' = 3"],
        ["<snippet>:16", "hypothesis's deadline (200 ms of wall clock unless deadline=None)"],
        ["<snippet>:17", "the default per_case_seconds=3.0"],
    ]
