"""Which attention patterns one head of width ``d_head`` can express (chapter 2, "The low-rank bottleneck").

A head's scores over ``n`` tokens are ``S = Q Kᵀ / sqrt(d_head)`` with ``Q`` and
``K`` of shape ``(n, d_head)``, so ``rank(S) <= d_head``: with ``d_head < n``
some ``n x n`` patterns are out of reach (Bhojanapalli et al. 2020, "Low-rank
bottleneck in multi-head attention models"). This module

* builds target patterns: :func:`previous_token_pattern`, :func:`first_token_pattern`,
  :func:`permutation_pattern`, :func:`dense_random_pattern`;
* says exactly how wide a head must be to produce a strictly positive pattern
  (:func:`min_head_width`), using that the softmax ignores a constant added to a row;
* fits a single head's ``W_Q``, ``W_K`` to target patterns over fixed token
  vectors, for several widths at once (:func:`fit_head_patterns`), and scores
  a fit by :func:`pattern_error`;
* loads the book's stored fits (:func:`load_pattern_fits`), which
  ``scripts/fit_head_patterns.py`` writes to ``data/pattern_fits.json``.

Why the book stores its fits instead of recomputing them: the fit is an
optimisation whose path is chaotic. Perturbing the token vectors in the 13th
digit, or running on another CPU (AVX2 against generic kernels, which round
sums differently), moves the fitted error of a narrow head by up to about 0.1.
So the notebook reads one set of runs from the file, and the test suite gives
the same verdict on every machine.

Patterns are (n, n) with row = query (attends from), column = key (attended
to), rows summing to 1, as everywhere in :mod:`mha`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from mha.core.argument_checks import check_float_dtype
from mha.core.geometry import numerical_rank
from mha.core.layouts import QUERY_KEY, takes_attention
from mha.core.validation import (
    as_path,
    check_finite_number,
    check_rank,
    check_real_tensor,
    check_seed,
    check_size,
    check_whole_number,
    is_finite_number,
    is_whole_number,
)
from mha.data_files import DATA_DIRECTORY, how_to_restore, parse_json, read_verified_file

__all__ = [
    "previous_token_pattern",
    "first_token_pattern",
    "permutation_pattern",
    "dense_random_pattern",
    "row_centred",
    "min_head_width",
    "pattern_error",
    "PatternFit",
    "fit_head_patterns",
    "PATTERN_FITS_PATH",
    "REGENERATE_PATTERN_FITS",
    "PatternFitsError",
    "StoredPatternFits",
    "load_pattern_fits",
]

PATTERN_FITS_PATH = DATA_DIRECTORY / "pattern_fits.json"
"""``pattern_fits.json`` in the package data (:mod:`mha.data`: the repository's ``data/``, or ``mha/data/``)."""

REGENERATE_PATTERN_FITS = "python -m scripts.fit_head_patterns"
"""Run from the root of a clone of the repository, this rewrites its ``data/pattern_fits.json`` (about a minute)."""

_PATTERN_FITS_FORMAT = 1
_MAX_PATTERN_FITS_BYTES = 2**20  # the file is a few kB; anything far larger is not it


def _check_length(n: int, dtype: torch.dtype) -> None:
    """Refuse a pattern's length ``n`` below 2 or too large to allocate, and a ``dtype`` that is not a float one."""
    check_whole_number("n", n, minimum=2, meaning="the number of tokens")
    check_size("an attention pattern (n, n)", (n, n))
    check_float_dtype("dtype", dtype)


def previous_token_pattern(n: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, n): every token attends to the one before it; token 0, which has none, attends to itself."""
    _check_length(n, dtype)
    pattern = torch.zeros(n, n, dtype=dtype)
    pattern[0, 0] = 1.0
    pattern[torch.arange(1, n), torch.arange(n - 1)] = 1.0
    return pattern


def first_token_pattern(n: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, n): every token attends to token 0, as many BERT heads attend to ``[CLS]``."""
    _check_length(n, dtype)
    pattern = torch.zeros(n, n, dtype=dtype)
    pattern[:, 0] = 1.0
    return pattern


def permutation_pattern(n: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, n): token ``i`` attends to token ``perm[i]`` of a seeded random permutation."""
    _check_length(n, dtype)
    permutation = torch.randperm(n, generator=torch.Generator().manual_seed(check_seed("seed", seed)))
    pattern = torch.zeros(n, n, dtype=dtype)
    pattern[torch.arange(n), permutation] = 1.0
    return pattern


def dense_random_pattern(n: int, seed: int = 0, spread: float = 1.0, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, n): softmax of Gaussian scores with standard deviation ``spread``; every weight graded and positive."""
    _check_length(n, dtype)
    spread = check_finite_number("spread", spread, minimum=0, meaning="the standard deviation of the scores")
    scores = torch.randn(n, n, generator=torch.Generator().manual_seed(check_seed("seed", seed)), dtype=dtype) * spread
    return scores.softmax(dim=-1)


def row_centred(scores: Tensor) -> Tensor:
    """Subtract each row's mean: (..., n_q, n_k) -> (..., n_q, n_k).

    The softmax of a row does not change when a constant is added to it, so
    two score matrices that differ by a constant per row give the same
    pattern; centring picks one representative. Chapter 2.
    """
    scores = check_real_tensor("scores", scores, meaning="(..., n_q, n_k)")
    return scores - scores.mean(dim=-1, keepdim=True)


@takes_attention(pattern=QUERY_KEY)
def min_head_width(pattern: Tensor, rtol: float = 1e-9) -> int:
    """The smallest ``d_head`` whose scores can give ``pattern`` (n, n) exactly, for strictly positive patterns.

    Scores that give the pattern are ``log(pattern)`` plus any constant per
    row, and all of them share the same row-centred matrix; every such score
    matrix has at least its rank, and the centred one has exactly that rank.
    So the answer is the numerical rank of ``row_centred(log(pattern))``
    (when the tokens themselves have at least ``n`` dimensions). Patterns with
    zeros need infinite scores and have no exact answer. Chapter 2.
    """
    pattern = check_real_tensor("pattern", pattern, meaning="(n, n)")
    check_rank("pattern", pattern.shape, (2,), "(n_q, n_k), one head's attention pattern")
    if not bool((pattern > 0).all()):
        raise ValueError("pattern has zero weights, which only infinite scores produce; min_head_width needs a "
                         "strictly positive pattern (mix in a little uniform weight to make one).")
    return int(numerical_rank(row_centred(pattern.double().log()), rtol=rtol))


@takes_attention(fitted=QUERY_KEY.with_leading(6), target=QUERY_KEY.with_leading(6))
def pattern_error(fitted: Tensor, target: Tensor) -> Tensor:
    """Mean total-variation distance between rows, in [0, 1]: (..., n_q, n_k) twice -> (...).

    For each query, half the summed absolute difference of the two
    distributions: the share of attention that sits in the wrong place.
    Chapter 2, "The low-rank bottleneck".
    """
    fitted = check_real_tensor("fitted", fitted, meaning="(..., n_q, n_k)")
    target = check_real_tensor("target", target, meaning="(..., n_q, n_k)")
    if fitted.shape[-2:] != target.shape[-2:]:
        raise ValueError(f"fitted has shape {tuple(fitted.shape)} and target {tuple(target.shape)}; "
                         "both should end in (n_q, n_k).")
    return 0.5 * (fitted - target).abs().sum(dim=-1).mean(dim=-1)


@dataclass(frozen=True)
class PatternFit:
    """The best fits of single heads to target patterns, for several widths (chapter 2).

    ``error[p, w]`` is :func:`pattern_error` of the best restart for target
    ``p`` and width ``d_heads[w]``; ``fitted`` holds those patterns (targets,
    widths, n, n) and ``scores`` the scores (after any cap) that gave them.
    """

    d_heads: tuple[int, ...]
    error: Tensor  # (targets, widths)
    fitted: Tensor  # (targets, widths, n, n)
    scores: Tensor  # (targets, widths, n, n)

    def score_range(self) -> Tensor:
        """Mean over queries of (largest - smallest score) in the row: how hard the fit pushes, (targets, widths)."""
        return (self.scores.amax(dim=-1) - self.scores.amin(dim=-1)).mean(dim=-1)


@takes_attention(targets=QUERY_KEY.with_leading(1))
def fit_head_patterns(tokens: Tensor, targets: Tensor, d_heads: Sequence[int], *, steps: int = 300,
                      lr: float = 0.05, restarts: int = 2, score_cap: float | None = None,
                      seed: int = 0) -> PatternFit:
    """Fit one head's ``W_Q``, ``W_K`` (d_model, d_head) so that its pattern over ``tokens`` matches each target.

    ``tokens`` (n, d_model) are fixed; ``targets`` (targets, n, n) have rows
    summing to 1. For every target, width in ``d_heads`` and restart, Adam
    minimises the cross-entropy between target rows and
    ``softmax(x W_Q (x W_K)ᵀ / sqrt(d_head))``, all in one batch: the narrow
    heads are the first ``d_head`` columns of ``max(d_heads)``-wide matrices,
    the others held at 0. ``score_cap`` replaces each score ``s`` by
    ``cap * tanh(s / cap)``, keeping scores within ``±cap``, as a real model's
    bounded weights and normalised inputs do. Deterministic for a given
    ``seed``. Returns a :class:`PatternFit` with the best restart per target and
    width. Chapter 2, "The low-rank bottleneck".
    """
    tokens = check_real_tensor("tokens", tokens, meaning="(n, d_model) token vectors")
    targets = check_real_tensor("targets", targets, meaning="(patterns, n, n)")
    check_rank("tokens", tokens.shape, (2,), "(n, d_model), one vector per token")
    check_rank("targets", targets.shape, (3,), "(targets, n, n), one pattern per target")
    n, d_model = tokens.shape
    if targets.shape[1:] != (n, n):
        raise ValueError(f"targets has shape {tuple(targets.shape)}, but {n} tokens need patterns of shape ({n}, {n}).")
    if not torch.allclose(targets.sum(dim=-1), torch.ones((), dtype=targets.dtype), atol=1e-6):
        raise ValueError("every row of every target should sum to 1 (it is a distribution over keys).")
    d_heads = tuple(int(d) for d in d_heads)
    if not d_heads or min(d_heads) < 1:
        raise ValueError(f"d_heads should list head widths of at least 1, got {d_heads}.")
    if score_cap is not None and score_cap <= 0:
        raise ValueError(f"score_cap bounds the scores to ±score_cap, so it must be positive; got {score_cap}.")

    dtype = tokens.dtype
    generator = torch.Generator().manual_seed(seed)
    width, n_targets, n_widths = max(d_heads), targets.shape[0], len(d_heads)
    columns = torch.zeros(n_widths, 1, width, dtype=dtype)  # (widths, 1, width): 1 on a head's own columns
    for index, d_head in enumerate(d_heads):
        columns[index, :, :d_head] = 1.0
    scale = torch.tensor([1.0 / math.sqrt(d) for d in d_heads], dtype=dtype).view(n_widths, 1, 1)
    shape = (restarts, n_targets, n_widths, d_model, width)
    W_Q = (torch.randn(shape, generator=generator, dtype=dtype) / math.sqrt(d_model) * columns).requires_grad_()
    W_K = (torch.randn(shape, generator=generator, dtype=dtype) / math.sqrt(d_model) * columns).requires_grad_()
    goal = targets.to(dtype)[None, :, None]  # (1, targets, 1, n, n)

    def scores() -> Tensor:
        q = tokens @ (W_Q * columns)  # (restarts, targets, widths, n, width)
        k = tokens @ (W_K * columns)
        s = q @ k.transpose(-1, -2) * scale  # (restarts, targets, widths, n, n)
        return s if score_cap is None else score_cap * torch.tanh(s / score_cap)

    optimiser = torch.optim.Adam([W_Q, W_K], lr=lr)
    for _ in range(steps):
        cross_entropy = -(goal * scores().log_softmax(dim=-1)).sum(dim=-1).mean(dim=-1)  # (restarts, targets, widths)
        optimiser.zero_grad()
        cross_entropy.sum().backward()  # the fits are independent, so one backward pass serves all
        optimiser.step()

    with torch.no_grad():
        final_scores = scores()  # (restarts, targets, widths, n, n)
        fitted = final_scores.softmax(dim=-1)
        errors = pattern_error(fitted, goal)  # (restarts, targets, widths)
        best = errors.argmin(dim=0)  # (targets, widths)
        pick = best[None, :, :, None, None].expand(1, n_targets, n_widths, n, n)
        return PatternFit(
            d_heads=d_heads,
            error=errors.gather(0, best[None]).squeeze(0),  # (targets, widths)
            fitted=fitted.gather(0, pick).squeeze(0),  # (targets, widths, n, n)
            scores=final_scores.gather(0, pick).squeeze(0),
        )


class PatternFitsError(RuntimeError):
    """The stored pattern fits are missing, unreadable or malformed; the message says how to regenerate them."""


@dataclass(frozen=True)
class StoredPatternFits:
    """The fits ``scripts/fit_head_patterns.py`` stored, as :func:`load_pattern_fits` reads them (chapter 2).

    ``error[regime]`` and ``score_range[regime]`` are (seeds, targets, widths):
    for every seed, :attr:`PatternFit.error` and :meth:`PatternFit.score_range`
    of :func:`fit_head_patterns` (best of ``setup["restarts"]`` restarts),
    rounded to 4 decimals. ``score_caps[regime]`` is the ``score_cap`` the
    regime used (None for free scores). ``setup`` records the token vectors,
    steps, learning rate and restarts; ``target_recipes`` how each target was
    built.
    """

    path: Path
    targets: tuple[str, ...]
    target_recipes: dict[str, str]
    widths: tuple[int, ...]
    seeds: tuple[int, ...]
    score_caps: dict[str, float | None]
    error: dict[str, Tensor]  # regime -> (seeds, targets, widths)
    score_range: dict[str, Tensor]  # regime -> (seeds, targets, widths)
    setup: dict
    regenerate: str

    @property
    def regimes(self) -> tuple[str, ...]:
        """The regimes' names, in the file's order (for example ``"free scores"``)."""
        return tuple(self.error)

    def check_setup(self, *, n: int, d_model: int, targets: Sequence[str], widths: Sequence[int],
                    steps: int, restarts: int) -> None:
        """Raise :class:`PatternFitsError` unless the file describes this experiment (a notebook's own setup)."""
        expected = {"n": n, "d_model": d_model, "targets": tuple(targets), "widths": tuple(int(w) for w in widths),
                    "steps": steps, "restarts": restarts}
        stored = {"n": self.setup["n"], "d_model": self.setup["d_model"], "targets": self.targets,
                  "widths": self.widths, "steps": self.setup["steps"], "restarts": self.setup["restarts"]}
        different = [f"{key}: the file has {stored[key]!r}, the notebook {expected[key]!r}"
                     for key in expected if stored[key] != expected[key]]
        if different:
            raise PatternFitsError(f"the pattern fits in {self.path} were made for another setup ("
                                   + "; ".join(different) + f"). {_how_to_regenerate(self.path)}")


def _how_to_regenerate(path: Path) -> str:
    return how_to_restore(REGENERATE_PATTERN_FITS, path)


def _field(mapping: dict, key: str, check, wanted: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"{where} has no field {key!r} ({wanted})")
    value = mapping[key]
    if not check(value):
        raise ValueError(f"{where}[{key!r}] should be {wanted}, got {value!r:.80}")
    return value


def _table(value, shape: tuple[int, int, int], lowest: float, highest: float, where: str) -> Tensor:
    """A nested list of numbers of exactly ``shape``, every entry in [lowest, highest], as a float64 tensor."""
    def walk(item, depth: int, at: str):
        if depth == len(shape):
            if not is_finite_number(item) or not lowest <= item <= highest:
                raise ValueError(f"{at} should be a number in [{lowest}, {highest}], got {item!r:.80}")
            return float(item)
        if not isinstance(item, list) or len(item) != shape[depth]:
            size = len(item) if isinstance(item, list) else type(item).__name__
            raise ValueError(f"{at} should be a list of {shape[depth]} (the shape is seeds x targets x widths = "
                             f"{shape[0]} x {shape[1]} x {shape[2]}), got {size}")
        return [walk(entry, depth + 1, f"{at}[{index}]") for index, entry in enumerate(item)]

    return torch.tensor(walk(value, 0, where), dtype=torch.float64)


def _parse_pattern_fits(data, path: Path) -> StoredPatternFits:
    if not isinstance(data, dict):
        raise ValueError(f"the file should hold a JSON object, not {type(data).__name__}")
    version = _field(data, "format", is_whole_number, "a whole number", "the file")
    if version != _PATTERN_FITS_FORMAT:
        raise ValueError(f"the file is in format {version}, this version of mha reads format {_PATTERN_FITS_FORMAT}")
    setup = _field(data, "setup", lambda v: isinstance(v, dict), "an object", "the file")
    for key in ("n", "d_model", "token_seed", "steps", "restarts"):
        _field(setup, key, lambda v: is_whole_number(v) and v >= 0, "a whole number >= 0", "setup")
    _field(setup, "lr", lambda v: is_finite_number(v) and v > 0, "a positive number", "setup")
    recipes = _field(data, "targets", lambda v: isinstance(v, dict) and v and all(
        isinstance(k, str) and isinstance(r, str) for k, r in v.items()),
        "an object: target name -> recipe", "the file")
    widths = _field(data, "widths",
                    lambda v: isinstance(v, list) and v and all(is_whole_number(w) and w >= 1 for w in v)
                    and len(set(v)) == len(v), "a list of distinct head widths >= 1", "the file")
    seeds = _field(data, "seeds", lambda v: isinstance(v, list) and v and all(is_whole_number(s) for s in v)
                   and len(set(v)) == len(v), "a list of distinct whole-number seeds", "the file")
    regimes = _field(data, "regimes", lambda v: isinstance(v, dict) and v, "a non-empty object: regime -> fits",
                     "the file")
    shape = (len(seeds), len(recipes), len(widths))
    score_caps, error, score_range = {}, {}, {}
    for regime, fits in regimes.items():
        where = f"regimes[{regime!r}]"
        score_caps[regime] = _field(fits, "score_cap", lambda v: v is None or (is_finite_number(v) and v > 0),
                                    "null (free scores) or a positive number", where)
        error[regime] = _table(_field(fits, "error", lambda v: True, "", where), shape, 0.0, 1.0,
                               f"{where}['error']")
        score_range[regime] = _table(_field(fits, "score_range", lambda v: True, "", where), shape, 0.0, math.inf,
                                     f"{where}['score_range']")
    regenerate = data.get("regenerate", REGENERATE_PATTERN_FITS)
    return StoredPatternFits(path=path, targets=tuple(recipes), target_recipes=dict(recipes), widths=tuple(widths),
                             seeds=tuple(seeds), score_caps=score_caps, error=error, score_range=score_range,
                             setup=dict(setup), regenerate=str(regenerate))


def load_pattern_fits(path: str | os.PathLike | None = None) -> StoredPatternFits:
    """The book's stored single-head fits (``data/pattern_fits.json``), checked. Chapter 2, "The low-rank bottleneck".

    The fits are an optimisation whose path is chaotic (a perturbation in the
    13th digit moves a narrow head's error by up to about 0.1), so they cannot
    be recomputed identically on another CPU; ``scripts/fit_head_patterns.py``
    runs them once, for several seeds, and this reads the result. A missing,
    unreadable or malformed file raises :class:`PatternFitsError` with the
    command that regenerates it.
    """
    path = PATTERN_FITS_PATH if path is None else as_path("path", path)
    how = _how_to_regenerate(path)
    raw = read_verified_file(path, what="the stored pattern fits", how=how, limit=_MAX_PATTERN_FITS_BYTES,
                             error=PatternFitsError)
    data = parse_json(raw, what="the stored pattern fits", path=path, how=how, error=PatternFitsError)
    try:
        return _parse_pattern_fits(data, path)
    except ValueError as error:
        raise PatternFitsError(f"the stored pattern fits {path} are malformed: {error}. "
                               f"{_how_to_regenerate(path)}") from error
