"""The CPU threads a notebook of the book gives torch: the book is written for two cores (see "How to run this
book" on the landing page)."""

from __future__ import annotations

from mha.core.validation import check_whole_number

__all__ = ["BOOK_CPU_THREADS", "set_cpu_threads"]

BOOK_CPU_THREADS = 2
"""The CPU threads a notebook of the book uses for torch: the book is written to run on two cores."""


def set_cpu_threads(default: int = BOOK_CPU_THREADS) -> int:
    """Give torch ``default`` CPU threads, or the count the environment names in ``OMP_NUM_THREADS``; returns it.

    A reader's kernel has the machine to itself and uses the book's two cores. Where several notebooks run at once on
    those cores (the test suite's workers set ``OMP_NUM_THREADS=1``), a kernel that took two threads would make each
    wait on the other's; one thread each keeps both busy. The stored outputs are the same at one thread and at two
    (README, "The same verdict on every CPU").
    """
    import os

    import torch

    named = os.environ.get("OMP_NUM_THREADS", "").strip()
    threads = int(named) if named.isdigit() and int(named) > 0 else check_whole_number("default", default, minimum=1)
    torch.set_num_threads(threads)
    return threads
