"""The student website's source and the student branch (scripts/student_site.py): the book's pages without a
solution, hints kept, a configuration that executes nothing and launches the student branch, solutions listed only
once released, and a branch committed without touching the working tree.

Building the website takes minutes (``make student-site``); these tests check what it is built from.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
site_script = load_script("student_site")
course = load_script("course")
book_release = load_script("book_release")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    course.release_solutions(out, [course.week(1)])
    return site_script.write_site(out)


def test_the_student_site_has_every_page_of_the_book_and_the_released_solutions(site):
    toc = yaml.safe_load((site / "_toc.yml").read_text())
    book_pages = site_script.toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    pages = site_script.toc_files(toc)
    assert pages == [*book_pages, "solutions/week_1"], "the book's pages, then the weeks released so far"
    for page in pages:
        found = [path for path in (site / f"{page}.ipynb", site / f"{page}.md") if path.is_file()]
        assert len(found) == 1, f"{page} is missing from the student site's source"
    notebooks = [page for page in book_pages if (ROOT / f"{page}.ipynb").exists()]
    assert len(notebooks) == len(list((ROOT / "chapters").rglob("[0-9]_*.ipynb"))) + 2  # and the two background ones
    assert all((site / f"{page}.ipynb").is_file() and not (site / f"{page}.md").exists() for page in notebooks)


def test_no_page_of_the_student_site_holds_a_solution_and_every_hint_is_kept(site):
    for page in site_script.toc_files(yaml.safe_load((site / "_toc.yml").read_text())):
        if page.startswith("solutions/"):
            continue
        path = next(p for p in (site / f"{page}.ipynb", site / f"{page}.md") if p.is_file())
        text = path.read_text()
        assert "{solution-start}" not in text and "{solution-end}" not in text and "{solution}" not in text, page
        assert text.count("{hint}") == (ROOT / path.relative_to(site)).read_text().count("{hint}"), page
    key_code = "def solution_softmax"  # 1.1's solution, released with week 1 only
    assert key_code not in (site / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb").read_text()
    assert key_code in (site / "solutions" / "week_1.md").read_text()


def test_the_student_site_executes_nothing_and_launches_the_student_branch(site):
    config = yaml.safe_load((site / "_config.yml").read_text())
    book = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["repository"] == book["repository"] | {"branch": site_script.STUDENT_BRANCH}
    assert config["launch_buttons"] == book["launch_buttons"] and "student edition" in config["title"]
    assert set(config["sphinx"]["local_extensions"]) == set(book["sphinx"]["local_extensions"])
    for path in config["sphinx"]["local_extensions"].values():
        assert Path(path).is_absolute() and Path(path).is_dir()
    favicon = site / config["html"]["favicon"]  # Sphinx reads it from the site's folder; -W fails on a missing file
    assert favicon.is_file() and favicon.read_bytes() == (ROOT / book["html"]["favicon"]).read_bytes()
    assert (site / "references.bib").read_text() == (ROOT / "references.bib").read_text()


@pytest.mark.slow
def test_a_solutions_page_disappears_when_its_week_is_no_longer_released(tmp_path):
    course.release_solutions(tmp_path, [course.week(1), course.week(2)])
    site_script.write_site(tmp_path)
    (tmp_path / "solutions" / "week_2.md").unlink()
    site = site_script.write_site(tmp_path)
    assert sorted(path.name for path in (site / "solutions").iterdir()) == ["week_1.md"]


def test_the_student_branch_holds_the_student_edition_and_installs_the_package_from_its_release(tmp_path):
    (tmp_path / "chapters" / "1_mechanism").mkdir(parents=True)
    (tmp_path / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb").write_text("{}")
    (tmp_path / "answer_key").mkdir()
    branch = site_script.write_branch(tmp_path)
    assert (branch / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb").is_file()
    assert not (branch / "answer_key").exists(), "the answer key stays with the instructor"
    requirements = (branch / "binder" / "requirements.txt").read_text().splitlines()
    assert "." not in requirements and not [line for line in requirements if "mha" in line.split("==")[0]]
    post_build = (branch / "binder" / "postBuild").read_text().splitlines()
    assert post_build[-1].endswith(f'"{book_release.release_requirement()}"') and "git+" in post_build[-1]
    assert (branch / "binder" / "runtime.txt").read_text() == "python-3.11\n"


def git(repository: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(repository), *arguments], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_committing_the_student_branch_leaves_the_working_tree_and_index_alone(tmp_path):
    repository = tmp_path / "repository"
    repository.mkdir()
    git(repository, "init", "--quiet", "--initial-branch", "main")
    git(repository, "config", "user.email", "instructor@example.edu")
    git(repository, "config", "user.name", "An instructor")
    (repository / "book.md").write_text("the book\n")
    git(repository, "add", "book.md")
    git(repository, "commit", "--quiet", "-m", "the book")
    (repository / "draft.md").write_text("not committed\n")
    tree = tmp_path / "branch"
    (tree / "weeks").mkdir(parents=True)
    (tree / "weeks" / "week_1.ipynb").write_text(json.dumps({"cells": []}))
    first = site_script.commit_branch(tree, repository)
    assert git(repository, "ls-tree", "-r", "--name-only", "student").splitlines() == ["weeks/week_1.ipynb"]
    (tree / "solutions").mkdir()
    (tree / "solutions" / "week_1.md").write_text("# Solutions\n")
    second = site_script.commit_branch(tree, repository)
    assert git(repository, "rev-parse", f"{second}^") == first, "a release adds a commit on top of the last"
    assert git(repository, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(repository, "status", "--porcelain").splitlines() == ["?? draft.md"]
    assert git(repository, "ls-files").splitlines() == ["book.md"]
