"""Write an otter-grader autograder for each notebook's exercises, and grade submissions with it (issue 13).

For every notebook under chapters/, in ``<out>/<notebook>/``:

- ``tests/<exercise>.py``: one otter test file per check-kind exercise ("Write and check"), worth :data:`POINTS`. Its public case runs the book's
  check on the student's function as the notebook does; where the check takes ``seed=``, two hidden cases run it on
  other random inputs (seeds 1 and 2). A failing case reports the check's own feedback
  (:func:`mha.exercises.grading.grade`);
- ``autograder.zip``: what ``otter generate`` makes of them, for ``otter run -a autograder.zip submission.ipynb``
  (or Gradescope);
- ``key.ipynb``: the answer key as a submission: the student edition with each stub replaced by the book's solution.

    python scripts/grading.py [--out _build/grading]                 # write the autograders
    python scripts/grading.py --check chapters/1_mechanism/1_attention_from_scratch.ipynb
        # grade the key (full marks), the untouched student edition (zero), the student edition with a cell that
        # patches the grader (zero), a typical wrong answer (partial) and a hang (only its exercise lost, within 2 min)

The student edition itself comes from scripts/student_edition.py (``make student``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import student_edition  # noqa: E402  (the same folder)

POINTS = 3
HIDDEN_SEEDS = (1, 2)
TIME_LIMIT = 60  # seconds for each call of a submitted function
MEMORY_MB = 2048  # what a submitted function may take beyond numpy and torch
STUB_CHECK = re.compile(r"^(check_\w+)\((my_\w+)", re.M)


def exercises_of(notebook: dict) -> list[dict]:
    """Each check-kind exercise's label, the check its stub calls and the function it checks, in order.

    Only "Write and check" exercises are graded: a prediction, an explanation or an investigation has no check that
    could give it points (scripts/student_edition.py reads each exercise's kind from its header line)."""
    from mha.exercises.grading import modules_of_checks

    modules = modules_of_checks()
    return [{"label": exercise.label, "check": exercise.check, "function": exercise.function,
             "module": modules[exercise.check]}
            for exercise in student_edition.exercises(notebook) if exercise.kind == "check"]


def takes_seed_of(exercise: dict) -> bool:
    """Whether the exercise's check takes ``seed=``, so that it can have hidden variants."""
    from mha.exercises.grading import takes_seed

    return takes_seed(getattr(importlib.import_module(f"mha.exercises.{exercise['module']}"), exercise["check"]))


def test_file(exercise: dict) -> str:
    """An otter test file (Python format) for one exercise."""
    seeded = takes_seed_of(exercise)
    body = "raise AssertionError(LEFT_TO_THE_KERNEL)"
    cases = [("public", False, 1 if seeded else POINTS, body)]
    if seeded:
        cases += [(f"hidden_seed_{seed}", True, (POINTS - 1) / len(HIDDEN_SEEDS), body) for seed in HIDDEN_SEEDS]
    lines = [f'"""{exercise["label"]}: {exercise["check"]}({exercise["function"]}), written by scripts/grading.py.',
             "", "The kernel runs none of the submission's code: mha.exercises.otter_plugin grades each case in a",
             'fresh process and replaces these results; without the plugin every case fails."""', "",
             "from otter.test_files import test_case", "",
             "from mha.exercises.otter_plugin import LEFT_TO_THE_KERNEL", "",
             "OK_FORMAT = False", "", f'name = "{exercise["label"]}"', f"points = {POINTS}", ""]
    for case, hidden, points, body in cases:
        lines += ["", f"@test_case(points={points:g}, hidden={hidden})", f"def {case}(env):", f"    {body}", ""]
    return "\n".join(lines).rstrip() + "\n"


def otter_config(exercises: list[dict]) -> dict:
    """otter's configuration: the plugin that grades each exercise outside the kernel, and what it needs to know."""
    table = {e["label"]: {key: e[key] for key in ("module", "check", "function")} for e in exercises}
    # the seeds the hidden cases really use, drawn afresh for each autograder: the repository's are public
    seeds = {f"hidden_seed_{seed}": 3 + secrets.randbelow(2**31) for seed in HIDDEN_SEEDS}
    return {"plugins": [{"mha.exercises.otter_plugin.IsolatedGrading": {
        "exercises": table, "seeds": seeds, "seconds": TIME_LIMIT, "memory_mb": MEMORY_MB}}]}


def key_submission(book: dict) -> dict:
    """The student edition with every stub cell replaced by the book's solution, renamed from solution_ to my_."""
    student, solutions = student_edition.split_notebook(book)
    by_function = {}
    for solution in solutions:
        for code in solution.code:
            for name in re.findall(r"^def (solution_\w+)", code, re.M):
                by_function[name.replace("solution_", "my_", 1)] = code
    for cell in student["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "NotImplementedError" in source:
            function = STUB_CHECK.search(source).group(2)
            code = re.sub(r"\bsolution_(\w+)", r"my_\1", by_function[function])
            cell["source"] = code.splitlines(keepends=True)
            cell["outputs"], cell["execution_count"] = [], None
    return student


def write_autograder(path: Path, out: Path) -> Path:
    """Tests, autograder.zip and key.ipynb of one notebook under ``out``; returns its folder."""
    book = json.loads(path.read_text())
    folder = out / path.relative_to(ROOT / "chapters").with_suffix("")
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for old in tests.glob("*.py"):
        old.unlink()
    for exercise in exercises_of(book):
        (tests / f"{exercise['label']}.py").write_text(test_file(exercise))
    (folder / "key.ipynb").write_text(json.dumps(key_submission(book), indent=1, ensure_ascii=False) + "\n")
    config = folder / "otter_config.json"
    config.write_text(json.dumps(otter_config(exercises_of(book)), indent=1) + "\n")
    otter = Path(sys.executable).with_name("otter")
    subprocess.run([str(otter), "generate", "-t", str(tests), "-o", str(folder / "autograder.zip"), "-c", str(config),
                    "--no-requirements", "--no-environment"], check=True, capture_output=True, cwd=folder)
    return folder


def run_otter(autograder: Path, submission: dict, name: str) -> dict:
    """Grade one submission (a notebook as a dict) with ``otter run``; its results.json as a dict."""
    otter = Path(sys.executable).with_name("otter")
    with tempfile.TemporaryDirectory() as work:
        notebook = Path(work) / f"{name}.ipynb"
        notebook.write_text(json.dumps(submission))
        subprocess.run([str(otter), "run", "-a", str(autograder), "-o", work, "--no-logo", str(notebook)],
                       check=True, capture_output=True, text=True, cwd=work)
        return json.loads((Path(work) / "results.json").read_text())


def scores(results: dict) -> dict[str, tuple[float, float, str]]:
    """(score, possible, what the cases said) of each exercise, from otter's results.json."""
    return {test["name"]: (float(test["score"]), float(test["max_score"]), test.get("output", ""))
            for test in results["tests"] if "max_score" in test}


# A typical wrong answer to the first exercise of 1.1: softmax without subtracting the row's maximum, which
# overflows for large scores. Its check says so; the other exercises keep their points.
WRONG_ANSWERS = {
    "1_mechanism/1_attention_from_scratch": ("my_softmax", (
        "def my_softmax(scores):\n"
        "    exps = np.exp(scores)\n"
        "    return exps / exps.sum(axis=-1, keepdims=True)\n")),
}


# A cell that patches the grader and the checks from the notebook: the kernel never runs it, so it changes nothing.
PATCH_THE_GRADER = ("import mha.exercises.grading, mha.exercises.checking\n"
                    "mha.exercises.grading.grade = mha.exercises.grading.grade_exercise = lambda *a, **k: '✓'\n"
                    "mha.exercises.checking.run_check = lambda *a, **k: True\n")
# A function that never returns: its exercise fails with the time limit's message, the others keep their points.
HANGS = {"1_mechanism/1_attention_from_scratch": ("my_causal_mask", "def my_causal_mask(n):\n    while True:\n"
                                                                      "        pass\n")}


def with_answer(submission: dict, function: str, code: str) -> dict:
    """``submission`` with the cell that defines ``function`` replaced by ``code`` (the check call kept)."""
    changed = json.loads(json.dumps(submission))
    for cell in changed["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(rf"^def {function}\(", source, re.M):
            calls = "\n".join(line for line in source.splitlines() if line.startswith("check_"))
            cell["source"] = f"{code}\n\n{calls}\n".splitlines(keepends=True)
    return changed


def check_grading(path: Path, out: Path) -> list[str]:
    """Grade the key, the untouched student edition and (where one is known) a typical wrong answer of one
    notebook; the problems found (none: the key gets full marks, the student edition zero, the wrong answer
    partial credit with its check's feedback)."""
    folder = write_autograder(path, out)
    name = str(folder.relative_to(out))
    book = json.loads(path.read_text())
    autograder, problems = folder / "autograder.zip", []
    key = json.loads((folder / "key.ipynb").read_text())
    student, _ = student_edition.split_notebook(book)
    for label, submission, wanted in (("key", key, "full"), ("student edition", student, "zero")):
        table = scores(run_otter(autograder, submission, label.replace(" ", "_")))
        got, possible = sum(s for s, _, _ in table.values()), sum(p for _, p, _ in table.values())
        print(f"{name}, {label}: {got:g} / {possible:g}")
        if (wanted == "full" and got != possible) or (wanted == "zero" and got != 0) or possible == 0:
            problems.append(f"{name}: the {label} scored {got:g} of {possible:g}, not {wanted} marks: {table}")
    patched = json.loads(json.dumps(student))  # the grader patched from the notebook: as blank as before
    patched["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                             "source": PATCH_THE_GRADER})
    table = scores(run_otter(autograder, patched, "patched"))
    got = sum(s for s, _, _ in table.values())
    print(f"{name}, the student edition with a cell that patches the grader: {got:g}")
    if got != 0:
        problems.append(f"{name}: patching the grader scored {got:g}, not 0: {table}")
    if name in HANGS:
        function, code = HANGS[name]
        start = time.monotonic()
        table = scores(run_otter(autograder, with_answer(key, function, code), "hang"))
        took = time.monotonic() - start
        lost = {label: said for label, (score, top, said) in table.items() if score < top}
        print(f"{name}, {function} that never returns: graded in {took:.0f} s, lost {sorted(lost)}")
        if took > 120 or len(lost) != 1 or "did not return within" not in next(iter(lost.values()), ""):
            problems.append(f"{name}: a hang in {function} took {took:.0f} s and lost {lost}")
    if name in WRONG_ANSWERS:
        function, code = WRONG_ANSWERS[name]
        table = scores(run_otter(autograder, with_answer(key, function, code), "wrong_answer"))
        got, possible = sum(s for s, _, _ in table.values()), sum(p for _, p, _ in table.values())
        failed = {label: said for label, (score, top, said) in table.items() if score < top}
        print(f"{name}, a wrong {function}: {got:g} / {possible:g}; feedback: {failed}")
        if not 0 < got < possible or not any("✗" in said for said in failed.values()):
            problems.append(f"{name}: a wrong {function} scored {got:g} of {possible:g}, feedback {failed}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "_build" / "grading"))
    parser.add_argument("--check", nargs="*", help="notebooks to grade key, student edition and a wrong answer of")
    args = parser.parse_args()
    out = Path(args.out).resolve()  # otter runs in the notebook's folder
    if args.check:
        problems = [problem for path in args.check for problem in check_grading(Path(path).resolve(), out)]
        print("\n".join(problems) or "grading works: full marks for the key, zero for the student edition (patched or "
                                     "not), a hang costs only its exercise, partial "
                                     "credit with feedback for a wrong answer")
        return 1 if problems else 0
    notebooks = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for path in notebooks:
        folder = write_autograder(path, out)
        print(f"{folder.relative_to(out)}: {len(list((folder / 'tests').glob('*.py')))} exercises, autograder.zip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
