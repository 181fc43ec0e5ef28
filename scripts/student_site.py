"""The student edition as a website and as a branch that Binder, Colab and a JupyterHub open (instructors' page,
"Handing out the exercises").

After scripts/student_edition.py has written the student notebooks into ``<out>/chapters`` (``make student``):

- ``<out>/weeks/week_N.ipynb``: each week of chapters/syllabus.yml as one notebook, the one students hand in
  (scripts/course.py);
- ``<out>/site/``: the source of the student website, the book's pages with every solution block removed
  (scripts/student_edition.py's ``split_notebook``; hints, glued numbers and views kept) and its own ``_config.yml``
  and ``_toc.yml``: execution off (the stored outputs are the book's), launch buttons on the student branch, and a
  "Solutions" part listing the weeks released so far (``<out>/solutions``). ``make student-site`` builds it into
  ``<out>/html``;
- ``<out>/branch/``: what the student branch holds: the student notebooks (``chapters/``), the weekly notebooks
  (``weeks/``), released solutions (``solutions/``) and ``binder/``, which installs the package from its release's
  commit (there is no package source on that branch). ``--commit`` records it as the local branch
  :data:`STUDENT_BRANCH` without touching the working tree; publish it with ``git push origin student``.

    python -m scripts.student_site [--out _build/student] [--commit]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.student_site")
from scripts import course, hosting_files, student_edition  # noqa: E402

STUDENT_BRANCH = "student"
"""The branch that holds the student edition: hosting links made with ``--student`` open it."""


def toc_files(toc: dict) -> list[str]:
    """Every file a Jupyter Book table of contents names, in order (without suffixes)."""
    found = [toc["root"]] if "root" in toc else []
    for key in ("parts", "chapters", "sections"):
        for entry in toc.get(key, []):
            found += ([entry["file"]] if "file" in entry else []) + toc_files(entry)
    return found


def site_toc(released: list[str]) -> dict:
    """The book's table of contents, with a "Solutions" part for each released week's page (``solutions/week_N``)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    if released:
        toc["parts"].append({"caption": "Solutions", "chapters": [{"file": f"solutions/{name}"} for name in released]})
    return toc


def site_config() -> dict:
    """The book's ``_config.yml`` for the student website: its title says so, nothing is executed (the student
    notebooks keep the book's stored outputs), the site's extensions come from the repository's website/, and the
    launch buttons open the student branch (not the reader edition's, website/reader_buttons.py)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = f"{config['title']} (student edition)"
    config["execute"]["execute_notebooks"] = "off"
    config["repository"]["branch"] = STUDENT_BRANCH
    config["sphinx"].setdefault("config", {})["reader_edition_branch"] = ""  # its buttons open the student branch
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path)
                                            for name, path in config["sphinx"]["local_extensions"].items()}
    if config.get("html", {}).get("favicon"):  # the book's path is relative to the repository, not to website/
        config["html"]["favicon"] = str(ROOT / config["html"]["favicon"])
    return config


def write_site(out: Path) -> Path:
    """The student website's source in ``out``/site (see the module's docstring); returns that folder."""
    site = out / "site"
    released = sorted(path.stem for path in (out / "solutions").glob("week_*.md"))
    toc = site_toc(released)
    for page in toc_files(toc):
        source, target = ROOT / page, site / page
        target.parent.mkdir(parents=True, exist_ok=True)
        if page.startswith("solutions/"):
            shutil.copy2(out / f"{page}.md", target.with_suffix(".md"))
        elif source.with_suffix(".ipynb").exists():
            student, _ = student_edition.split_notebook(json.loads(source.with_suffix(".ipynb").read_text()))
            target.with_suffix(".ipynb").write_text(json.dumps(student, indent=1, ensure_ascii=False) + "\n")
        else:
            shutil.copy2(source.with_suffix(".md"), target.with_suffix(".md"))
    for old in (site / "solutions").glob("week_*.md"):
        if old.stem not in released:
            old.unlink()
    (site / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    (site / "_config.yml").write_text(yaml.safe_dump(site_config(), sort_keys=False))
    shutil.copy2(ROOT / "references.bib", site / "references.bib")
    modules = site / "node_modules"  # website/offline_site.py takes the site's scripts from the source's node_modules
    if not modules.exists() and (ROOT / "node_modules").exists():
        modules.symlink_to(ROOT / "node_modules")
    return site


def write_binder(branch: Path) -> None:
    """Binder's files in the folder of a branch that holds no package source (the student branch, the reader
    branch of scripts/reader_edition.py): ``binder/`` installs the package from its release's commit."""
    (branch / "binder").mkdir(parents=True)
    (branch / "binder" / "requirements.txt").write_text(hosting_files.binder_requirements())
    (branch / "binder" / "postBuild").write_text(hosting_files.binder_post_build(package="release"))
    (branch / "binder" / "postBuild").chmod(0o755)
    (branch / "binder" / "runtime.txt").write_text(hosting_files.binder_runtime())


def write_branch(out: Path) -> Path:
    """What the student branch holds, in ``out``/branch: the student notebooks, the weekly notebooks, the released
    solutions and Binder's files; returns that folder."""
    branch = out / "branch"
    shutil.rmtree(branch, ignore_errors=True)
    for folder in ("chapters", "weeks", "solutions"):
        if (out / folder).exists():
            shutil.copytree(out / folder, branch / folder)
    write_binder(branch)
    (branch / "README.md").write_text(
        "# The student edition\n\nThe book's notebooks without their solutions (`chapters/`), each week's assignment "
        "as one notebook (`weeks/`), and the solutions released so far (`solutions/`). Written by "
        "scripts/student_site.py on the book's main branch: do not edit here.\n")
    return branch


def commit_branch(tree: Path, repository: Path = ROOT, branch: str = STUDENT_BRANCH,
                  message: str = "The student edition, written by scripts/student_site.py") -> str:
    """Record the folder ``tree`` as the next commit of ``branch`` in ``repository``, through a temporary index, so
    that neither the working tree nor the index changes; the new commit's id (the reader branch is recorded so too,
    scripts/reader_edition.py)."""
    def git(*arguments: str, **environment: str) -> str:
        done = subprocess.run(["git", "-C", str(repository), *arguments], capture_output=True, text=True,
                              env=os.environ | environment)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(arguments)} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    with tempfile.TemporaryDirectory() as work:
        index = {"GIT_INDEX_FILE": str(Path(work) / "index")}
        git("--work-tree", str(tree.resolve()), "add", "--all", "--force", ".", **index)
        written = git("write-tree", **index)
    parent = subprocess.run(["git", "-C", str(repository), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
                            capture_output=True, text=True).stdout.strip()
    commit = git("commit-tree", written, *(["-p", parent] if parent else []), "-m", message)
    git("update-ref", f"refs/heads/{branch}", commit)
    return commit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student")
    parser.add_argument("--commit", action="store_true",
                        help=f"record the student branch's files as the next commit of the branch {STUDENT_BRANCH}")
    args = parser.parse_args(argv)
    if not (args.out / "chapters").is_dir():
        parser.error(f"{args.out} has no student notebooks yet: run python -m scripts.student_edition --out {args.out}")
    weeks = course.write_weeks(args.out)
    site = write_site(args.out)
    branch = write_branch(args.out)
    print(f"{len(weeks)} weekly notebooks in {args.out / 'weeks'}; the student website's source in {site} "
          f"(build it: make student-site); the student branch's files in {branch}")
    if args.commit:
        commit = commit_branch(branch)
        print(f"committed them as {commit[:12]} on the branch {STUDENT_BRANCH}: publish with git push origin "
              f"{STUDENT_BRANCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
