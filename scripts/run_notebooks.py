"""Execute the book's notebooks one at a time, timing each and measuring its kernel's peak memory.

    python -m scripts.run_notebooks            # benchmark: print a table, change nothing
    python -m scripts.run_notebooks --write    # also save the fresh outputs into the notebooks (to commit)
    python -m scripts.run_notebooks chapters/1_mechanism/1_attention_from_scratch.ipynb --write
    python -m scripts.run_notebooks --prose-only  # only rewrite and store the prose's glued numbers (no kernel)
    python -m scripts.run_notebooks --record   # keep the measurements and rewrite the execution-statistics page
    python -m scripts.run_notebooks --page     # only rewrite that page from the kept measurements

Saving a notebook also stores, in each markdown cell's ``user_expressions`` metadata, the text of every glued number
its prose shows, which is what jupyterlab-myst displays in JupyterLab (``mha.book.prose_expression_results``). A number
written in myst-nb's form, ``{glue:text}`name:fmt```, is rewritten first into the form both JupyterLab and the
site read, ``{eval}`glue.text("name:fmt")```.

Notebooks run one after another, never in parallel: torch on 2 cores slows down by an order of magnitude when
two busy processes each want both cores. The budget for each notebook is 60 s and 1.5 GB peak memory.

With ``--record``, each notebook's time and peak memory go into ``chapters/execution_statistics.json`` (with the
machine, its load and the day), and the page ``chapters/execution_statistics.md`` is written from that file;
``tests/tools/test_execution_statistics.py`` fails when the page differs from what the file says. The book's
timings live there, measured, and nowhere in its prose.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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
STATISTICS = ROOT / "chapters" / "execution_statistics.json"
STATISTICS_PAGE = ROOT / "chapters" / "execution_statistics.md"
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
    for cell, results in zip(notebook.cells, prose_expression_results(notebook), strict=True):
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


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) a live process and its finished children have used, in seconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime


def run(path: Path, write: bool) -> tuple[float, float, float]:
    """Execute ``path``; its wall-clock seconds, its kernel's peak memory (MB) and the kernel's CPU seconds."""
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
        peak, cpu = peak_rss_mb(pid), cpu_seconds(pid)
    if write:
        for cell in notebook.cells:
            cell.metadata.pop("execution", None)  # execution timestamps: noise in every diff
        try:
            store_prose_numbers(notebook)
        except ValueError as problem:  # the outputs are still saved; tests/site/test_jupyterlab.py names the cell
            print(f"{path.name}: the prose's numbers were not stored for JupyterLab: {problem}", file=sys.stderr)
        nbformat.write(notebook, path)
    return seconds, peak, cpu


def book_notebooks() -> list[Path]:
    """Every notebook of the table of contents, in its order."""
    import yaml

    def files(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            yield from files(entry.get("sections", []) + entry.get("chapters", []))

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = [ROOT / f"{name}.ipynb" for name in files(toc["parts"])]
    return [path for path in listed if path.exists()]


def record_statistics(measured: dict[Path, tuple[float, float, float]]) -> None:
    """Keep ``measured`` (path -> (seconds, peak MB, CPU seconds)) in chapters/execution_statistics.json, then rewrite
    the page."""
    from scripts.bench_head_cost import cpu_model

    record = json.loads(STATISTICS.read_text()) if STATISTICS.exists() else {"notebooks": {}}
    day = datetime.date.today().isoformat()
    machine = f"{cpu_model()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    for path, (seconds, peak, cpu) in measured.items():
        record["notebooks"][path.resolve().relative_to(ROOT).as_posix()] = {
            "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "peak_mb": round(peak), "day": day,
            "machine": machine, "load": round(os.getloadavg()[0], 1)}
    STATISTICS.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    write_statistics_page()


def statistics_page(record: dict) -> str:
    """The execution-statistics page (MyST markdown) for ``record``, the contents of execution_statistics.json."""
    rows = ["| Notebook | Kernel CPU time | Wall-clock time | Peak memory | Within budget | Measured |",
            "| --- | --- | --- | --- | --- | --- |"]
    machines, over = set(), 0
    for path in book_notebooks():
        name = path.relative_to(ROOT).as_posix()
        link = "{doc}`" + path.relative_to(ROOT / "chapters").with_suffix("").as_posix() + "`"
        entry = record["notebooks"].get(name)
        if entry is None:
            rows.append(f"| {link} | not measured yet | | | | |")
            continue
        within = entry["cpu_seconds"] <= TIME_BUDGET_S and entry["peak_mb"] <= MEMORY_BUDGET_MB
        over += not within
        machines.add(entry["machine"])
        rows.append(f"| {link} | {entry['cpu_seconds']:.1f} s | {entry['seconds']:.1f} s | {entry['peak_mb']} MB | "
                    f"{'yes' if within else 'no'} | {entry['day']}, load {entry['load']:g} |")
    return "\n".join([
        "# Execution statistics", "",
        "How long each notebook of the book takes to run from top to bottom in a fresh kernel, and the most memory "
        "that kernel held, as `python -m scripts.run_notebooks --record` measured them, one notebook at a time. "
        f"The budget is {TIME_BUDGET_S:.0f} s and {MEMORY_BUDGET_MB / 1024:.1f} GB per notebook on two CPU cores; "
        f"{over} of the measured notebooks {'is' if over == 1 else 'are'} over it. A notebook's time is judged by "
        "its kernel's CPU time, which each kernel spends on one thread: on two quiet cores that is about the time "
        "a reader waits, and it does not grow when other work shares the machine. The wall-clock time does: the "
        "load beside it is the machine's one-minute load average when the notebook finished.", "",
        *rows, "",
        "Measured on: " + "; ".join(sorted(machines)) + "." if machines else "Nothing measured yet.", "",
        *other_budgets(record.get("other", [])),
        "This page is written from `chapters/execution_statistics.json` by `python -m scripts.run_notebooks --page` "
        "(and by every `--record`); `tests/tools/test_execution_statistics.py` fails when the two differ.", ""])


def other_budgets(entries: list[dict]) -> list[str]:
    """The page's section on the budgets other tools measure, from the record's ``other`` entries."""
    if not entries:
        return []
    rows = ["## The other budgets", "",
            "Measured by their own tools, whose output is the measurement; each entry was kept here from that output "
            "on the day shown, and running the tool again is how to refresh it.", "",
            "| Budget | Last measured | Day | Measured by |", "| --- | --- | --- | --- |"]
    rows += [f"| {entry['budget']} | {entry['measured']} | {entry['day']} | `{entry['command']}` |"
             for entry in entries]
    return rows + [""]


def write_statistics_page() -> None:
    record = json.loads(STATISTICS.read_text()) if STATISTICS.exists() else {"notebooks": {}}
    STATISTICS_PAGE.write_text(statistics_page(record))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under chapters/")
    parser.add_argument("--write", action="store_true", help="save the executed outputs into the notebooks")
    parser.add_argument("--prose-only", action="store_true",
                        help="execute nothing: rewrite and store the glued numbers of the prose from stored outputs")
    parser.add_argument("--record", action="store_true",
                        help="keep each notebook's time and memory in chapters/execution_statistics.json and rewrite "
                             "the execution-statistics page")
    parser.add_argument("--page", action="store_true",
                        help="execute nothing: rewrite the execution-statistics page from the kept measurements")
    args = parser.parse_args()
    if args.page:
        write_statistics_page()
        return 0
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
        seconds, peak, cpu = run(path.resolve(), args.write)
        if args.record:
            record_statistics({path: (seconds, peak, cpu)})
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
