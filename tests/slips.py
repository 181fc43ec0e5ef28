"""One assertion for the exercises' named slips: a wrong answer fails with its slip named, on the public case and
on hidden seeds; the answer key passes on every seed and a blank stub reads as not attempted."""

from __future__ import annotations

SEEDS = (0, 1, 2, 5)


def assert_slip_named(check, wrong, words, seeds=(0, 1)) -> None:
    """``wrong`` fails ``check`` on each seed (0: the public case, others: hidden variants) with every one of
    ``words`` in its message."""
    for seed in seeds:
        result = check(wrong, seed=seed)
        assert not result and result.message.startswith("✗"), f"seed {seed}: {result.message}"
        for word in words:
            assert word in result.message, f"seed {seed}: {word!r} missing from: {result.message}"


def assert_key_passes_and_stub_fails(check, key, seeds=SEEDS) -> None:
    """The answer key passes on every seed, and a stub that raises NotImplementedError is reported as not
    attempted."""
    for seed in seeds:
        result = check(key, seed=seed)
        assert result and "Several slips" not in result.message, f"seed {seed}: {result.message}"

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert check(stub).message.startswith("✗ Not attempted yet"), check(stub).message
