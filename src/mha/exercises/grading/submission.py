"""What the grader takes from a submitted notebook, and what it refuses (instructors' page, "Grading").

The rule: from every code cell, in order, the grader keeps the ``def`` and ``class`` statements, the imports of
:data:`ALLOWED_MODULES` and the names set to a constant: a plain one (``n_heads = 4``) or an expression of the allowed
modules, earlier constants and a few built-ins (``SCALE = 1 / np.sqrt(8)``); everything else is dropped unrun
(the check calls, prints, plots, a line that patches the grader). A cell that does not parse is dropped whole, and the
exercises it defines report its SyntaxError. The book's package is never imported: a graded function that uses a name
the notebook imported from ``mha`` (or ``otter``), or that *is* such a name (``my_softmax = attention_numpy.softmax``),
scores 0 with a message saying why.

One exception: a real-model exercise, whose check declares the modules its function may use (``tools``,
:mod:`~mha.exercises.grading.tools`: ``from mha.pretrained.encoder import MiniLMEncoder``). For that exercise alone,
the imports of those modules are run (:meth:`Submission.setup_for`) and its function may use their names
(:func:`problem_with`'s ``tools``); any other name of the package still scores 0, and every other exercise sees
those imports dropped as before.
"""

from __future__ import annotations

import ast
import collections
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..learner_errors import syntax_error_feedback

__all__ = ["ALLOWED_MODULES", "REFERENCE_MODULES", "Submission", "read_submission", "problem_with", "why_undefined"]

ALLOWED_MODULES = ("numpy", "torch", "scipy", "sklearn", "pandas", "math", "cmath", "statistics", "random",
                   "fractions", "decimal", "numbers", "itertools", "functools", "operator", "collections", "heapq",
                   "bisect", "array", "copy", "re", "string", "textwrap", "time", "typing", "dataclasses", "enum",
                   "abc", "contextlib", "warnings", "types")
"""The modules a graded cell may import: numerical libraries and harmless parts of the standard library (none that
reaches files, processes or the network)."""
REFERENCE_MODULES = ("mha", "otter")
_MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)
_BINDS = re.compile(r"^(?:def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=[^=]|^import\s+(\w+)"
                    r"|^from\s+\S+\s+import\s+(\w+)", re.MULTILINE)  # what a cell that does not parse binds


@dataclass
class Submission:
    """A submitted notebook as the grader reads it (:func:`read_submission`)."""

    setup: list = field(default_factory=list)  # (filename, kept source, names it defines) per code cell
    modules: list[str] = field(default_factory=list)  # the allowed modules its imports name
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # the last def of each name
    defined: set[str] = field(default_factory=set)  # every name the kept statements bind
    references: dict[str, str] = field(default_factory=dict)  # a name bound to the package -> what it is
    assigned: dict[str, str] = field(default_factory=dict)  # a name bound by a dropped statement -> that statement
    syntax_errors: list[tuple[str, int, str]] = field(default_factory=list)  # (cell source, line, what)
    calls: dict[str, list[str]] = field(default_factory=dict)  # check_x -> the functions its cell defines
    problem: str | None = None  # why the whole file cannot be graded
    # a dropped import of the package alone on its lines: (cell, first line, its lines, modules, names it binds)
    tool_imports: list[tuple[int, int, list[str], tuple[str, ...], list[str]]] = field(default_factory=list)

    def setup_for(self, tools: tuple[str, ...] = ()) -> list:
        """:attr:`setup` with the imports of ``tools`` (a real-model exercise's modules) run too."""
        setup = [list(cell) for cell in self.setup]
        for cell, first, lines, modules, names in self.tool_imports:
            if tools and all(_within(module, tools) for module in modules):
                filename, text, bound = setup[cell]
                rows = text.split("\n")
                rows[first - 1:first - 1 + len(lines)] = lines
                setup[cell] = [filename, "\n".join(rows), [*bound, *names]]
        return [tuple(cell) for cell in setup]


def _within(module: str, tools: tuple[str, ...]) -> bool:
    """Whether ``module`` (or a name, ``mha.pretrained.encoder.MiniLMEncoder``) is one of ``tools`` or in one."""
    return any(module == tool or module.startswith(tool + ".") for tool in tools)


def _root(module: str | None) -> str:
    return (module or "").split(".")[0]


def _bound_by(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return [name.id for target in targets if target is not None for name in ast.walk(target)
            if isinstance(name, ast.Name)]


SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "chr", "complex", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "len", "list", "map", "max", "min", "ord", "pow", "range", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip"})
"""The built-in functions a kept constant may call (``INF = float("inf")``): none that reads, runs or looks up."""


def _is_constant(value: ast.expr, known: set[str]) -> bool:
    """Whether ``value`` is a plain constant, or an expression of the allowed modules' names, constants set before,
    and :data:`SAFE_BUILTINS` (``SCALE = 1 / np.sqrt(8)``): it calls none of the notebook's own functions."""
    try:
        ast.literal_eval(value)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    local = {node.id for node in ast.walk(value) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    for node in ast.walk(value):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                node.id not in known | local | SAFE_BUILTINS:
            return False
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return False
    return True


def _keeps(node: ast.stmt, known: set[str]) -> bool:
    """Whether the grader runs ``node``: a definition, an allowed import, or a constant (:func:`_is_constant`)
    given the names ``known`` (the allowed imports and constants kept before it)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, ast.Import):
        return all(_root(alias.name) in ALLOWED_MODULES for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and _root(node.module) in ALLOWED_MODULES
    if isinstance(node, ast.Assign) and all(isinstance(target, ast.Name) for target in node.targets):
        return _is_constant(node.value, known)
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return _is_constant(node.value, known)
    return False


SUBMISSION_BYTES = 64 * 2**20
"""The largest notebook a submission may be: room for every output of the book's longest notebook, many times over."""


def notebook_json(notebook: dict | str | Path) -> dict:
    """A submitted notebook (a path, its text or its JSON) as JSON, read within bounds: a file of at most
    :data:`SUBMISSION_BYTES` (no device or pipe), parsed as a data file is (nesting, number length, no NaN), so a
    hostile submission is refused with a ``ValueError`` before it can exhaust memory or the parser's stack."""
    from mha.data_files import parse_json, read_data_file

    how = "Upload the .ipynb file you worked in."
    if isinstance(notebook, Path) or (isinstance(notebook, str) and not notebook.lstrip().startswith("{")):
        notebook = read_data_file(notebook, what="the submission", how=how, limit=SUBMISSION_BYTES)
    if isinstance(notebook, (str, bytes)):
        notebook = parse_json(notebook, what="the submission", path="(the notebook)", how=how)
    if not isinstance(notebook, dict):
        raise ValueError(f"the submission holds {type(notebook).__name__}, not a notebook's JSON object. {how}")
    return notebook


def read_submission(notebook: dict | str | Path) -> Submission:
    """Read a submission (a notebook's path, its text or its JSON) by the rule above; never raises."""
    submission = Submission()
    try:
        notebook = notebook_json(notebook)
        cells = [cell for cell in notebook["cells"] if cell.get("cell_type") == "code"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        submission.problem = (f"✗ The submission is not a Jupyter notebook ({type(error).__name__}). Upload the "
                              ".ipynb file you worked in (File → Save, then that file), not an export or a copy of "
                              "its text.")
        return submission
    known: set[str] = set()  # the names the allowed imports and kept constants bind so far
    for index, cell in enumerate(cells, start=1):
        raw = cell.get("source", "")
        source = _MAGIC.sub(lambda match: f"{match[1]}pass", "".join(raw) if isinstance(raw, list) else str(raw))
        filename = f"<cell {index}>"
        for call in re.finditer(r"^(check_\w+)\(", source, re.M):
            submission.calls.setdefault(call[1], []).extend(re.findall(r"^def (\w+)\(", source, re.M))
        try:
            tree = ast.parse(source, filename)
        except (SyntaxError, ValueError) as error:
            line = getattr(error, "lineno", 0) or 0
            submission.syntax_errors.append((source, line, getattr(error, "msg", str(error))))
            continue
        lines = source.splitlines()
        kept_lines, names, kept = set(), [], {}
        statements_on = collections.Counter(line for node in tree.body
                                            for line in range(node.lineno, node.end_lineno + 1))
        for node in tree.body:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            span = range(start, node.end_lineno + 1)
            kept[id(node)] = _keeps(node, known)
            if kept[id(node)]:
                kept_lines.update(span)
                names += _bound_by(node)
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    known.update(_bound_by(node))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    submission.functions[node.name] = node
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        module = alias.name if isinstance(node, ast.Import) else node.module
                        if _root(module) not in submission.modules:
                            submission.modules.append(_root(module))
            else:
                known.difference_update(_bound_by(node))
                for name in _bound_by(node):
                    segment = ast.get_source_segment(source, node) or name
                    submission.assigned[name] = segment.splitlines()[0][:120]
                    submission.defined.discard(name)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    modules = []
                    for alias in node.names:
                        module = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                        if _root(module if isinstance(node, ast.Import) else node.module) in REFERENCE_MODULES:
                            submission.references[(alias.asname or alias.name).split(".")[0]] = module
                            modules.append(module)
                    alone = all(statements_on[line] == 1 for line in range(node.lineno, node.end_lineno + 1))
                    if alone and len(modules) == len(node.names) and all(_root(name) == "mha" for name in modules) \
                            and getattr(node, "level", 0) == 0:  # an import a real-model exercise may run
                        submission.tool_imports.append((len(submission.setup), node.lineno,
                                                        lines[node.lineno - 1:node.end_lineno], tuple(modules),
                                                        _bound_by(node)))
        dropped = {line for line in range(1, len(lines) + 1) if line not in kept_lines}
        for node in tree.body:  # a line shared by a kept and a dropped statement is dropped
            if not kept[id(node)]:
                dropped.update(range(node.lineno, node.end_lineno + 1))
        text = "\n".join("" if number in dropped else line for number, line in enumerate(lines, start=1))
        for name in names:
            submission.defined.add(name)
            submission.references.pop(name, None)
            submission.assigned.pop(name, None)
        submission.setup.append((filename, text + "\n", names))
    return submission


def _free_names(function: ast.FunctionDef) -> set[str]:
    """The names a function reads that it does not bind itself (its globals), and the modules it imports."""
    local = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
    local |= {node.id for node in ast.walk(function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    used = {node.id for node in ast.walk(function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    imported = {f"import {alias.name}" for node in ast.walk(function) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {f"import {node.module}" for node in ast.walk(function) if isinstance(node, ast.ImportFrom)}
    return (used - local) | imported


def _uses_the_reference(submission: Submission, name: str, tools: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(function, reference) where ``name`` or a function it calls reads a name bound to the book's package (but
    to ``tools``, the modules a real-model exercise declares)."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in submission.functions:
            continue
        seen.add(current)
        for used in sorted(_free_names(submission.functions[current])):
            module = used.removeprefix("import ")
            if used.startswith("import ") and _root(module) in REFERENCE_MODULES and not _within(module, tools):
                return current, module
            if used in submission.references and not _within(submission.references[used], tools):
                return current, used
            todo.append(used)
    return None


def problem_with(submission: Submission, function: str, check: str, notebook_functions: list[str],
                 tools: tuple[str, ...] = ()) -> str | None:
    """Why ``function`` cannot earn points before it runs (missing, renamed, a SyntaxError, the reference), or None.

    ``notebook_functions`` are all the functions the section's exercises ask for: a notebook that defines none of
    them is another section's. ``tools``: the modules of the package the check declares (a real-model exercise),
    whose names the function may use."""
    if submission.problem:
        return submission.problem
    if function in submission.references and function not in submission.defined:
        return (f"✗ {function} is {submission.references[function]}, the book's own implementation, which this "
                f"exercise asks you to write yourself: it scores 0. Define it with `def {function}(...)`.")
    if function in submission.assigned and function not in submission.defined:
        statement = submission.assigned[function]
        reference = next((ref for ref in submission.references if re.search(rf"\b{re.escape(ref)}\b", statement)), None)
        if reference:
            return (f"✗ {function} is set to the book's own implementation (`{statement}`), which this exercise asks "
                    f"you to write yourself: it scores 0. Define it with `def {function}(...)`.")
        return (f"✗ {function} is set with `{statement}`; the grader takes only functions defined with "
                f"`def {function}(...)` (and the imports and constants they use).")
    if function not in submission.functions:
        for source, line, what in submission.syntax_errors:
            if re.search(rf"\bdef\s+{function}\b", source):
                lines = source.splitlines()
                return syntax_error_feedback(function, line, what, lines[line - 1] if 0 < line <= len(lines) else "")
        others = [name for name in submission.calls.get(check, []) if name != function]
        if others:
            return (f"✗ {function} is not defined: the cell that calls {check} defines {', '.join(others)} instead. "
                    f"Keep the name the exercise gives ({function}); the grader looks for it by that name.")
        known = set(submission.functions) | set(submission.assigned) | set(submission.references)
        if not known & set(notebook_functions):
            return (f"✗ This notebook defines none of this section's exercises ({', '.join(notebook_functions)}): is "
                    "it the submission for another section? Upload the notebook of this section.")
        return f"✗ {function} is not defined in the submission: write `def {function}(...)` in the exercise's cell."
    found = _uses_the_reference(submission, function, tools)
    if found:
        where, reference = found
        via = "" if where == function else f" (through {where}, which it calls)"
        return (f"✗ {function} uses {reference}{via}, from the book's own package, which this exercise asks you to "
                "replace with your own code: it scores 0. Write the computation with numpy (or torch) instead.")
    return None


def why_undefined(submission: Submission) -> dict[str, str]:
    """For each name the notebook binds but the grader does not (a line it does not run, a cell that does not parse),
    why: the words a check shows when a graded function reads that name."""
    reasons = {}
    for source, line, what in submission.syntax_errors:
        for match in _BINDS.finditer(source):
            name = next(group for group in match.groups() if group)
            reasons[name] = (f"the cell that defines it has a syntax error at line {line} ({what}), so the grader "
                             "could not read that cell. Fix that line")
    allowed = ", ".join(ALLOWED_MODULES)
    for name, statement in submission.assigned.items():
        reasons[name] = (f"your notebook sets it with `{statement}`, a line the grader does not run (it keeps only "
                         f"`def` and `class` statements, imports of {allowed}, and names set to a constant such as "
                         "`n_heads = 4` or `scale = 1 / np.sqrt(8)`, which call none of your own functions). Compute "
                         "it inside your function instead")
    return {name: why for name, why in reasons.items() if name not in submission.defined}
