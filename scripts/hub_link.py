"""Print an nbgitpuller link: one click on it pulls the book into a learner's home on a JupyterHub and opens a notebook.

    python scripts/hub_link.py https://hub.example.edu
    python scripts/hub_link.py https://hub.example.edu chapters/3_head_roles/5_induction_heads.ipynb
    python scripts/hub_link.py https://hub.example.edu --all                  # one link per notebook, as a table
    python scripts/hub_link.py https://hub.example.edu --interface notebook   # Jupyter Notebook 7 instead of JupyterLab

The hub's users need the environment of ``environment.yml`` (it includes nbgitpuller). The first click clones the
repository (the address and branch in ``_config.yml``) into ``~/<repository name>``; later clicks pull new commits
and merge them without overwriting what the learner changed. The link opens the given file, by default the landing
page's folder (``chapters/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import urlencode, urlparse

from book_release import ROOT, repository_branch, repository_name, repository_url
from setup_cells import NOTEBOOKS

INTERFACES = {"lab": "lab/tree", "notebook": "tree"}
"""What each interface's address starts with, before the file's path (JupyterLab, Jupyter Notebook 7)."""


def hub_link(hub: str, path: str = "chapters", *, interface: str = "lab", root: Path = ROOT) -> str:
    """The nbgitpuller link that clones or updates the book on ``hub`` and opens ``path`` (in the repository)."""
    parsed = urlparse(hub)
    if parsed.scheme not in ("https", "http") or not parsed.netloc:
        raise ValueError(f"the hub's address should look like https://hub.example.edu, not {hub!r}")
    if interface not in INTERFACES:
        raise ValueError(f"interface should be one of {sorted(INTERFACES)}, not {interface!r}")
    relative = PurePosixPath(str(path).replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"path should be a file or folder inside the repository, like chapters/index.md, not {path!r}")
    if not (root / relative).exists():
        raise ValueError(f"the repository has no {relative}; give a path such as "
                         "chapters/1_mechanism/1_attention_from_scratch.ipynb")
    query = urlencode({"repo": repository_url(root), "branch": repository_branch(root),
                       "urlpath": f"{INTERFACES[interface]}/{repository_name(root)}/{relative.as_posix()}"})
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hub", help="the hub's address, e.g. https://hub.example.edu")
    parser.add_argument("path", nargs="?", default="chapters", help="the file or folder to open (default: chapters)")
    parser.add_argument("--interface", choices=sorted(INTERFACES), default="lab")
    parser.add_argument("--all", action="store_true", help="print a markdown table with one link per notebook")
    args = parser.parse_args(argv)
    try:
        if args.all:
            print("| Notebook | Link |\n| --- | --- |")
            for notebook in NOTEBOOKS:
                relative = notebook.relative_to(ROOT).as_posix()
                print(f"| {relative} | {hub_link(args.hub, relative, interface=args.interface)} |")
        else:
            print(hub_link(args.hub, args.path, interface=args.interface))
    except ValueError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
