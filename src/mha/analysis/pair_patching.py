"""Minimal pairs under patching: how much of a pair's difference each head's output carries (3.2, 3.3).

A minimal pair is two inputs that differ in one place (*big* and *small*; a subject in the singular and in the
plural), and a **readout** turns the model's last-layer states into one number per input (how far *it* leans to the
first noun; how plural a probe finds the verb). :func:`patch_between_halves` traces the first inputs and the second
inputs, patches every head's output (:mod:`mha.pretrained.patching`) from each input into its twin, both ways, and
returns each pair's difference and how far patching each head moves the readout, in the same units:
:class:`PairPatching` holds them, oriented by the caller so that positive follows the answer, and gives every head's
share of the difference with bootstrap intervals over pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mha.analysis.statistics import bootstrap_interval
from mha.core.validation import check_items
from mha.pretrained.encoder import EncoderTrace, MiniLMEncoder
from mha.pretrained.patching import head_patching_effects

__all__ = ["PairPatching", "patch_between_halves"]

PairReadout = Callable[[EncoderTrace, object], np.ndarray]
"""``readout(target, states) -> values (rows,)``: one number per input of ``target``, read from ``states``
(rows, seq, d_model), a patched run of the same batch, or from the trace's own last layer when ``states`` is None."""


@dataclass(frozen=True)
class PairPatching:
    """How much of each minimal pair's difference every head's output carries (3.2, 3.3 "Coreference, honestly").

    ``difference`` (pairs,): how much the readout differs between the two inputs of a pair, oriented so that
    positive follows the answer (the pronoun leans to the right noun; the verb reads the subject's number).
    ``carried`` (pairs, layers, heads): how far patching one head's output from the other input moves the readout,
    in the same units and direction, averaged over the two directions. A head that carried all of the difference
    would have ``carried == difference``. ``left_out`` names the pairs whose inputs have different numbers of tokens,
    which cannot be patched.
    """

    pair_ids: tuple[str, ...]
    difference: np.ndarray
    carried: np.ndarray
    left_out: tuple[str, ...] = ()

    @property
    def shares(self) -> np.ndarray:
        """(pairs, layers, heads): ``carried`` in units of the mean difference over all pairs (1 = all of it).

        The unit is fixed (it does not depend on which heads or which half of the pairs is looked at), so a
        share can be averaged over any pairs and resampled without dividing by a small resampled mean.
        """
        return self.carried / self.difference.mean()

    def share(self, pairs=None) -> np.ndarray:
        """Mean share of the difference each head carries over ``pairs`` (default all): (layers, heads)."""
        return self.shares[slice(None) if pairs is None else np.asarray(pairs)].mean(axis=0)

    def share_interval(self, pairs=None, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """95% percentile bootstrap interval of :meth:`share` over ``pairs``, resampling pairs
        (:func:`mha.analysis.statistics.bootstrap_interval`): ``(low, high)``, each (layers, heads)."""
        return bootstrap_interval(self.shares[slice(None) if pairs is None else np.asarray(pairs)], seed=seed)

    def to_dict(self, decimals: int = 6) -> dict:
        """The result as JSON-ready lists, rounded to ``decimals`` places (what the patching scripts store)."""
        return {"pair_ids": list(self.pair_ids), "left_out": list(self.left_out),
                "difference": np.round(self.difference, decimals).tolist(),
                "carried": np.round(self.carried, decimals).tolist()}


def patch_between_halves(encoder: MiniLMEncoder, first: Sequence[Sequence[str]], second: Sequence[Sequence[str]],
                         readout: PairReadout) -> tuple[np.ndarray, np.ndarray]:
    """Patch every head between ``first[i]`` and ``second[i]`` (words, same number of tokens), both ways (3.2, 3.3).

    Returns ``(difference, moved)``, not yet oriented: ``difference`` (pairs,) is the readout of the first input
    minus that of the second; ``moved`` (pairs, layers, heads) is half of (what patching a head from the first into
    the second adds to the second's readout, minus what patching it from the second into the first adds to the
    first's), so a head that carried the whole difference has ``moved == difference``. One batch holds the first
    inputs then the second ones, each patched from its twin (:func:`mha.pretrained.patching.head_patching_effects`).
    """
    first, second = check_items("first", first, "lists of words"), check_items("second", second, "lists of words")
    if len(first) != len(second) or not first:
        raise ValueError(f"first has {len(first)} inputs and second {len(second)}; give one twin for each, at least "
                         "one pair.")
    pairs = len(first)
    target = encoder.trace([list(w) for w in first] + [list(w) for w in second], is_split_into_words=True)
    source = encoder.trace([list(w) for w in second] + [list(w) for w in first], is_split_into_words=True)

    def read(states):
        return readout(target, states)  # (2 * pairs,)

    effects = head_patching_effects(encoder, target, source, read)  # (layers, heads, 2 * pairs)
    clean = np.asarray(read(None), dtype=float)  # (2 * pairs,)
    moved = effects[..., pairs:] - effects[..., :pairs]  # (layers, heads, pairs)
    return clean[:pairs] - clean[pairs:], np.moveaxis(moved, -1, 0) / 2
