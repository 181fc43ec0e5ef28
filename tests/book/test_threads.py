"""mha.book.threads: a notebook gives torch the book's two CPU threads, or the count the environment names."""

import pytest


def test_a_notebook_takes_the_books_two_threads_unless_the_environment_names_a_count(monkeypatch):
    import torch

    from mha.book import set_cpu_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert set_cpu_threads() == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as the test suite's workers and their kernels have it
        assert set_cpu_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "many")  # not a count: the book's own
        assert set_cpu_threads(3) == 3 and torch.get_num_threads() == 3
        with pytest.raises(ValueError, match="whole number"):
            set_cpu_threads(0)
    finally:
        torch.set_num_threads(before)
