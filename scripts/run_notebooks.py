"""Execute the book's notebooks one at a time, timing each and measuring its kernel's peak memory.

    python scripts/run_notebooks.py            # benchmark: print a table, change nothing
    python scripts/run_notebooks.py --write    # also save the fresh outputs into the notebooks (to commit)
    python scripts/run_notebooks.py chapters/1_mechanism/1_attention_from_scratch.ipynb --write
    python scripts/run_notebooks.py --prose-only  # only rewrite and store the prose's glued numbers (no kernel)

Saving a notebook also stores, in each markdown cell's ``user_expressions`` metadata, the text of every glued number
its prose shows, which is what jupyterlab-myst displays in JupyterLab (``mha.book.prose_number_results``). A number
written in myst-nb's form, ``{glue:text}`name:fmt```, is rewritten first into the form both JupyterLab and the
site read, ``{eval}`glue.text("name:fmt")```.

Notebooks run one after another, never in parallel: torch on 2 cores slows down by an order of magnitude when
two busy processes each want both cores. The budget for each notebook is 60 s and 1.5 GB peak memory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from mha.book import CITATION_LABELS, prose_expression_results
from mha.data_files import DATA_DIRECTORY, record_sha256

ROOT = Path(__file__).resolve().parents[1]
TIME_BUDGET_S, MEMORY_BUDGET_MB = 60.0, 1536.0
MYST_NB_NUMBER = re.compile(r"\{glue:text\}`([A-Za-z_]\w*(?::[^`]*)?)`")
MYST_NB_CITATION = re.compile(r"\{cite:([tp])\}`([\w\-]+(?:, *[\w\-]+)*)`")


def citation_labels(bibliography: Path = ROOT / "references.bib") -> dict[str, dict[str, str]]:
    """Each reference's authors as the site's author-year citations show them ("Clark et al.", "Hewitt and Liang")
    and its year, from the book's bibliography."""
    from pybtex.database import parse_file

    labels = {}
    for key, entry in sorted(parse_file(str(bibliography)).entries.items()):
        surnames = [" ".join(person.last_names).replace("{", "").replace("}", "")
                    for person in entry.persons.get("author", [])]
        authors = (surnames[0] if len(surnames) == 1 else " and ".join(surnames) if len(surnames) == 2
                   else f"{surnames[0]} et al.")
        labels[key] = {"authors": authors, "year": entry.fields.get("year", "n.d.")}
    return labels


def write_citation_labels() -> None:
    """data/citations.json, which glue.cite_t and glue.cite_p read in a notebook's kernel (mha.book)."""
    (DATA_DIRECTORY / CITATION_LABELS).write_text(json.dumps(citation_labels(), indent=1, sort_keys=True) + "\n",
                                                 encoding="utf-8")
    record_sha256()  # data/SHA256SUMS: citation_text checks the file against it


def store_prose_numbers(notebook) -> None:
    """Rewrite myst-nb's {glue:text} and {cite:t}/{cite:p} into the {eval} forms JupyterLab and the site both read
    (see mha.book), and store what JupyterLab shows for each."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = MYST_NB_NUMBER.sub(lambda match: f'{{eval}}`glue.text("{match[1]}")`', cell.source)
            cell.source = MYST_NB_CITATION.sub(
                lambda match: f'{{eval}}`glue.cite_{match[1]}("{match[2].replace(" ", "")}")`', cell.source)
    for cell, results in zip(notebook.cells, prose_expression_results(notebook)):
        if results is None:
            cell.metadata.pop("user_expressions", None)
        else:
            cell.metadata["user_expressions"] = results


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a live process (Linux VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(path: Path, write: bool) -> tuple[float, float]:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    peak = float("nan")
    start = time.perf_counter()
    with client.setup_kernel():
        pid = client.km.provisioner.process.pid
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        seconds = time.perf_counter() - start
        peak = peak_rss_mb(pid)
    if write:
        for cell in notebook.cells:
            cell.metadata.pop("execution", None)  # execution timestamps: noise in every diff
        try:
            store_prose_numbers(notebook)
        except ValueError as problem:  # the outputs are still saved; tests/test_jupyterlab.py names the cell
            print(f"{path.name}: the prose's numbers were not stored for JupyterLab: {problem}", file=sys.stderr)
        nbformat.write(notebook, path)
    return seconds, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under chapters/")
    parser.add_argument("--write", action="store_true", help="save the executed outputs into the notebooks")
    parser.add_argument("--prose-only", action="store_true",
                        help="execute nothing: rewrite and store the glued numbers of the prose from stored outputs")
    args = parser.parse_args()
    paths = args.notebooks or sorted(
        p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    write_citation_labels()
    if args.prose_only:
        for path in paths:
            notebook = nbformat.read(path, as_version=4)
            store_prose_numbers(notebook)
            nbformat.write(notebook, path)
        return 0
    print(f"{'notebook':60s} {'seconds':>8s} {'peak MB':>8s}  within budget")
    over = 0
    for path in paths:
        seconds, peak = run(path.resolve(), args.write)
        ok = seconds <= TIME_BUDGET_S and peak <= MEMORY_BUDGET_MB
        over += not ok
        print(
            f"{str(path.resolve().relative_to(ROOT)):60s} {seconds:8.1f} {peak:8.0f}  {'yes' if ok else 'NO'}",
            flush=True,
        )
    print(f"budget per notebook: {TIME_BUDGET_S:.0f} s and {MEMORY_BUDGET_MB:.0f} MB; {over} over budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
