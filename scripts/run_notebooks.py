"""Execute the book's notebooks one at a time, timing each and measuring its kernel's peak memory.

    python scripts/run_notebooks.py            # benchmark: print a table, change nothing
    python scripts/run_notebooks.py --write    # also save the fresh outputs into the notebooks (to commit)
    python scripts/run_notebooks.py chapters/1_mechanism/1_attention_from_scratch.ipynb --write

Notebooks run one after another, never in parallel: torch on 2 cores slows down by an order of magnitude when
two busy processes each want both cores. The budget for each notebook is 60 s and 1.5 GB peak memory.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
TIME_BUDGET_S, MEMORY_BUDGET_MB = 60.0, 1536.0


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
        nbformat.write(notebook, path)
    return seconds, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under chapters/")
    parser.add_argument("--write", action="store_true", help="save the executed outputs into the notebooks")
    args = parser.parse_args()
    paths = args.notebooks or sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    print(f"{'notebook':60s} {'seconds':>8s} {'peak MB':>8s}  within budget")
    over = 0
    for path in paths:
        seconds, peak = run(path.resolve(), args.write)
        ok = seconds <= TIME_BUDGET_S and peak <= MEMORY_BUDGET_MB
        over += not ok
        print(f"{str(path.resolve().relative_to(ROOT)):60s} {seconds:8.1f} {peak:8.0f}  {'yes' if ok else 'NO'}", flush=True)
    print(f"budget per notebook: {TIME_BUDGET_S:.0f} s and {MEMORY_BUDGET_MB:.0f} MB; {over} over budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
