"""Print a link that opens the book's notebooks: on a JupyterHub (nbgitpuller), on Binder or on Colab.

    python -m scripts.hub_link https://hub.example.edu
    python -m scripts.hub_link https://hub.example.edu chapters/3_head_roles/5_induction_heads.ipynb
    python -m scripts.hub_link https://hub.example.edu --all                  # one link per notebook, as a table
    python -m scripts.hub_link https://hub.example.edu --interface notebook   # Jupyter Notebook 7 instead of JupyterLab
    python -m scripts.hub_link binder chapters/1_mechanism/1_attention_from_scratch.ipynb
    python -m scripts.hub_link colab weeks/week_1.ipynb --student             # the student edition's week 1

The hub's users need the environment of ``environment.yml`` (it includes nbgitpuller). The first click clones the
repository (the address and branch in ``_config.yml``) into ``~/<repository name>``; later clicks pull new commits
and merge them without overwriting what the learner changed. The link opens the given file, by default the landing
page's folder (``chapters/``). Binder and Colab links use the services named in ``_config.yml``'s launch buttons.

``--student`` opens the student edition instead: the branch ``student`` (scripts/student_site.py writes and commits
it: the notebooks without solutions at the same paths, and ``weeks/week_N.ipynb``, one notebook per week).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlencode, urlparse

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.hub_link")
from scripts.book_release import ROOT, config, repository_branch, repository_name, repository_url
from scripts.setup_cells import NOTEBOOKS
from scripts.student_site import STUDENT_BRANCH

INTERFACES = {"lab": "lab/tree", "notebook": "tree"}
"""What each interface's address starts with, before the file's path (JupyterLab, Jupyter Notebook 7)."""


WEEK_NOTEBOOK = re.compile(r"weeks(/week_[1-9]\d*\.ipynb)?")
"""The student branch's weekly notebooks (and their folder), which the main branch does not have."""


def checked_path(path: str, root: Path = ROOT, student: bool = False) -> PurePosixPath:
    """``path`` as a relative POSIX path that the repository (or, with ``student``, the student branch) holds."""
    relative = PurePosixPath(str(path).replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"path should be a file or folder inside the repository, like chapters/index.md, not {path!r}")
    if not (root / relative).exists() and not (student and WEEK_NOTEBOOK.fullmatch(relative.as_posix())):
        raise ValueError(f"the repository has no {relative}; give a path such as "
                         "chapters/1_mechanism/1_attention_from_scratch.ipynb")
    return relative


def branch_of(student: bool, root: Path = ROOT) -> str:
    return STUDENT_BRANCH if student else repository_branch(root)


def hub_link(hub: str, path: str = "chapters", *, interface: str = "lab", root: Path = ROOT,
             student: bool = False) -> str:
    """The nbgitpuller link that clones or updates the book on ``hub`` and opens ``path`` (in the repository, or
    with ``student`` in the student branch, cloned into its own folder so that the two never mix)."""
    parsed = urlparse(hub)
    if parsed.scheme not in ("https", "http") or not parsed.netloc:
        raise ValueError(f"the hub's address should look like https://hub.example.edu, not {hub!r}")
    if interface not in INTERFACES:
        raise ValueError(f"interface should be one of {sorted(INTERFACES)}, not {interface!r}")
    relative = checked_path(path, root, student)
    folder = f"{repository_name(root)}-{STUDENT_BRANCH}" if student else repository_name(root)
    query = {"repo": repository_url(root), "branch": branch_of(student, root),
             "urlpath": f"{INTERFACES[interface]}/{folder}/{relative.as_posix()}"}
    if student:
        query["targetPath"] = folder
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{urlencode(query)}"


def binder_link(path: str = "chapters", *, root: Path = ROOT, student: bool = False) -> str:
    """The Binder link (the launch buttons' BinderHub) that opens ``path`` in JupyterLab, from the repository's
    branch or, with ``student``, the student branch."""
    relative = checked_path(path, root, student)
    owner_and_name = urlparse(repository_url(root)).path.strip("/")
    binderhub = str(config(root)["launch_buttons"]["binderhub_url"]).rstrip("/")
    return (f"{binderhub}/v2/gh/{owner_and_name}/{quote(branch_of(student, root), safe='')}"
            f"?{urlencode({'urlpath': f'lab/tree/{relative.as_posix()}'})}")


def colab_link(path: str, *, root: Path = ROOT, student: bool = False) -> str:
    """The Colab link that opens the notebook ``path`` from the repository's branch or, with ``student``, the
    student branch."""
    relative = checked_path(path, root, student)
    if relative.suffix != ".ipynb":
        raise ValueError(f"Colab opens one notebook: give a .ipynb path, not {path!r}")
    owner_and_name = urlparse(repository_url(root)).path.strip("/")
    colab = str(config(root)["launch_buttons"]["colab_url"]).rstrip("/")
    return f"{colab}/github/{owner_and_name}/blob/{quote(branch_of(student, root), safe='')}/{relative.as_posix()}"


def link(where: str, path: str, *, interface: str = "lab", student: bool = False) -> str:
    """A link for ``where``: ``binder``, ``colab`` or a hub's address."""
    if where == "binder":
        return binder_link(path, student=student)
    if where == "colab":
        return colab_link(path, student=student)
    return hub_link(where, path, interface=interface, student=student)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hub", help="the hub's address, e.g. https://hub.example.edu; or binder, or colab")
    parser.add_argument("path", nargs="?", help="the file or folder to open (default: chapters; Colab needs a "
                                                "notebook)")
    parser.add_argument("--interface", choices=sorted(INTERFACES), default="lab")
    parser.add_argument("--all", action="store_true", help="print a markdown table with one link per notebook")
    parser.add_argument("--student", action="store_true",
                        help=f"open the student edition (the branch {STUDENT_BRANCH}) instead of the book")
    args = parser.parse_args(argv)
    try:
        if args.all:
            print("| Notebook | Link |\n| --- | --- |")
            for notebook in NOTEBOOKS:
                relative = notebook.relative_to(ROOT).as_posix()
                print(f"| {relative} | {link(args.hub, relative, interface=args.interface, student=args.student)} |")
        else:
            if args.path is None and args.hub == "colab":
                raise ValueError("Colab opens one notebook: give its path, e.g. "
                                 "chapters/1_mechanism/1_attention_from_scratch.ipynb")
            print(link(args.hub, args.path or "chapters", interface=args.interface, student=args.student))
    except ValueError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
