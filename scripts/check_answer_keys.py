"""Grade every section's answer key through the isolated grader and fail unless each exercise gets full marks
(instructors' page, "Grading"; ``.ci/run`` runs it).

The book's own notebooks run each check in the learner's kernel, where the package is importable; the grade comes
from a fresh process that cannot import it (:mod:`mha.exercises.grading.sandbox`). A check that sends the learner's
function an object of the package's (a task, a model) passes in the notebook and scores 0 when graded, and nothing else
would notice. So every "Write and check" exercise of every section is graded here as an autograder grades it:
its function read from the answer key (scripts/grading.py's ``key_submission``), run by
:func:`mha.exercises.grading.grade_exercise` on the check's public inputs and two hidden seeds drawn afresh (printed,
so that a failure can be repeated with ``--seeds``). Exercises are graded side by side, each in its own process.

    python -m scripts.check_answer_keys [--jobs 2] [--seeds 11,12] [chapters/<part>/<notebook>.ipynb ...]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.check_answer_keys")
from scripts import grading  # noqa: E402


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 11,12`` as ``(11, 12)``: the hidden seeds to grade with."""
    try:
        seeds = tuple(int(part) for part in text.split(","))
    except ValueError:
        seeds = ()
    if not seeds or any(seed < 0 for seed in seeds):
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: give non-negative whole numbers separated by commas, "
                                         "e.g. --seeds 11,12")
    return seeds


def graded_exercises(paths: list[Path]) -> list[tuple[str, dict, dict]]:
    """(section, exercise, key submission) for every "Write and check" exercise of the notebooks ``paths``."""
    found = []
    for path in paths:
        book = json.loads(path.read_text())
        key = grading.key_submission(book)
        section = str(path.relative_to(ROOT / "chapters").with_suffix(""))
        found += [(section, exercise, key) for exercise in grading.exercises_of(book)]
    return found


def grade_key(section: str, exercise: dict, key: dict, seeds: tuple[int, ...], functions: list[str]) -> str | None:
    """What went wrong grading one exercise of a key (public inputs and ``seeds``), or None when every case passed."""
    from mha.exercises.grading import grade_exercise

    with_seeds = [None, *seeds] if grading.takes_seed_of(exercise) else [None]
    results = grade_exercise(key, exercise["module"], exercise["check"], exercise["function"], seeds=with_seeds,
                             notebook_functions=functions)
    failed = [f"{'public inputs' if seed is None else f'seed {seed}'}: {result.message}"
              for seed, result in zip(with_seeds, results, strict=True) if not result.passed]
    return f"{section}, {exercise['label']} ({exercise['check']}): " + "; ".join(failed) if failed else None


def check_keys(paths: list[Path], seeds: tuple[int, ...], jobs: int) -> list[str]:
    """Grade every exercise of the notebooks ``paths`` from its key, ``jobs`` at a time; the problems found."""
    exercises = graded_exercises(paths)
    functions = {section: [e["function"] for s, e, _ in exercises if s == section] for section, _, _ in exercises}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        found = pool.map(lambda item: grade_key(*item, seeds, functions[item[0]]), exercises)
        problems = [problem for problem in found if problem]
    print(f"{len(exercises)} exercises of {len(functions)} sections graded from their keys", flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to check (default: every notebook)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="exercises graded at a time")
    parser.add_argument("--seeds", type=parse_seeds, help="the hidden seeds (default: two drawn afresh)")
    args = parser.parse_args(argv)
    paths = [path.resolve() for path in args.notebooks] or sorted(
        p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for path in paths:
        if not path.is_file() or not path.is_relative_to(ROOT / "chapters"):
            parser.error(f"{path} is not a notebook of the book: pass notebooks under chapters/")
    seeds = args.seeds or tuple(3 + secrets.randbelow(2**31) for _ in grading.HIDDEN_SEEDS)
    started = time.monotonic()
    print(f"hidden seeds {','.join(map(str, seeds))} (repeat with --seeds)", flush=True)
    problems = check_keys(paths, seeds, args.jobs)
    took = time.monotonic() - started
    print("\n".join(problems) if problems else
          f"every answer key gets full marks from the isolated grader ({took:.0f} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
