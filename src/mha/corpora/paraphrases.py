"""The model's own task in miniature: find each sentence's paraphrase among look-alikes (chapter 4, "Caveats").

all-MiniLM-L6-v2 was trained so that a sentence's vector is closer to its
paraphrase's than to other sentences' (a contrastive objective over
sentence pairs, by its model card). To ask which heads matter *for that
task*, chapter 4 ("Redundancy and pruning") needs a small test of it. This
module holds one, written for this book: :data:`TRIPLES` are 24 sets of three
short sentences,

* an **anchor** ("He lost his keys on the way home."),
* its **paraphrase**, in mostly different words ("His keys went missing while he walked home."),
* a **distractor** on the same topic, with many of the anchor's words, that means
  something else ("He found his keys on the way home."),

and scores of how well a model's sentence vectors do on them. Every anchor
is compared with every candidate: all paraphrases and all distractors (its
own distractor is the hardest negative, the other triples' sentences are
unrelated). :func:`unrelated_accuracy` scores the easy half of the task,
:func:`distractor_accuracy` the hard half, :func:`ranking_accuracy` and
:func:`contrastive_loss` (the training objective) both at once;
:func:`similarity_rank_correlation` compares a changed model with the full
one, and :func:`word_overlap_similarity` is a baseline with no model at all.
:func:`split_triples` draws a seeded split into a half used to choose things
(which heads to prune) and a half used only to report them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata

from mha.core.validation import (
    InputError,
    as_real_array,
    check_finite_number,
    check_items,
    check_real_tensor,
    check_size,
    check_type,
    check_whole_number,
)

__all__ = ["ParaphraseTriple", "TRIPLES", "split_triples", "PairSet", "pair_set", "similarity_scores",
           "word_overlap_similarity", "ranking_accuracy", "unrelated_accuracy", "distractor_accuracy",
           "retrieval_accuracy", "contrastive_loss", "similarity_rank_correlation", "task_scores"]


@dataclass(frozen=True)
class ParaphraseTriple:
    """An anchor sentence, a paraphrase of it, and a same-topic sentence that means something else (chapter 4)."""

    anchor: str
    paraphrase: str
    distractor: str


TRIPLES: tuple[ParaphraseTriple, ...] = tuple(ParaphraseTriple(*t) for t in (
    ("The train to Boston was delayed by two hours.", "Our Boston train left two hours late.",
     "The train to Boston arrived ten minutes early."),
    ("She forgot her umbrella and got soaked in the rain.", "Without an umbrella, she was drenched by the rain.",
     "She carried her umbrella but the rain never came."),
    ("The doctor told him to stop smoking.", "His physician advised him to quit cigarettes.",
     "The doctor told him to start running every day."),
    ("The shop closes at nine on weekdays.", "On weekdays the store shuts at nine.",
     "The shop opens at nine on weekends."),
    ("My brother is learning to play the guitar.", "My brother is taking guitar lessons.",
     "My brother sold his old guitar last year."),
    ("The children built a snowman in the garden.", "The kids made a snowman in the yard.",
     "The children watched the snow melt in the garden."),
    ("He lost his keys on the way home.", "His keys went missing while he walked home.",
     "He found his keys on the way home."),
    ("The company hired twenty new engineers this year.", "This year the firm took on twenty more engineers.",
     "The company laid off twenty engineers this year."),
    ("The soup is too salty to eat.", "There is far too much salt in the soup.",
     "The soup needs a little more salt."),
    ("They moved to a small village near the coast.", "They relocated to a little seaside village.",
     "They left a small village near the coast."),
    ("The meeting was postponed until next Friday.", "The meeting has been pushed back to next Friday.",
     "The meeting was moved forward to this Monday."),
    ("The cat is sleeping on the warm windowsill.", "The cat naps on the sunny window ledge.",
     "The cat jumped off the cold windowsill."),
    ("Prices at the supermarket rose sharply last month.", "Groceries got much more expensive last month.",
     "Prices at the supermarket fell slightly last month."),
    ("The museum is free for students on Sundays.", "Students pay nothing to enter the museum on Sundays.",
     "The museum is closed to students on Sundays."),
    ("He fixed the broken bicycle with a new chain.", "He repaired the bike by replacing its chain.",
     "He broke the bicycle chain on a steep hill."),
    ("The concert was cancelled because of the storm.", "The storm forced them to call off the concert.",
     "The concert went ahead despite the storm."),
    ("She passed her driving test on the first try.", "She got her driving licence at her first attempt.",
     "She failed her driving test for the third time."),
    ("The river flooded the fields after heavy rain.", "Heavy rain made the river spill over the fields.",
     "The river dried up after months without rain."),
    ("Our team won the final by three goals.", "Our side took the final with a three-goal margin.",
     "Our team lost the final by three goals."),
    ("The library has extended its opening hours.", "The library now stays open for longer.",
     "The library has reduced its opening hours."),
    ("He cooked pasta for the whole family.", "He made spaghetti for everyone at home.",
     "The whole family cooked pasta for him."),
    ("The old bridge will be repaired next spring.", "Repairs to the old bridge are planned for next spring.",
     "The old bridge was demolished last spring."),
    ("The baby finally fell asleep after midnight.", "It was past midnight when the infant dropped off to sleep.",
     "The baby woke up crying after midnight."),
    ("The printer in the office is out of paper.", "The office printer has run out of paper.",
     "The printer in the office is jammed again."),
))


def split_triples(n_triples: int = len(TRIPLES), n_select: int | None = None,
                  seed: int = 0) -> tuple[list[int], list[int]]:
    """A seeded split of triple indices into a selection half and a held-out half (chapter 4).

    Choices (which heads look important, in what order to prune them) are
    made on the selection half only and judged on the held-out half, so that
    the report is not inflated by the choice. ``n_select`` defaults to half.
    Both lists come back sorted.
    """
    n_triples = check_whole_number("n_triples", n_triples, minimum=2, meaning="one triple for each half")
    check_size("the triple indices to split", (n_triples,))
    n_select = n_triples // 2 if n_select is None else check_whole_number("n_select", n_select)
    if not 1 <= n_select < n_triples:
        raise ValueError(f"n_select must be between 1 and {n_triples - 1}, got {n_select}.")
    order = np.random.default_rng(seed).permutation(n_triples)
    return sorted(int(i) for i in order[:n_select]), sorted(int(i) for i in order[n_select:])


@dataclass(frozen=True)
class PairSet:
    """Some triples laid out for one batch of the encoder (chapter 4).

    ``sentences`` are the anchors, then the paraphrases, then the distractors
    (``3 * n`` strings, in the order of ``triples``); ``anchors``,
    ``paraphrases`` and ``distractors`` are their row indices in
    ``sentences``, each (n,).
    """

    triples: tuple[ParaphraseTriple, ...]
    sentences: list[str]
    anchors: np.ndarray
    paraphrases: np.ndarray
    distractors: np.ndarray

    def rows_of(self, positions) -> np.ndarray:
        """Rows of ``sentences`` for some of this set's triples (positions in ``triples``), laid out as a PairSet.

        ``vectors[pairs.rows_of(positions)]`` are the vectors of the smaller
        set ``pair_set`` of those triples would give, in its order: anchors,
        paraphrases, distractors.
        """
        positions = np.asarray(list(positions), dtype=int)
        n = len(self.triples)
        if positions.size == 0 or positions.min() < 0 or positions.max() >= n:
            raise ValueError(f"positions must be a non-empty list of numbers in 0..{n - 1}.")
        return np.concatenate([self.anchors[positions], self.paraphrases[positions], self.distractors[positions]])


def pair_set(indices=None) -> PairSet:
    """The triples at ``indices`` (default: all of :data:`TRIPLES`) as one :class:`PairSet` (chapter 4)."""
    indices = range(len(TRIPLES)) if indices is None else list(check_items("indices", indices, "a list of indices"))
    bad = [i for i in indices if not (isinstance(i, (int, np.integer)) and 0 <= i < len(TRIPLES))]
    if bad or not indices:
        raise ValueError(f"indices must be a non-empty list of numbers in 0..{len(TRIPLES) - 1}; got {bad or indices}.")
    triples = tuple(TRIPLES[i] for i in indices)
    n = len(triples)
    sentences = [t.anchor for t in triples] + [t.paraphrase for t in triples] + [t.distractor for t in triples]
    return PairSet(triples, sentences, np.arange(n), np.arange(n, 2 * n), np.arange(2 * n, 3 * n))


def similarity_scores(embeddings):
    """Cosine similarity of each anchor with each candidate: (..., n, 2n) from unit vectors (..., 3n, d) (chapter 4).

    ``embeddings`` are unit-length sentence vectors of a :class:`PairSet`'s
    sentences (anchors, paraphrases, distractors), with any leading axes, as
    numpy or as a torch tensor (the result is of the same kind, so a loss
    built on it can be differentiated). Column ``j < n`` is paraphrase
    ``j``, column ``n + j`` distractor ``j``, so the right answer for anchor
    ``i`` is column ``i``.
    """
    meaning = "(..., 3n, d): unit sentence vectors of anchors, paraphrases, distractors"
    embeddings = (check_real_tensor("embeddings", embeddings, meaning=meaning) if isinstance(embeddings, torch.Tensor)
                  else as_real_array("embeddings", embeddings, meaning=meaning))
    if embeddings.ndim < 2 or embeddings.shape[-2] % 3:
        raise ValueError(f"embeddings has shape {tuple(embeddings.shape)}; give (..., 3n, d): anchors, paraphrases, "
                         "distractors.")
    n = embeddings.shape[-2] // 3
    anchors, candidates = embeddings[..., :n, :], embeddings[..., n:, :]
    return anchors @ candidates.swapaxes(-1, -2)  # (..., n, 2n)


def word_overlap_similarity(pairs: PairSet) -> np.ndarray:
    """A baseline with no model: the Jaccard overlap of the two sentences' word sets, (n, 2n) (chapter 4).

    Words are lower-cased and stripped of punctuation; the layout is that of
    :func:`similarity_scores`, so every score of this module applies.
    """
    check_type("pairs", pairs, PairSet, "a PairSet, e.g. pair_set(split_triples()[0])")
    def words(sentence: str) -> set[str]:
        return {w.strip(".,;:!?'\"").lower() for w in sentence.split()} - {""}

    sets = [words(s) for s in pairs.sentences]
    n = len(pairs.triples)
    return np.array([[len(sets[a] & sets[c]) / len(sets[a] | sets[c]) for c in range(n, 3 * n)] for a in range(n)])


def _check_similarity(similarity) -> np.ndarray:
    similarity = as_real_array("similarity", similarity)
    if similarity.ndim < 2 or similarity.shape[-1] != 2 * similarity.shape[-2]:
        raise ValueError(f"similarity has shape {similarity.shape}; it should be (..., n, 2n) from similarity_scores.")
    if not np.isfinite(similarity).all():  # a NaN loses every comparison: the scores would be silently wrong
        raise InputError("similarity holds NaN or inf; a cosine similarity is between -1 and 1. Find where it came "
                         "from (a zero vector divided by its norm?) before scoring.")
    return similarity


def ranking_accuracy(similarity) -> np.ndarray:
    """Share of (anchor, wrong candidate) comparisons in which the anchor's paraphrase scores higher (chapter 4).

    ``similarity`` (..., n, 2n) from :func:`similarity_scores`. For each
    anchor ``i`` the paraphrase (column ``i``) is compared with the other
    ``2n - 1`` candidates; a tie counts one half. 1.0 means every paraphrase
    beats every other candidate; 0.5 is chance. Returns (...).
    """
    similarity = _check_similarity(similarity)
    n = similarity.shape[-2]
    right = np.diagonal(similarity[..., :n], axis1=-2, axis2=-1)[..., None]  # (..., n, 1)
    wins = (right > similarity).sum(-1) + 0.5 * ((right == similarity).sum(-1) - 1)  # (..., n), self not counted
    return wins.mean(-1) / (2 * n - 1)


def _win_rate(right: np.ndarray, other: np.ndarray) -> np.ndarray:
    """1 where ``right > other``, 0.5 where equal, 0 where smaller."""
    return (right > other) + 0.5 * (right == other)


def unrelated_accuracy(similarity) -> np.ndarray:
    """Share of (anchor, another triple's paraphrase) comparisons won by the anchor's own paraphrase (chapter 4).

    The easy half of the task: the other paraphrases are about other
    things. Ties count one half. (..., n, 2n) -> (...).
    """
    similarity = _check_similarity(similarity)
    n = similarity.shape[-2]
    paraphrases = similarity[..., :n]  # (..., n, n)
    right = np.diagonal(paraphrases, axis1=-2, axis2=-1)[..., None]  # (..., n, 1)
    wins = _win_rate(right, paraphrases)  # (..., n, n); the diagonal compares the paraphrase with itself
    off_diagonal = ~np.eye(n, dtype=bool)
    return (wins * off_diagonal).sum((-2, -1)) / off_diagonal.sum()


def distractor_accuracy(similarity) -> np.ndarray:
    """Share of anchors whose paraphrase is closer than their own distractor (ties: one half) (chapter 4).

    The hard half of the task: the distractor shares most of the anchor's
    words but not its meaning. 0.5 is chance. (..., n, 2n) -> (...).
    """
    similarity = _check_similarity(similarity)
    n = similarity.shape[-2]
    right = np.diagonal(similarity[..., :n], axis1=-2, axis2=-1)  # (..., n)
    distractor = np.diagonal(similarity[..., n:], axis1=-2, axis2=-1)  # (..., n)
    return _win_rate(right, distractor).mean(-1)


def retrieval_accuracy(similarity) -> np.ndarray:
    """Share of anchors whose most similar candidate is their own paraphrase (chapter 4). (..., n, 2n) -> (...)."""
    similarity = _check_similarity(similarity)
    n = similarity.shape[-2]
    return (similarity.argmax(-1) == np.arange(n)).mean(-1)


def contrastive_loss(similarity, scale: float = 20.0):
    """The training objective on this set: cross-entropy of finding the paraphrase among all candidates (chapter 4).

    ``softmax(scale * similarity)`` over the ``2n`` candidates of each
    anchor, minus the log-probability of its paraphrase, averaged over
    anchors: the in-batch contrastive loss with hard negatives that
    sentence-transformers calls MultipleNegativesRankingLoss (default
    ``scale`` 20). (..., n, 2n) -> (...); lower is better. Takes numpy or
    torch and returns the same kind (torch keeps the autograd graph).
    """
    as_torch = isinstance(similarity, torch.Tensor)
    scale = check_finite_number("scale", scale, positive=True, meaning="sentence-transformers uses 20")
    similarity = (check_real_tensor("similarity", similarity, meaning="(..., n, 2n) from similarity_scores")
                  if as_torch else torch.as_tensor(_check_similarity(similarity)))
    logits = scale * similarity
    if logits.ndim < 2 or logits.shape[-1] != 2 * logits.shape[-2]:
        raise ValueError(f"similarity has shape {tuple(logits.shape)}; it should be (..., n, 2n) from "
                         "similarity_scores.")
    n = logits.shape[-2]
    right = torch.diagonal(logits[..., :n], dim1=-2, dim2=-1)  # (..., n): the paraphrase's logit
    loss = (torch.logsumexp(logits, dim=-1) - right).mean(-1)  # (...)
    return loss if as_torch else loss.numpy()


def similarity_rank_correlation(similarity, reference) -> np.ndarray:
    """Spearman correlation between two models' similarity scores over all (anchor, candidate) pairs (chapter 4).

    ``similarity`` (..., n, 2n) from a changed model, ``reference`` (n, 2n)
    from the full one: 1 means the changed model orders every pair exactly
    as the full model does. (Ties get their average rank.) -> (...).
    """
    similarity, reference = _check_similarity(similarity), _check_similarity(reference)
    if similarity.shape[-2:] != reference.shape:
        raise ValueError(f"similarity {similarity.shape} and reference {reference.shape} must describe the same pairs.")
    flat = similarity.reshape(-1, reference.size)  # (models, pairs)
    ranks = rankdata(flat, axis=-1)
    reference_ranks = rankdata(reference.ravel())
    ranks = ranks - ranks.mean(-1, keepdims=True)
    reference_ranks = reference_ranks - reference_ranks.mean()
    rho = (ranks @ reference_ranks) / (np.linalg.norm(ranks, axis=-1) * np.linalg.norm(reference_ranks))
    return rho.reshape(similarity.shape[:-2])


def task_scores(similarity) -> dict[str, float]:
    """Every score of one model on one :class:`PairSet`, from its (n, 2n) similarities, as plain floats (chapter 4)."""
    similarity = _check_similarity(similarity)
    if similarity.ndim != 2:
        raise ValueError("task_scores takes the similarities of one model, (n, 2n); use the array functions for more.")
    return {"paraphrase vs unrelated": float(unrelated_accuracy(similarity)),
            "paraphrase vs distractor": float(distractor_accuracy(similarity)),
            "ranking accuracy": float(ranking_accuracy(similarity)),
            "retrieval accuracy": float(retrieval_accuracy(similarity)),
            "contrastive loss": float(contrastive_loss(similarity))}
