"""Write an otter-grader autograder for each notebook's exercises, and grade submissions with it (instructors' page,
"Grading").

For every notebook under chapters/, in ``<out>/<notebook>/``:

- ``tests/<exercise>.py``: one otter test file per check-kind exercise ("Write and check"), worth its difficulty's
  points (:data:`POINTS_BY_DIFFICULTY`, or ``--points``). Its public case runs the book's check on the student's
  function as the notebook does; where the check takes ``seed=``, two hidden cases run it on other random inputs.
  The otter plugin (:mod:`mha.exercises.grading.otter_plugin`) grades each case outside the student's kernel;
- ``autograder.zip``: what ``otter generate`` makes of them, for ``otter run -a autograder.zip submission.ipynb`` or
  Gradescope. It carries a wheel of the book's package (built from this tree) and installs, on Python
  :data:`PYTHON_VERSION`, what grading needs (:func:`grading_requirements`, also written beside it as
  ``requirements.txt``);
- ``key.ipynb``: the answer key as a submission: the student edition with each stub replaced by the book's solution;
- ``manual_questions.md``: the exercises marked by hand, with their points and rubrics (scripts/written_answers.py),
  for the instructor only.

and the same in ``<out>/weeks/week_N/`` for each week of chapters/syllabus.yml, whose sections' notebooks are one
notebook (scripts/course.py): otter grades one notebook per submission, so a week is one assignment.

    python -m scripts.grading [--out _build/grading] [--points 2,3,5]   # write the autograders
    python -m scripts.grading --check chapters/1_mechanism/1_attention_from_scratch.ipynb
        # grade the key (full marks), the untouched student edition (zero), the student edition with a cell that
        # patches the grader (zero), a typical wrong answer (partial) and a hang (only its exercise lost, within 2 min)
    python -m scripts.grading --clean-check chapters/1_mechanism/1_attention_from_scratch.ipynb
        # build a fresh environment from the zip alone and grade the key, the student edition and a wrong answer
        # with its own otter (TORCH_INDEX= takes torch from wherever pip looks, as the Makefile does)
    python -m scripts.grading --clean-check-week 1 --clean-check-week 2
        # the same for weekly zips: one clean environment (their zips install the same), each week's three graded
    python -m scripts.grading --week 5          # only week 5's autograder (--all-weeks: every week's)
    python -m scripts.grading --check-week 1 [--record]
        # grade week 1's key (full marks) and student edition (zero) with otter run; --record keeps the sizes and
        # times in chapters/grading_measurements.json, which the instructors' page shows (with --clean-check-week,
        # also the clean environment's size and installation time)
    python -m scripts.grading --release-solutions 3     # the answer key of weeks 1 to 3 into _build/student
    python -m scripts.grading --release-solutions due   # of every week whose deadline in the syllabus has passed

The student edition itself comes from scripts/student_edition.py (``make student``); scripts/grade_all.py grades a
folder of submissions into a gradebook.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.grading")
from scripts import course, student_edition, written_answers  # noqa: E402

POINTS_BY_DIFFICULTY = {1: 2, 2: 3, 3: 5}  # an exercise's points by its stars: ★ 2, ★★ 3, ★★★ 5 (--points)
HIDDEN_SEEDS = (1, 2)
PYTHON_VERSION = "3.11"  # the grading image's Python (Gradescope's image builds it with mamba)
GRADESCOPE_SOURCE = "/autograder/source"  # where Gradescope unpacks the zip; otter's support files go to files/
STUB_CHECK = re.compile(r"^(check_\w+)\((my_\w+)", re.M)


def exercises_of(notebook: dict) -> list[dict]:
    """Each check-kind exercise's label, the check its stub calls and the function it checks, in order.

    Only "Write and check" exercises are graded: a prediction, an explanation or an investigation has no check that
    could give it points (scripts/student_edition.py reads each exercise's kind from its header line)."""
    from mha.exercises.grading import modules_of_checks

    modules = modules_of_checks()
    return [{"label": exercise.label, "check": exercise.check, "function": exercise.function,
             "module": modules[exercise.check], "difficulty": exercise.difficulty}
            for exercise in student_edition.exercises(notebook) if exercise.kind == "check"]


def takes_seed_of(exercise: dict) -> bool:
    """Whether the exercise's check takes ``seed=``, so that it can have hidden variants."""
    from mha.exercises.grading import takes_seed

    return takes_seed(getattr(importlib.import_module(f"mha.exercises.{exercise['module']}"), exercise["check"]))


def points_of(exercise: dict, scheme: dict[int, float] = POINTS_BY_DIFFICULTY) -> float:
    """The points an exercise is worth: ``scheme``'s points for its difficulty (one to three stars)."""
    if exercise.get("difficulty") not in scheme:
        raise ValueError(f"{exercise['label']} has difficulty {exercise.get('difficulty')!r}, and the points scheme "
                         f"covers {sorted(scheme)} stars: give the exercise a header line such as "
                         "'**Write and check** · ★★ · 15 min · core', or the scheme a value for it (--points).")
    return scheme[exercise["difficulty"]]


def parse_points(text: str) -> dict[int, float]:
    """``--points 2,3,5`` as ``{1: 2, 2: 3, 3: 5}``: the points of a ★, a ★★ and a ★★★ exercise."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3 or any(value <= 0 for value in values):
        raise argparse.ArgumentTypeError(f"--points {text!r}: give three positive numbers separated by commas, the "
                                         "points of a ★, a ★★ and a ★★★ exercise, e.g. --points 2,3,5")
    return dict(zip((1, 2, 3), values, strict=True))


def test_file(exercise: dict, points: float) -> str:
    """An otter test file (Python format) for one exercise worth ``points``: 1 for the public case where there are
    hidden ones, which share the rest."""
    seeded = takes_seed_of(exercise)
    body = "raise AssertionError(LEFT_TO_THE_KERNEL)"
    cases = [("public", False, min(1, points) if seeded else points, body)]
    if seeded:
        cases += [(f"hidden_seed_{seed}", True, (points - min(1, points)) / len(HIDDEN_SEEDS), body)
                  for seed in HIDDEN_SEEDS]
    lines = [f'"""{exercise["label"]}: {exercise["check"]}({exercise["function"]}), written by scripts/grading.py.',
             "", "The kernel runs none of the submission's code: mha.exercises.grading.otter_plugin grades each case",
             'in a fresh process and replaces these results; without the plugin every case fails."""', "",
             "from otter.test_files import test_case", "",
             "from mha.exercises.grading.otter_plugin import LEFT_TO_THE_KERNEL", "",
             "OK_FORMAT = False", "", f'name = "{exercise["label"]}"', f"points = {points:.10g}", ""]
    for case, hidden, share, body in cases:
        lines += ["", f"@test_case(points={share:.10g}, hidden={hidden})", f"def {case}(env):", f"    {body}", ""]
    return "\n".join(lines).rstrip() + "\n"


def otter_config(exercises: list[dict]) -> dict:
    """otter's configuration: the plugin that grades each exercise outside the kernel, and what it needs to know."""
    table = {e["label"]: {key: e[key] for key in ("module", "check", "function")} for e in exercises}
    # the seeds the hidden cases really use, drawn afresh for each autograder: the repository's are public
    seeds = {f"hidden_seed_{seed}": 3 + secrets.randbelow(2**31) for seed in HIDDEN_SEEDS}
    return {"plugins": [{"mha.exercises.grading.otter_plugin.IsolatedGrading": {
        "exercises": table, "seeds": seeds, **limits_config()}}]}


def limits_config(limits=None) -> dict:
    """The limits an autograder states in its otter_config.json (:class:`mha.exercises.grading.sandbox.Limits`' by
    default): each call's seconds, the budgets of an exercise and a submission, how much slower than the book's
    solution a case may be, and the memory beyond numpy and torch."""
    from mha.exercises.grading.sandbox import Limits

    limits = limits or Limits()
    return {"seconds": limits.seconds, "exercise_seconds": limits.exercise_seconds,
            "submission_seconds": limits.submission_seconds, "slow_factor": limits.slow_factor,
            "slow_floor_seconds": limits.slow_floor_seconds, "memory_mb": limits.memory_bytes // 1024**2}


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


GRADING_NEEDS = ("otter-grader", "ipykernel", "jupyter-client")
"""What grading needs beside the package: otter (its "grading" extra's kernel and client; its PDFs and plugins for
Google services are not used) pinned, like everything else, in requirements.lock."""


def grading_requirements(wheel: Path) -> str:
    """The autograder's requirements, the whole pip list of the zip's environment.yml (otter's own line replaced),
    each with its sha256, so pip installs in hash-checking mode and refuses a file that differs from the one locked,
    as ``make`` does: requirements.lock's entries (pin and hashes) of the package's dependencies and
    :data:`GRADING_NEEDS` and of all they bring; torch's CPU build by its address on PyTorch's CPU index (the one
    index torch is taken from, and no package is looked up in two indexes: there is no ``--extra-index-url``); and the
    package itself, from the wheel ``wheel`` that the zip carries in files/, with the hash of that wheel."""
    from scripts.book_release import locked_closure, package_dependencies, torch_cpu_wheel

    entries = [entry for entry in locked_closure([*package_dependencies(), *GRADING_NEEDS])
               if not entry.startswith("torch==")]  # the lock's torch is the CPU build, from PyTorch's index only
    address, sha256 = torch_cpu_wheel().split("#sha256=")
    wheel_sha256 = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
    return "\n".join([
        "# What grading needs, written by scripts/grading.py (instructors' page, \"Grading\"), every file hashed.",
        f"{address} --hash=sha256:{sha256}", *entries,
        f"{GRADESCOPE_SOURCE}/files/{Path(wheel).name} --hash=sha256:{wheel_sha256}"]) + "\n"


def build_package(out: Path) -> Path:
    """A wheel of the book's package (src/ and data/ as pyproject.toml builds them), in ``out``/package."""
    from scripts.colab_like_check import build_wheel

    folder = out / "package"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return build_wheel(folder)


def write_autograder(path: Path, out: Path, wheel: Path,
                     points: dict[int, float] = POINTS_BY_DIFFICULTY) -> Path:
    """Tests, autograder.zip and key.ipynb of one notebook under ``out``; returns its folder. The zip carries
    ``wheel`` (the package) and installs it with :func:`grading_requirements`, on Python :data:`PYTHON_VERSION`."""
    folder = out / path.relative_to(ROOT / "chapters").with_suffix("")
    return write_bundle(json.loads(path.read_text()), folder, wheel, points)


def write_week(week: course.Week, out: Path, wheel: Path, points: dict[int, float] = POINTS_BY_DIFFICULTY) -> Path:
    """One autograder for a week of the syllabus, in ``out``/weeks/week_N: its sections' notebooks are one
    notebook (:func:`course.week_book`), since otter grades one notebook per submission."""
    return write_bundle(course.week_book(week), out / "weeks" / week.name, wheel, points)


def write_bundle(book: dict, folder: Path, wheel: Path, points: dict[int, float] = POINTS_BY_DIFFICULTY) -> Path:
    """Tests, autograder.zip and key.ipynb of the notebook ``book`` in ``folder``; returns it."""
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for old in tests.glob("*.py"):
        old.unlink()
    for exercise in exercises_of(book):
        (tests / f"{exercise['label']}.py").write_text(test_file(exercise, points_of(exercise, points)))
    (folder / "key.ipynb").write_text(json.dumps(key_submission(book), indent=1, ensure_ascii=False) + "\n")
    (folder / "manual_questions.md").write_text(written_answers.outline(book, folder.name))  # not in the zip
    config = folder / "otter_config.json"
    config.write_text(json.dumps(otter_config(exercises_of(book)), indent=1) + "\n")
    requirements = folder / "requirements.txt"
    requirements.write_text(grading_requirements(wheel))
    shutil.copy2(wheel, folder / wheel.name)  # otter takes support files from its working directory only
    from otter.generate import main as otter_generate  # `otter generate`, in this process: one import for every zip

    try:
        with contextlib.chdir(folder), contextlib.redirect_stdout(io.StringIO()):
            otter_generate(tests_dir=str(tests.resolve()), output_path=str(folder.resolve() / "autograder.zip"),
                           config=str(config.resolve()), requirements=str(requirements.resolve()),
                           overwrite_requirements=True,  # otter's own unhashed otter-grader line: ours is hashed
                           no_environment=True, python_version=PYTHON_VERSION, files=[wheel.name])
    finally:
        (folder / wheel.name).unlink()  # it is in the zip
    return folder


def run_otter(autograder: Path, submission: dict, name: str, otter: Path | None = None,
              environment: dict[str, str] | None = None) -> dict:
    """Grade one submission (a notebook as a dict) with ``otter run`` (this environment's, or ``otter`` run in
    ``environment``); its results.json as a dict."""
    otter = otter or Path(sys.executable).with_name("otter")
    with tempfile.TemporaryDirectory() as work:
        notebook = Path(work) / f"{name}.ipynb"
        notebook.write_text(json.dumps(submission))
        done = subprocess.run([str(otter), "run", "-a", str(autograder), "-o", work, "--no-logo", str(notebook)],
                              capture_output=True, text=True, cwd=work, env=environment)
        if done.returncode != 0 or not (Path(work) / "results.json").exists():
            raise SystemExit(f"otter run failed on {name} ({done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
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


def wrong_answer(name: str, book: dict) -> tuple[str, str] | None:
    """A typical wrong answer for the autograder ``name`` of ``book``: the known one of its section (or of a section
    in its week), else its first exercise's function forgetting to return (partial credit, with the check's ✗)."""
    functions = [exercise["function"] for exercise in exercises_of(book)]
    known = [answer for section, answer in WRONG_ANSWERS.items() if section == name or answer[0] in functions]
    if known or not functions:
        return next(iter(known), None)
    return functions[0], f"def {functions[0]}(*args, **kwargs):\n    result = None  # computed, never returned\n"


def check_three(folder: Path, out: Path, book: dict, timings: dict | None = None, wrong: bool = True,
                **otter) -> list[str]:
    """Grade the key (full marks), the untouched student edition (zero) and, with ``wrong``, a typical wrong answer
    (:func:`wrong_answer`: partial credit with its check's feedback) with ``folder``'s autograder.zip, through
    :func:`run_otter` with ``otter``'s options; the problems found. ``timings`` gets each submission's seconds and
    score."""
    name = str(folder.relative_to(out))
    autograder, problems = folder / "autograder.zip", []
    key = json.loads((folder / "key.ipynb").read_text())
    student, _ = student_edition.split_notebook(book)
    for label, submission, wanted in (("key", key, "full"), ("student edition", student, "zero")):
        started = time.monotonic()
        table = scores(run_otter(autograder, submission, label.replace(" ", "_"), **otter))
        got, possible = sum(s for s, _, _ in table.values()), sum(p for _, p, _ in table.values())
        if timings is not None:
            timings[label] = (time.monotonic() - started, f"{got:g} of {possible:g}")
        print(f"{name}, {label}: {got:g} / {possible:g}", flush=True)
        if (wanted == "full" and got != possible) or (wanted == "zero" and got != 0) or possible == 0:
            problems.append(f"{name}: the {label} scored {got:g} of {possible:g}, not {wanted} marks: {table}")
    if wrong and wrong_answer(name, book):
        function, code = wrong_answer(name, book)
        table = scores(run_otter(autograder, with_answer(key, function, code), "wrong_answer", **otter))
        got, possible = sum(s for s, _, _ in table.values()), sum(p for _, p, _ in table.values())
        failed = {label: said for label, (score, top, said) in table.items() if score < top}
        print(f"{name}, a wrong {function}: {got:g} / {possible:g}; feedback: {failed}", flush=True)
        if not 0 < got < possible or not any("✗" in said for said in failed.values()):
            problems.append(f"{name}: a wrong {function} scored {got:g} of {possible:g}, feedback {failed}")
    return problems


def check_grading(path: Path, out: Path, wheel: Path) -> list[str]:
    """Grade the key, the student edition (untouched and with a cell that patches the grader), a typical wrong
    answer and a hang of one notebook with this environment's otter; the problems found."""
    folder = write_autograder(path, out, wheel)
    name = str(folder.relative_to(out))
    book = json.loads(path.read_text())
    autograder = folder / "autograder.zip"
    key = json.loads((folder / "key.ipynb").read_text())
    student, _ = student_edition.split_notebook(book)
    problems = check_three(folder, out, book)
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
    return problems


def check_week(week: course.Week, out: Path, wheel: Path, measured: dict | None = None) -> list[str]:
    """Write one week's autograder and grade its key (full marks) and student edition (zero) with ``otter run``;
    the problems found. ``measured`` gets what :func:`course.measured_table` shows of the week."""
    folder = write_week(week, out, wheel)
    timings: dict = {}
    problems = check_three(folder, out, course.week_book(week), timings, wrong=False)
    seconds, score = timings["key"]
    print(f"{week.name} ({', '.join(week.sections)}): the key graded in {seconds:.0f} s", flush=True)
    if measured is not None:
        measured.setdefault("weeks", {}).setdefault(str(week.number), {}).update(
            key_seconds=round(seconds, 1), key_score=score)
    return problems


def zip_requirements(autograder: Path, source: Path, torch_index: str) -> tuple[str, list[str]]:
    """The Python version and pip requirements that the zip's environment.yml installs, as a clean environment here
    installs them: the zip unpacked in ``source`` instead of Gradescope's /autograder/source, and PyTorch's CPU index
    in torch's address replaced by ``torch_index`` (none: the same pin and hash from wherever pip looks, as
    ``make TORCH_INDEX=`` does). Every line keeps its hashes."""
    import yaml

    from scripts.book_release import TORCH_CPU_INDEX, torch_cpu_requirement

    with zipfile.ZipFile(autograder) as archive:
        archive.extractall(source)
    environment = yaml.safe_load((source / "environment.yml").read_text())
    python = next(str(d).split("=", 1)[1] for d in environment["dependencies"] if str(d).startswith("python="))
    listed = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict) and "pip" in d)
    requirements = []
    for line in listed:
        line = line.replace(GRADESCOPE_SOURCE, str(source))
        if line.startswith(f"torch @ {TORCH_CPU_INDEX}/"):
            address, hashes = line.split(" ", 2)[2].split(" ", 1)
            line = (f"torch @ {torch_index.rstrip('/')}/{address.rsplit('/', 1)[1]} {hashes}" if torch_index
                    else f"{torch_cpu_requirement()} {hashes}")
        requirements.append(line)
    return python, requirements


def what_it_installs(autograder: Path) -> tuple[bytes, bytes]:
    """What a zip's environment installs: its environment.yml and the wheel of the package it carries."""
    with zipfile.ZipFile(autograder) as archive:
        wheels = [name for name in archive.namelist() if name.startswith("files/") and name.endswith(".whl")]
        return archive.read("environment.yml"), b"".join(archive.read(name) for name in sorted(wheels))


def folder_mib(folder: Path) -> float:
    """The MiB the files under ``folder`` take (each counted once, links not followed)."""
    return sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink()) / 2**20


def clean_check(bundles: list[tuple[Path, dict]], out: Path, torch_index: str,
                measured: dict | None = None) -> list[str]:
    """Build a fresh virtual environment from nothing but the first bundle's autograder.zip (its environment.yml's
    Python and pip list, the wheel it carries) and grade each bundle's key, student edition and a wrong answer there
    with that environment's own ``otter run``; the problems found. ``bundles``: (an autograder's folder, the book
    notebook it grades). A zip that installs anything else than the first (another environment.yml or wheel) is a
    problem: it would need an environment of its own."""
    from scripts.colab_like_check import clean_environment, run

    started = time.monotonic()
    autograder = bundles[0][0] / "autograder.zip"
    work = Path(tempfile.mkdtemp(prefix="grading-clean-"))
    try:
        version, requirements = zip_requirements(autograder, work / "autograder" / "source", torch_index)
        python = shutil.which(f"python{version}")
        if python is None:
            return [f"the zip asks for Python {version}, and python{version} is not on PATH: install it (the "
                    "Makefile needs it too) and run again"]
        venv = work / "venv"
        run([python, "-m", "venv", venv])
        (work / "requirements.txt").write_text("\n".join(requirements) + "\n")
        environment = clean_environment(venv) | {"JUPYTER_DATA_DIR": str(work / "jupyter-data")}
        installing = time.monotonic()
        run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--require-hashes", "-r", work / "requirements.txt"], env=environment, cwd=work)
        installed = time.monotonic() - installing
        probe = run([venv / "bin" / "python", "-c", "import mha, otter, torch; print(mha.__file__, torch.__version__)"],
                    env=environment, cwd=work).stdout.split()
        if not Path(probe[0]).resolve().is_relative_to(venv.resolve()) or not probe[1].startswith(version_of_torch()):
            return [f"the clean environment's mha or torch is not the zip's: {probe}"]
        size = folder_mib(venv)
        print(f"a clean Python {version} environment from {autograder.relative_to(out)} alone "
              f"({autograder.stat().st_size / 2**20:.1f} MiB): {size:,.0f} MiB, installed in {installed:.0f} s, mha "
              f"from the zip's wheel, torch {probe[1]}", flush=True)
        if measured is not None:
            measured["environment"] = {"zip": bundles[0][0].name.replace("_", " "), "python": version,
                                       "size_mib": round(size), "install_seconds": round(installed)}
        problems, installs = [], what_it_installs(autograder)
        for folder, book in bundles:
            if what_it_installs(folder / "autograder.zip") != installs:
                problems.append(f"{folder.relative_to(out)}: its zip installs something else than "
                                f"{autograder.relative_to(out)} (environment.yml or wheel); grade it in its own clean "
                                "environment")
                continue
            grading = time.monotonic()
            problems += check_three(folder, out, book, otter=venv / "bin" / "otter", environment=environment)
            print(f"{folder.relative_to(out)}: graded three submissions there in {time.monotonic() - grading:.0f} s",
                  flush=True)
        print(f"the whole clean check took {time.monotonic() - started:.0f} s", flush=True)
        return problems
    finally:
        shutil.rmtree(work, ignore_errors=True)


def version_of_torch() -> str:
    """The torch version requirements.txt pins (``2.13.0``)."""
    from scripts.book_release import pinned

    return pinned("torch").split("==", 1)[1]


def release(argument: str, student: Path, today: str | None = None) -> int:
    """``--release-solutions``: write the answer key of the weeks ``argument`` names (a week's number: weeks 1 to it;
    ``due``: every week whose deadline in chapters/syllabus.yml has passed) into the student folder ``student``."""
    weeks = course.read_syllabus()
    try:
        through = None if argument == "due" else int(argument)
        released = course.due_weeks(weeks, through, datetime.date.fromisoformat(today) if today else None)
    except ValueError as error:
        raise SystemExit(f"--release-solutions {argument}: {error}") from None
    written = course.release_solutions(student, released)
    print(f"released the solutions of week{'s' if len(written) != 1 else ''} "
          f"{', '.join(str(each.number) for each in released) or 'none'} into {student / 'solutions'}")
    return 0


def main() -> int:
    from scripts.book_release import TORCH_CPU_INDEX

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "_build" / "grading"))
    parser.add_argument("--check", nargs="*", help="notebooks to grade key, student edition and a wrong answer of")
    parser.add_argument("--clean-check", nargs="*", help="notebooks whose zip builds a clean environment in which the "
                                                         "key, the student edition and a wrong answer are graded")
    parser.add_argument("--clean-check-week", type=int, action="append", default=[],
                        help="a week whose zip is graded in a clean environment built from the zip alone (repeat for "
                             "more: one environment for all, when their zips install the same)")
    parser.add_argument("--points", type=parse_points, default=POINTS_BY_DIFFICULTY,
                        help="the points of a ★, a ★★ and a ★★★ exercise (default 2,3,5)")
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX", TORCH_CPU_INDEX),
                        help="with --clean-check: where torch comes from instead of the zip's PyTorch CPU index; "
                             "empty: wherever pip looks (a local wheel), as `make TORCH_INDEX=` (default: "
                             "$TORCH_INDEX, else the zip's)")
    parser.add_argument("--week", type=int, action="append", default=[],
                        help="write only this week's autograder (repeat for more): one per week of the syllabus")
    parser.add_argument("--all-weeks", action="store_true", help="write only the weekly autograders, every week's")
    parser.add_argument("--check-week", type=int, action="append", default=[],
                        help="write this week's autograder and grade its key (full marks) and student edition (zero)")
    parser.add_argument("--record", action="store_true", help="with --week, --all-weeks, --check-week or "
                        "--clean-check-week: record "
                        "what was measured in chapters/grading_measurements.json and the instructors' page")
    parser.add_argument("--release-solutions", metavar="WEEK", help="write the answer key of weeks 1 to WEEK, or "
                        "with 'due' of every week whose deadline has passed, into the student folder")
    parser.add_argument("--student-out", type=Path, default=ROOT / "_build" / "student",
                        help="with --release-solutions: the student folder (default _build/student)")
    parser.add_argument("--today", help="with --release-solutions due: the day to compare deadlines with (YYYY-MM-DD)")
    args = parser.parse_args()
    if args.release_solutions:
        return release(args.release_solutions, args.student_out, args.today)
    out = Path(args.out).resolve()  # otter runs in the notebook's folder
    wheel = build_package(out)
    weeks = course.read_syllabus()
    measured: dict = {"weeks": {}}
    if args.week or args.all_weeks:
        for each in weeks if args.all_weeks else [course.week(number, weeks) for number in args.week]:
            folder = write_week(each, out, wheel, args.points)
            measured["weeks"][str(each.number)] = described = course.describe_week(each, folder)
            print(f"{folder.relative_to(out)} ({', '.join(each.sections)}): {described['exercises']} exercises, "
                  f"{described['points']:g} points, autograder.zip ({described['zip_mib']:.1f} MiB)")
    if args.check or args.clean_check or args.check_week or args.clean_check_week:
        problems = [problem for path in args.check or [] for problem in check_grading(Path(path).resolve(), out, wheel)]
        bundles = [(write_autograder(Path(path).resolve(), out, wheel), json.loads(Path(path).read_text()))
                   for path in args.clean_check or []]
        bundles += [(write_week(course.week(number, weeks), out, wheel), course.week_book(course.week(number, weeks)))
                    for number in args.clean_check_week]
        problems += clean_check(bundles, out, args.torch_index, measured) if bundles else []
        problems += [problem for number in args.check_week
                     for problem in check_week(course.week(number, weeks), out, wheel, measured)]
        print(
            "\n".join(problems)
            or "grading works: full marks for the key, zero for the student edition, partial "
            "credit with feedback for a wrong answer"
            + (" (patched or not), a hang costs only its exercise" if args.check else "")
            + ("; in a clean environment built from the zip alone" if bundles else "")
            + ("; a week's autograder grades its sections' notebook as one" if args.check_week else "")
        )
        if args.record and not problems:
            course.record_measurements(measured)
        return 1 if problems else 0
    if args.week or args.all_weeks:
        if args.record:
            course.record_measurements(measured)
        return 0
    notebooks = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for path in notebooks:
        folder = write_autograder(path, out, wheel, args.points)
        size = (folder / "autograder.zip").stat().st_size / 2**20
        print(f"{folder.relative_to(out)}: {len(list((folder / 'tests').glob('*.py')))} exercises, "
              f"autograder.zip ({size:.1f} MiB)")
    for each in weeks:
        folder = write_week(each, out, wheel, args.points)
        print(f"{folder.relative_to(out)} ({', '.join(each.sections)}): one autograder for the week's notebook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
