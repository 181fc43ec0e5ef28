"""Write the reader edition of the book's notebooks: the one every launch button of the website opens (Colab,
Binder, a JupyterHub, and the ".ipynb" download button), readable in any notebook front end.

The book's notebooks are written in MyST for JupyterLab and the website: opened alone on Colab, they would show
raw ``{eval}`` roles, directives and ``(label)=`` targets, hints unfolded and solutions in the open, and relative
links that lead nowhere. The reader edition is each notebook of the book with

- every solution kept but folded (:func:`fold_solutions`): the markdown between ```` ```{solution-start} label ````
  and ```` ```{solution-end} ```` in a ``<details>`` fold whose summary is "Solution: <the exercise's title>", and
  each run of the solution's code cells after a markdown cell that says so (:data:`SOLUTION_CODE`), the cells
  tagged ``solution`` and their input collapsed (``jupyter.source_hidden``, which JupyterLab and Notebook honour);
  their code and stored outputs are the book's;
- its markdown converted as the student edition's is (scripts/readable.py, shared): numbers filled in, every
  directive plain markdown (hints folded), no target, and every cross-reference and relative link an absolute
  address on the website.

Code cells and their stored outputs stay as the book stores them (the notebooks are committed executed). Where it
goes:

- into the website, as ``_build/html/notebooks/<path of the notebook>`` (``--site _build/html``): the Sphinx
  extension website/reader_buttons.py runs this at the end of every build (``make book``), and points each notebook
  page's launch buttons at the reader branch and its ".ipynb" download button at that copy;
- into a folder ready to be the branch :func:`reader_branch` names (``reader``, from ``_config.yml``), the branch
  the launch buttons open (``make reader-edition``: ``_build/reader``, with ``chapters/``, ``binder/`` and a
  README). ``--commit`` records that folder as the next commit of the local branch without touching the working
  tree or the index (scripts/student_site.py's ``commit_branch``); publish it with ``git push origin reader``
  (after every release, like the student branch), or push the folder from a worktree:
  ``git worktree add /tmp/reader reader && cp -r _build/reader/. /tmp/reader && git -C /tmp/reader commit -am ...``.

``tests/tools/test_reader_edition.py`` renders every reader notebook as plain CommonMark and finds no MyST left, no
relative link, every solution folded and every hint a ``<details>``.

    python -m scripts.reader_edition [--out _build/reader] [--site _build/html] [--commit]
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.reader_edition")
from scripts import student_site  # noqa: E402
from scripts.book_release import config  # noqa: E402
from scripts.readable import _set_source, _source, readable_edition  # noqa: E402
from scripts.student_edition import SOLUTION_START, exercises, solution_parts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
SITE_FOLDER = "notebooks"  # in the built website: _build/html/notebooks/chapters/...
SOLUTION_SUMMARY = "Solution: {title}"
SOLUTION_CODE = ("**Solution: {title}**, its code (the worked solution: try the exercise first; its input is folded "
                 "in JupyterLab)\n")
SOLUTION_TAG = "solution"


def reader_branch(root: Path = ROOT) -> str:
    """The branch that holds the reader edition, which the website's launch buttons open: ``_config.yml``'s
    ``sphinx.config.reader_edition_branch`` (website/reader_buttons.py reads the same value)."""
    return config(root)["sphinx"]["config"]["reader_edition_branch"]


def notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(path for path in (root / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)


def fold_solutions(text: str, label: str | None, titles: dict[str, str]) -> tuple[str, str | None]:
    """One markdown cell's ``text`` with the solution parts it holds folded in ``<details>``, given the label of the
    solution still open from an earlier cell (or None); returns the text and the label still open after it."""
    pieces, label = solution_parts(text, label)
    parts = []
    for owner, piece, _ in pieces:
        if owner is None:
            parts.append(piece)
        elif piece.strip():
            summary = SOLUTION_SUMMARY.format(title=titles.get(owner, owner))
            parts.append(f"<details>\n<summary>{summary}</summary>\n\n{piece.strip()}\n\n</details>")
    return "\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n", label


def reader_notebook(book: dict, here: Path) -> dict:
    """The reader edition of ``book``, the notebook at ``here`` (see the module's docstring)."""
    titles = {exercise.label: exercise.title for exercise in exercises(book)}
    reader = copy.deepcopy(book)
    cells, open_label, marked = [], None, False
    for cell in reader["cells"]:
        if cell["cell_type"] == "code":
            if open_label is not None:
                if not marked:
                    cells.append({"cell_type": "markdown", "id": f"{open_label}-code-{len(cells)}"[-64:],
                                  "metadata": {}, "source": [SOLUTION_CODE.format(title=titles.get(open_label,
                                                                                                  open_label))]})
                    marked = True
                metadata = cell.setdefault("metadata", {})
                metadata.setdefault("jupyter", {})["source_hidden"] = True
                metadata["tags"] = [*metadata.get("tags", []), *([] if SOLUTION_TAG in metadata.get("tags", [])
                                                                  else [SOLUTION_TAG])]
            cells.append(cell)
            continue
        text, open_label = fold_solutions(_source(cell), open_label, titles)
        marked = False
        if text.strip():
            _set_source(cell, text)
            cells.append(cell)
    if open_label is not None:
        raise ValueError(f"{here.name}: the solution {open_label} has no {{solution-end}}")
    reader["cells"] = cells
    return readable_edition(reader, book, here)


def write_edition(out: Path, paths: list[Path] | None = None) -> dict[str, int]:
    """Write the reader edition of every notebook of the book (or of ``paths``) under ``out``, at the notebook's
    path from the repository's root; how many solutions each folds, by that path."""
    counts = {}
    for path in notebooks() if paths is None else paths:
        book = json.loads(path.read_text())
        relative = path.relative_to(ROOT)
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(json.dumps(reader_notebook(book, path), indent=1, ensure_ascii=False) + "\n")
        counts[str(relative)] = len(SOLUTION_START.findall("".join(_source(cell) for cell in book["cells"])))
    return counts


def write_branch(out: Path) -> Path:
    """What the reader branch holds, in ``out``: the reader notebooks (``chapters/``), Binder's files (the package
    from its release's commit: the branch holds no package source) and a README; returns ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    write_edition(out)
    student_site.write_binder(out)
    (out / "README.md").write_text(
        "# The reader edition\n\nThe book's notebooks as any notebook front end shows them (`chapters/`): numbers "
        "filled in, exercises and hints as plain markdown, solutions folded, every link to the website. The "
        "website's launch buttons (Colab, Binder, JupyterHub) open them. Written by scripts/reader_edition.py on "
        "the book's main branch: do not edit here.\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the reader branch's files here (make reader-edition: "
                                                 "_build/reader)")
    parser.add_argument("--site", type=Path, help=f"write the reader notebooks into this built website, under "
                                                  f"{SITE_FOLDER}/ (the end of every build does it)")
    parser.add_argument("--commit", action="store_true", help="record --out as the next commit of the reader branch")
    args = parser.parse_args(argv)
    if args.out is None and args.site is None:
        parser.error("name --out, --site or both")
    if args.site is not None:
        counts = write_edition(args.site / SITE_FOLDER)
        print(f"reader edition of {len(counts)} notebooks, {sum(counts.values())} solutions folded, in "
              f"{args.site / SITE_FOLDER}")
    if args.out is not None:
        write_branch(args.out)
        print(f"the reader branch's files in {args.out}")
        if args.commit:
            branch = reader_branch()
            commit = student_site.commit_branch(args.out, branch=branch,
                                                message="The reader edition, written by scripts/reader_edition.py")
            print(f"committed them as {commit[:12]} on the branch {branch}: publish with git push origin {branch}")
    elif args.commit:
        parser.error("--commit records --out: name it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
