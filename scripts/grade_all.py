"""Grade a folder of submitted notebooks with one autograder and write a gradebook CSV (instructors' page, "Grading").

    python -m scripts.grade_all submissions/ \
        --autograder _build/grading/1_mechanism/1_attention_from_scratch/autograder.zip
    python -m scripts.grade_all submissions/ --autograder ... --out gradebook.csv --jobs 2

Each file in the folder is one student's submission, named by the file's name without its suffix (``ada.ipynb`` ->
``ada``). Every exercise of the autograder gets one row: ``student``, ``exercise``, ``points``, ``max_points``,
``message`` (what the failing cases said, or the check's success line). Grading takes the path an ``otter run`` of
the zip takes (:func:`mha.exercises.grading.otter_plugin.grade_test`, with the zip's own seeds, limits and points),
without starting a kernel: each student's code runs in a sandbox of its own, each exercise's function in a fresh
process there. A file that is not a notebook, or a notebook for another section, gets rows with a message saying so,
and the other students are graded. Where no isolation is available it refuses, and says why (``--unconfined``
grades anyway, for submissions you trust).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mha.exercises.grading import protected_folders
from mha.exercises.grading.confinement import UNCONFINED_VARIABLE, Unconfined
from mha.exercises.grading.otter_plugin import Test, grade_test, limits_of, read_test
from mha.exercises.grading.sandbox import Sandbox
from mha.exercises.grading.submission import read_submission

PLUGIN = "mha.exercises.grading.otter_plugin.IsolatedGrading"
COLUMNS = ("student", "exercise", "points", "max_points", "message")


def read_autograder(autograder: Path, folder: Path) -> tuple[dict, list[Test]]:
    """The plugin's configuration and the tests of an autograder.zip, unpacked into ``folder`` (its tests/ stays
    there, unreadable from a submission, as in ``otter run``)."""
    try:
        with zipfile.ZipFile(autograder) as archive:
            archive.extractall(folder)
    except (OSError, zipfile.BadZipFile) as error:
        raise SystemExit(f"{autograder} is not an autograder.zip ({error}): pass one that scripts/grading.py wrote, "
                         "e.g. _build/grading/1_mechanism/1_attention_from_scratch/autograder.zip") from None
    config_file = folder / "otter_config.json"
    plugins = json.loads(config_file.read_text()).get("plugins", []) if config_file.exists() else []
    config = next((entry[PLUGIN] for entry in plugins if isinstance(entry, dict) and PLUGIN in entry), None)
    if config is None:
        raise SystemExit(f"{autograder} does not grade with {PLUGIN}: write it again with scripts/grading.py")
    tests = sorted((read_test(path.read_text()) for path in (folder / "tests").glob("*.py")), key=lambda t: t.name)
    return config, [test for test in tests if test.name in config["exercises"]]


def grade_file(student: str, notebook: bytes, config: dict, tests: list[Test], folder: Path,
               protected: list[str]) -> list[dict]:
    """The gradebook rows of one submitted file (its ``notebook`` text, read before any submission ran), graded in a
    sandbox of its own: one row per test, a clear message where it could not be graded."""
    try:
        submission = read_submission(notebook.decode("utf-8", errors="replace"))
        rows = []
        with Sandbox(protected, limits_of(config)) as sandbox:
            for test in tests:
                results = grade_test(submission, test.name, [case for case, _ in test.cases], config,
                                     folder / "tests", sandbox=sandbox)
                points = sum(share for (_, share), result in zip(test.cases, results, strict=True) if result.passed)
                failed = list(dict.fromkeys(result.message for result in results if not result.passed))
                message = " | ".join(failed) if failed else results[0].message
                rows.append({"student": student, "exercise": test.name, "points": f"{points:g}",
                             "max_points": f"{test.max_points:g}", "message": message})
        return rows
    except Unconfined:
        raise
    except Exception as error:  # one bad file costs its own rows, never the gradebook
        return [{"student": student, "exercise": test.name, "points": "0", "max_points": f"{test.max_points:g}",
                 "message": f"✗ {student}'s file could not be graded ({type(error).__name__}: {error}); grade it "
                            "alone with otter run -a <autograder.zip> to see more"} for test in tests]


def grade_all(submissions: Path, autograder: Path, jobs: int = 2) -> list[dict]:
    """Every row of the gradebook of the files in ``submissions`` (hidden files skipped), graded by ``autograder``.

    Every file is read before any is graded, and each is graded in a sandbox of its own from which the submissions'
    folder, the autograder's and the book's package are out of reach
    (:class:`~mha.exercises.grading.sandbox.Sandbox`)."""
    files = sorted(path for path in submissions.iterdir() if not path.name.startswith("."))
    if not files:
        raise SystemExit(f"{submissions} holds no submissions: put one notebook per student there")
    notebooks = {}
    for path in files:
        try:
            notebooks[path.stem] = path.read_bytes()
        except OSError as error:
            notebooks[path.stem] = str(error).encode()  # graded as "not a notebook", with the others
    with tempfile.TemporaryDirectory(prefix="grade-all-") as work:
        folder = Path(work)
        config, tests = read_autograder(autograder, folder)
        protected = protected_folders(folder, submissions.resolve())
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            graded = list(pool.map(lambda item: grade_file(*item, config, tests, folder, protected),
                                   notebooks.items()))
    return [row for rows in graded for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="a folder with one submitted notebook per student")
    parser.add_argument("--autograder", type=Path, required=True, help="an autograder.zip from scripts/grading.py")
    parser.add_argument("--out", type=Path, default=Path("gradebook.csv"), help="the CSV to write (gradebook.csv)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at a time (2)")
    parser.add_argument("--unconfined", action="store_true",
                        help="grade even where no isolation is available (the submissions' code then runs as you): "
                             "only for submissions you trust")
    args = parser.parse_args(argv)
    if args.unconfined:
        os.environ[UNCONFINED_VARIABLE] = "1"
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder: pass the folder that holds the submitted notebooks")
    try:
        rows = grade_all(args.submissions, args.autograder, args.jobs)
    except Unconfined as refused:
        print(refused, file=sys.stderr)
        return 2
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    totals: dict[str, list[float]] = {}
    for row in rows:
        total = totals.setdefault(row["student"], [0.0, 0.0])
        total[0] += float(row["points"])
        total[1] += float(row["max_points"])
    for student, (points, possible) in totals.items():
        print(f"{student}: {points:g} / {possible:g}")
    print(f"{len(totals)} submissions, {len(rows)} rows: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
