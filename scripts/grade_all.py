"""Grade a folder of submitted notebooks with one autograder and write a gradebook CSV (instructors' page, "Grading").

    python -m scripts.grade_all submissions/ \
        --autograder _build/grading/1_mechanism/1_attention_from_scratch/autograder.zip
    python -m scripts.grade_all submissions/ --autograder ... --out gradebook.csv --jobs 2

Each file in the folder is one student's submission, named by the file's name without its suffix (``ada.ipynb`` ->
``ada``). Every exercise of the autograder gets one row: ``student``, ``exercise``, ``points``, ``max_points``,
``message`` (what the failing cases said, or the check's success line). Grading takes the path an ``otter run`` of
the zip takes (:func:`mha.exercises.grading.otter_plugin.grade_test`, with the zip's own seeds, limits and points),
without starting a kernel: each exercise's function runs in a fresh process. A file that is not a notebook, or a
notebook for another section, gets rows with a message saying so, and the other students are graded.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mha.exercises.grading.otter_plugin import grade_test
from mha.exercises.grading.submission import read_submission

PLUGIN = "mha.exercises.grading.otter_plugin.IsolatedGrading"
COLUMNS = ("student", "exercise", "points", "max_points", "message")


@dataclass
class Test:
    """One otter test file of the autograder: its name and each case's name and points."""

    name: str
    cases: list[tuple[str, float]]

    @property
    def max_points(self) -> float:
        return sum(points for _, points in self.cases)


def read_test(source: str) -> Test:
    """An otter test file's name and cases (``@test_case(points=..., hidden=...)`` functions), read without running
    it."""
    tree = ast.parse(source)
    name, cases = None, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["name"]:
            name = ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "test_case":
                    points = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords}.get("points", 0)
                    cases.append((node.name, float(points)))
    if name is None or not cases:
        raise ValueError("an otter test file without a name or test cases: is this a zip from scripts/grading.py?")
    return Test(name, cases)


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


def grade_file(path: Path, config: dict, tests: list[Test], folder: Path) -> list[dict]:
    """The gradebook rows of one submitted file: one per test, a clear message where it could not be graded."""
    student = path.stem
    try:
        submission = read_submission(path)
        rows = []
        for test in tests:
            results = grade_test(submission, test.name, [case for case, _ in test.cases], config, folder / "tests")
            points = sum(share for (_, share), result in zip(test.cases, results) if result.passed)
            failed = list(dict.fromkeys(result.message for result in results if not result.passed))
            message = " | ".join(failed) if failed else results[0].message
            rows.append({"student": student, "exercise": test.name, "points": f"{points:g}",
                         "max_points": f"{test.max_points:g}", "message": message})
        return rows
    except Exception as error:  # one bad file costs its own rows, never the gradebook
        return [{"student": student, "exercise": test.name, "points": "0", "max_points": f"{test.max_points:g}",
                 "message": f"✗ {path.name} could not be graded ({type(error).__name__}: {error}); grade it alone with "
                            "otter run -a <autograder.zip> to see more"} for test in tests]


def grade_all(submissions: Path, autograder: Path, jobs: int = 2) -> list[dict]:
    """Every row of the gradebook of the files in ``submissions`` (hidden files skipped), graded by ``autograder``."""
    files = sorted(path for path in submissions.iterdir() if not path.name.startswith("."))
    if not files:
        raise SystemExit(f"{submissions} holds no submissions: put one notebook per student there")
    with tempfile.TemporaryDirectory(prefix="grade-all-") as work:
        folder = Path(work)
        config, tests = read_autograder(autograder, folder)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            graded = list(pool.map(lambda path: grade_file(path, config, tests, folder), files))
    return [row for rows in graded for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="a folder with one submitted notebook per student")
    parser.add_argument("--autograder", type=Path, required=True, help="an autograder.zip from scripts/grading.py")
    parser.add_argument("--out", type=Path, default=Path("gradebook.csv"), help="the CSV to write (gradebook.csv)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at a time (2)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder: pass the folder that holds the submitted notebooks")
    rows = grade_all(args.submissions, args.autograder, args.jobs)
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
