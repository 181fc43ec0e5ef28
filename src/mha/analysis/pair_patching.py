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
from mha.core.validation import LIMITS, as_path, check_items, check_type, check_whole_number
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.patching import final_states_with_heads_patched, head_patching_effects
from mha.pretrained.sentence_embedding import sentence_embeddings
from mha.pretrained.traces import EncoderTrace

__all__ = ["PairPatching", "patch_between_halves", "HeadAgainstLayer", "NAMED_HEAD_PATCHING_PATH",
           "load_named_head_patching", "MINIMAL_PAIRS", "sentence_vector_patching"]

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

    def against_layer(self, layer: int, head: int, pairs=None, *, seed: int = 0) -> HeadAgainstLayer:
        """Head ``(layer, head)``'s share next to the mean share of the other heads of its layer (4.1).

        A baseline for a named head: the same patch, the same pairs, another head of the same layer, averaged over
        those heads pair by pair. Intervals are 95% percentile bootstraps over ``pairs`` (default all), the same
        resamples for the head, the baseline and their difference (:func:`mha.analysis.statistics.
        bootstrap_interval`, ``seed``). Returns a :class:`HeadAgainstLayer`.
        """
        shares = self.shares[slice(None) if pairs is None else np.asarray(pairs)]  # (pairs, layers, heads)
        n_layers, n_heads = shares.shape[1:]
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head ({layer}, {head}) is not one of the {n_layers} x {n_heads} heads patched.")
        if n_heads < 2:
            raise ValueError("the layer has a single head, so there is no other head of the layer to compare with.")
        own = shares[:, layer, head]  # (pairs,)
        others = np.delete(shares[:, layer], head, axis=1).mean(axis=1)  # (pairs,)
        values = np.stack([own, others, own - others], axis=1)  # (pairs, 3)
        low, high = bootstrap_interval(values, seed=seed)
        return HeadAgainstLayer(len(own), *values.mean(axis=0), *zip(low, high, strict=True))

    def to_dict(self, decimals: int = 6, layers=None) -> dict:
        """The result as JSON-ready lists, rounded to ``decimals`` places (what the patching scripts store).

        With ``layers`` (a list of layer indices), ``carried`` keeps only those layers, listed under ``"layers"``:
        what a script that patched only some layers stores (4.1); :meth:`from_dict` puts NaN in the others.
        """
        carried = self.carried if layers is None else self.carried[:, list(layers)]
        content = {"pair_ids": list(self.pair_ids), "left_out": list(self.left_out),
                   "difference": np.round(self.difference, decimals).tolist(),
                   "carried": np.round(carried, decimals).tolist()}
        return content if layers is None else {**content, "layers": [int(layer) for layer in layers]}

    @classmethod
    def from_dict(cls, content: dict, n_layers: int | None = None) -> PairPatching:
        """The :class:`PairPatching` that :meth:`to_dict` stored; with ``"layers"`` in ``content``, ``carried`` is
        spread over ``n_layers`` layers, NaN in those not patched. Raises ValueError on a malformed record."""
        try:
            pair_ids = tuple(str(pair_id) for pair_id in content["pair_ids"])
            left_out = tuple(str(pair_id) for pair_id in content.get("left_out", ()))
            difference = np.asarray(content["difference"], dtype=float)
            carried = np.asarray(content["carried"], dtype=float)
            layers = content.get("layers")
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("a stored pair patching needs 'pair_ids', 'difference' (pairs,) and 'carried' "
                             "(pairs, layers, heads) of numbers.") from None
        if difference.shape != (len(pair_ids),) or carried.ndim != 3 or carried.shape[0] != len(pair_ids):
            raise ValueError(f"a stored pair patching has {len(pair_ids)} pairs, 'difference' {difference.shape} and "
                             f"'carried' {carried.shape}; they should be (pairs,) and (pairs, layers, heads).")
        if layers is not None:
            if n_layers is None or len(layers) != carried.shape[1] or not all(0 <= l < n_layers for l in layers):
                raise ValueError(f"the record patched layers {layers}; give n_layers (the model's) and one block of "
                                 "'carried' per listed layer.")
            full = np.full((len(pair_ids), n_layers, carried.shape[2]), np.nan)
            full[:, list(layers)] = carried
            carried = full
        return cls(pair_ids, difference, carried, left_out)


@dataclass(frozen=True)
class HeadAgainstLayer:
    """One head's mean share of a pair difference against the other heads of its layer (4.1), from
    :meth:`PairPatching.against_layer`: ``share``, ``others`` (their mean share) and ``excess`` (share - others),
    each with a 95% bootstrap interval over the ``pairs`` pairs."""

    pairs: int
    share: float
    others: float
    excess: float
    share_interval: tuple[float, float]
    others_interval: tuple[float, float]
    excess_interval: tuple[float, float]


def patch_between_halves(encoder: MiniLMEncoder, first: Sequence[Sequence[str]], second: Sequence[Sequence[str]],
                         readout: PairReadout, heads=None) -> tuple[np.ndarray, np.ndarray]:
    """Patch every head between ``first[i]`` and ``second[i]`` (words, same number of tokens), both ways (3.2, 3.3).

    Returns ``(difference, moved)``, not yet oriented: ``difference`` (pairs,) is the readout of the first input
    minus that of the second; ``moved`` (pairs, layers, heads) is half of (what patching a head from the first into
    the second adds to the second's readout, minus what patching it from the second into the first adds to the
    first's), so a head that carried the whole difference has ``moved == difference``. One batch holds the first
    inputs then the second ones, each patched from its twin (:func:`mha.pretrained.patching.head_patching_effects`).
    A readout may also give several numbers per input, shape (readouts, 2 * pairs) with the inputs last: then
    ``difference`` is (readouts, pairs) and ``moved`` (pairs, layers, heads, readouts) (4.1 reads two at once).
    ``heads`` patches only the listed ``(layer, head)`` pairs (default all); the others' ``moved`` is NaN.
    """
    first, second = check_items("first", first, "lists of words"), check_items("second", second, "lists of words")
    check_type("readout", readout, Callable, "a function of (target trace, final states) -> (2 * pairs,) values")
    if len(first) != len(second) or not first:
        raise ValueError(f"first has {len(first)} inputs and second {len(second)}; give one twin for each, at least "
                         "one pair.")
    pairs = len(first)
    target = encoder.trace([list(w) for w in first] + [list(w) for w in second], is_split_into_words=True)
    source = encoder.trace([list(w) for w in second] + [list(w) for w in first], is_split_into_words=True)

    def read(states):
        return readout(target, states)  # (2 * pairs,)

    effects = head_patching_effects(encoder, target, source, read, heads)  # (layers, heads, [readouts,] 2 * pairs)
    clean = np.asarray(read(None), dtype=float)  # (2 * pairs,)
    moved = effects[..., pairs:] - effects[..., :pairs]  # (layers, heads, [readouts,] pairs)
    return clean[..., :pairs] - clean[..., pairs:], np.moveaxis(moved, -1, 0) / 2


NAMED_HEAD_PATCHING_PATH = DATA_DIRECTORY / "named_head_patching.json"
"""The heads the book names, patched between minimal pairs; written by ``scripts/named_head_patching.py`` (4.1)."""


def load_named_head_patching(path=NAMED_HEAD_PATCHING_PATH, n_layers: int = 6) -> dict:
    """What ``scripts/named_head_patching.py`` stored, checked against ``data/SHA256SUMS`` (4.1).

    The stored dict, with each arc's ``"word"`` and ``"sentence"`` records of ``content["relations"]`` and each edit
    of the tiny model (``content["tiny"]["edits"]``, under ``"patching"``: its single heads as (pairs, layers, heads))
    turned into :class:`PairPatching`. A missing, tampered or malformed file raises ``ValueError`` with the command
    that regenerates it.
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    n_layers = check_whole_number("n_layers", n_layers, minimum=1, maximum=LIMITS["layers"], meaning="the model's")
    what = "the stored patching of the named heads"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.named_head_patching",
                                      limit=8_000_000)
    try:
        relations = {relation: {**record, **{readout: PairPatching.from_dict(record[readout], n_layers)
                                             for readout in ("word", "sentence")}}
                     for relation, record in content["relations"].items()}
        tiny = content["tiny"]
        shape = np.asarray(tiny["prefix_matching"], dtype=float).shape  # (layers, heads)
        edits = {}
        for edit, record in tiny["edits"].items():
            difference = np.asarray(record["difference"], dtype=float)
            carried = np.stack([np.stack([np.asarray(record["carried"][f"L{layer}H{head}"], dtype=float)
                                          for head in range(shape[1])], axis=1) for layer in range(shape[0])], axis=1)
            edits[edit] = {**record, "patching": PairPatching(tuple(str(i) for i in range(len(difference))),
                                                              difference, carried)}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"{what} {path} is malformed: it needs 'relations' (each with 'word' and 'sentence' pair "
                         f"patchings) and 'tiny' (with 'prefix_matching' and 'edits'). {how}") from None
    return {**content, "relations": relations, "tiny": {**tiny, "edits": edits}}


MINIMAL_PAIRS = (
    ("He lost his keys on the way home.", "He lost his shoes on the way home."),
    ("The keys were on the table.", "The coins were on the table."),
    ("She opened the door with a key.", "She opened the door with a knife."),
    ("The dog chased the cat.", "The cat chased the dog."),
    ("The children played in the park.", "The children slept in the park."),
    ("A man was reading a book.", "A woman was reading a letter."),
)
"""Sentence pairs that differ in a word or two and split into the same number of tokens, for patching one head (4.1)."""


def sentence_vector_patching(encoder: MiniLMEncoder, clean: str, corrupt: str, heads) -> dict[str, float]:
    """Patch ``heads`` (a list of (layer, head)) from ``corrupt`` into ``clean`` and read the sentence vector (4.1).

    Both sentences must split into the same number of tokens. With ``e`` the sentence vectors (last layer mean-pooled,
    unit length) of the clean run, the corrupt run and the patched run, and the readout ``r(x) = cos(x, e_clean) -
    cos(x, e_corrupt)``, which spans the pair's whole difference ``r(e_clean) - r(e_corrupt) = 2 (1 - cos(e_clean,
    e_corrupt))``, returns ``"share"``: ``(r(e_clean) - r(e_patched)) / (r(e_clean) - r(e_corrupt))``, how much of the
    difference the heads' outputs carry (1: all of it); ``"moved"``, that numerator alone; and ``"cosine change"``,
    ``1 - cos(e_patched, e_clean)``. The patch is :func:`mha.pretrained.patching.final_states_with_heads_patched`.
    """
    encoder = check_encoder(encoder)
    for name, sentence in (("clean", clean), ("corrupt", corrupt)):
        check_type(name, sentence, str, "one sentence, e.g. 'The keys were on the table.'")
    target, source = encoder.trace([clean]), encoder.trace([corrupt])
    patched = final_states_with_heads_patched(encoder, target, source, heads)  # (1, seq, d_model)
    e_clean, e_corrupt, e_patched = (sentence_embeddings(states, target.real_tokens)[0].double().numpy() for states
                                     in (target.hidden_states[-1], source.hidden_states[-1], patched))

    def readout(x: np.ndarray) -> float:
        return float(x @ e_clean - x @ e_corrupt)

    moved, difference = readout(e_clean) - readout(e_patched), readout(e_clean) - readout(e_corrupt)
    if not difference > 1e-9:
        raise ValueError(f"{clean!r} and {corrupt!r} have the same sentence vector; patching has nothing to carry.")
    return {"share": moved / difference, "moved": moved, "cosine change": float(1 - e_patched @ e_clean)}
