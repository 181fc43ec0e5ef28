"""The code is lint-clean: ruff, configured in pyproject.toml (``[tool.ruff]``), finds nothing in src, tests, scripts
and site."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
CHECKED = ["src", "tests", "scripts", "website"]

# files whose remaining findings wait on their owner, with the codes they may still show; an entry fails the test
# once its file no longer needs it, so the list only shrinks
WAITING: dict[str, set[str]] = {}


def ruff(*arguments: str, stdin: str | None = None) -> list[dict]:
    assert RUFF.exists(), "ruff is not installed: pip install -r requirements.txt"
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "json", *arguments], cwd=ROOT,
                            input=stdin, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr  # 1: findings; anything else: ruff itself failed
    return json.loads(result.stdout)


def test_ruff_finds_nothing_in_the_code():
    findings = ruff(*CHECKED)
    where = {}
    for finding in findings:
        path = Path(finding["filename"]).resolve().relative_to(ROOT).as_posix()
        where.setdefault(path, []).append(finding)
    excused = {path for path, codes in WAITING.items() if {f["code"] for f in where.get(path, [])} <= codes}
    unexcused = [f"{path}:{f['location']['row']}: {f['code']} {f['message']}"
                 for path, found in sorted(where.items()) if path not in excused for f in found]
    assert not unexcused, ("ruff finds these (`ruff check --fix` sorts imports; wrap long lines by hand):\n"
                           + "\n".join(unexcused))
    settled = sorted(path for path in WAITING if path not in where)
    assert not settled, f"these files are clean now: remove them from WAITING: {settled}"


def test_the_configuration_in_pyproject_is_the_one_in_force():
    # the project's line length (120, not ruff's 88), its import order (mha first-party) and one place for it all
    assert not (ROOT / "ruff.toml").exists() and not (ROOT / ".ruff.toml").exists()
    probe = "src/mha/lint_probe.py"
    line = "x = 1  # " + " ".join(["word"] * 21) + " wordly"  # 120 characters, in words (one long word is excused)
    assert len(line) == 120
    assert ruff("--stdin-filename", probe, "-", stdin=line + "\n") == []
    assert [f["code"] for f in ruff("--stdin-filename", probe, "-", stdin=line + "s\n")] == ["E501"]
    unsorted = "import numpy\n\nimport mha\nimport os\n\nprint(numpy, mha, os)\n"  # os is standard library
    assert [f["code"] for f in ruff("--stdin-filename", probe, "-", stdin=unsorted)] == ["I001"]
    grouped = "import os\n\nimport numpy\n\nimport mha\n\nprint(numpy, mha, os)\n"
    assert ruff("--stdin-filename", probe, "-", stdin=grouped) == []
