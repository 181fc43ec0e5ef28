"""How faithfully a pruned all-MiniLM-L6-v2 keeps the full model's sentence similarities on real text (4.2).

Section 4.2 prunes heads in order of importance and asks how many can go before the model's output changes too
much. Judged on a few hand-written sentence triples, that count depends on the triples; this module judges it on
real sentences (UD English-EWT), by **fidelity to the full model**: the Spearman correlation between the pruned
model's cosine similarities of every pair of sentences and the full model's
(:func:`pairwise_similarities`, :func:`similarity_fidelity`).

* :func:`embeddings_in_length_chunks` embeds many sentences under many head masks, in chunks of similar length
  (padding a whole corpus to its longest sentence would waste most of the work): (configs, n, d_model);
* :func:`self_retrieval_loss` is the loss whose gradient ranks heads on sentences without labels: each pruned
  sentence vector must pick out its own full-model vector among the batch's (the model's contrastive objective,
  with the full model as the partner); at the full model its gradient is not 0, unlike a distance to the full
  model's vectors;
* :func:`fidelity_pruning_curve` chooses an order on one set of sentences and judges it on another;
* :func:`resampled_removable` gives the spread of the removable count from resampling the judged sentences (or
  their documents);
* :func:`treebank_document` and :func:`document_split` judge on another design of pairs: instead of sentences drawn
  one by one from the whole treebank (nearly every pair unrelated), runs of consecutive sentences of whole
  documents, whose pairs mix related sentences (one document, one source) with unrelated ones, as the texts a
  similarity search ranks do;
* :func:`pruning_claim_verdict` turns the removable counts of every design into one verdict on "many heads can be
  pruned with little loss", by the rule it states.

``scripts/pruning_treebank.py`` stores the curves; :func:`load_pruning_treebank` reads them
(chapter 4, "Redundancy and pruning").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from scipy.stats import rankdata
from torch import Tensor

from mha.core.argument_checks import check_items_of, check_whole_numbers
from mha.core.resampling import bootstrap_indices
from mha.core.validation import as_path, as_real_array, check_finite_number, check_items, check_rank, check_whole_number
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.interventions import as_head_masks, embeddings_under_masks
from mha.pretrained.overrides import HeadMask

__all__ = ["PRUNING_TREEBANK_PATH", "document_split", "embeddings_in_length_chunks", "fidelity_pruning_curve",
           "load_pruning_treebank", "pairwise_similarities", "resampled_removable", "self_retrieval_loss",
           "pruning_claim_verdict", "similarity_fidelity", "treebank_document"]


def pairwise_similarities(vectors: npt.ArrayLike) -> np.ndarray:
    """Cosine similarity of every pair of distinct sentences, upper triangle by rows: (..., n, d) -> (..., n(n-1)/2).

    ``vectors`` need not be unit length; each is scaled to length 1 first.
    """
    vectors = as_real_array("vectors", vectors, meaning="(..., sentences, d_model)")
    if vectors.ndim < 2 or vectors.shape[-2] < 2:
        raise ValueError(f"vectors has shape {vectors.shape}; give (..., sentences, d_model), at least 2 sentences.")
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    similarity = unit @ np.swapaxes(unit, -1, -2)  # (..., n, n)
    rows, columns = np.triu_indices(vectors.shape[-2], k=1)
    return similarity[..., rows, columns]


def _spearman_rows(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``values`` (models, pairs) with ``reference`` (pairs,): (models,)."""
    ranks = rankdata(values, axis=-1)
    reference_ranks = rankdata(reference)
    ranks = ranks - ranks.mean(-1, keepdims=True)
    reference_ranks = reference_ranks - reference_ranks.mean()
    return (ranks @ reference_ranks) / (np.linalg.norm(ranks, axis=-1) * np.linalg.norm(reference_ranks))


def similarity_fidelity(changed: npt.ArrayLike, full: npt.ArrayLike) -> np.ndarray:
    """Spearman correlation of a changed model's pairwise sentence similarities with the full model's: (configs,).

    ``changed`` (configs, n, d_model) or (n, d_model), ``full`` (n, d_model): the same n sentences. 1 means the
    changed model orders every pair of sentences as the full model does (ties: average ranks).
    """
    changed = as_real_array("changed", changed, meaning="(configs, sentences, d_model)")
    full = as_real_array("full", full, meaning="(sentences, d_model)")
    single = changed.ndim == 2
    changed = changed[None] if single else changed
    if changed.ndim != 3 or full.ndim != 2 or changed.shape[1:] != full.shape:
        raise ValueError(f"changed {changed.shape} and full {full.shape} must hold the same sentences: "
                         "(configs, n, d_model) and (n, d_model).")
    rho = _spearman_rows(pairwise_similarities(changed), pairwise_similarities(full))
    return rho[0] if single else rho


def self_retrieval_loss(vectors: Tensor, reference: Tensor, scale: float = 20.0) -> Tensor:
    """Cross-entropy of each sentence vector picking out its own reference vector among the batch's: a 0-d tensor.

    ``vectors`` (n, d_model), e.g. the (pruned) model's sentence vectors with autograd; ``reference`` (n, d_model),
    the full model's, held fixed. Logits are ``scale`` times the cosine similarities (n, n); row i's right answer is
    column i, as in sentence-transformers' MultipleNegativesRankingLoss (scale 20) with the full model as partner.
    """
    if vectors.ndim != 2 or reference.shape != vectors.shape:
        raise ValueError(f"vectors {tuple(vectors.shape)} and reference {tuple(reference.shape)} must both be "
                         "(n, d_model).")
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    target = torch.nn.functional.normalize(reference.detach().to(vectors), dim=-1)
    logits = scale * unit @ target.T  # (n, n)
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(vectors), device=logits.device))


def embeddings_in_length_chunks(encoder: MiniLMEncoder, sentences: Sequence[str], masks: HeadMask | None = None, *,
                                chunk: int = 48, max_sequences: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Sentence vectors of the full model and under each mask, sentences run in chunks of similar length.

    Returns ``full`` (n, d_model) and ``changed`` (configs, n, d_model) (configs = 0 without ``masks``), in the
    order of ``sentences``. Sorting by length before padding keeps each chunk's padding small.
    """
    encoder = check_encoder(encoder)
    sentences = check_items("sentences", sentences, "a list of sentences (strings)")
    chunk = check_whole_number("chunk", chunk, minimum=1)
    if not sentences or not all(isinstance(s, str) and s.strip() for s in sentences):
        raise ValueError("sentences must be a non-empty list of non-empty strings.")
    from mha.pretrained.sentence_embedding import sentence_embeddings

    mask_tensor = None if masks is None else as_head_masks(encoder, masks)  # (configs, layers, heads)
    order = np.argsort([len(encoder.tokenize([s]).real_tokens[0]) for s in sentences], kind="stable")
    d_model = encoder.config.d_model
    full = np.zeros((len(sentences), d_model), dtype=np.float32)
    configs = 0 if mask_tensor is None else len(mask_tensor)
    changed = np.zeros((configs, len(sentences), d_model), dtype=np.float32)
    for start in range(0, len(sentences), chunk):
        rows = order[start:start + chunk]
        trace = encoder.trace([sentences[i] for i in rows])
        full[rows] = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()
        if configs:
            changed[:, rows] = embeddings_under_masks(encoder, trace, mask_tensor, max_sequences=max_sequences)
    return full, changed


def fidelity_pruning_curve(encoder: MiniLMEncoder, selection: Sequence[str], report: Sequence[str],
                           counts: Sequence[int], *, order: str | npt.ArrayLike = "gradient", seed: int = 0,
                           stop_below: float | None = None, chunk: int = 48) -> dict[str, np.ndarray]:
    """Prune heads in an order chosen on the ``selection`` sentences; judge each pruned model on ``report``.

    ``order`` is ``"gradient"`` (Michel et al.'s importance of :func:`self_retrieval_loss` on the selection
    sentences, least important pruned first), ``"random"`` (a permutation drawn with ``seed``), or an order of
    flat head indices given outright (e.g. one chosen on other sentences). ``counts`` (increasing, from 0) are the
    numbers of heads removed. Returns ``counts``, ``order`` (flat indices ``layer * heads + head``, pruned first
    first), ``full`` (n_report, d_model), ``pruned`` (points, n_report, d_model), ``similarity_kept`` (points,):
    :func:`similarity_fidelity` of each pruned model, and ``vector_kept`` (points,): the mean cosine of each
    sentence's pruned vector with its full one (chapter 4, "Redundancy and pruning"). With ``stop_below`` the
    counts are judged a few at a time and the curve stops after the first point whose fidelity is below it: every
    threshold above ``stop_below`` is then read exactly, at a fraction of the cost; ``counts`` in the result are the
    counts judged.
    """
    from mha.analysis.caveats.ablation import head_mask_gradients, michel_importance, pruning_masks

    encoder = check_encoder(encoder)
    selection = check_items_of("selection", selection, str, "a sentence to choose the order on, as text")
    report = check_items_of("report", report, str, "a sentence to judge the pruned models on, as text")
    if set(selection) & set(report):
        raise ValueError("selection and report share sentences; choose and judge on different sentences.")
    counts = check_whole_numbers("counts", counts, minimum=0, meaning="heads removed")
    if not counts or counts[0] != 0:
        raise ValueError("counts must start at 0 heads removed (the full model, the curve's reference).")
    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads
    if isinstance(order, str):
        if order == "gradient":
            full_selection, _ = embeddings_in_length_chunks(encoder, selection, chunk=chunk)
            reference = torch.as_tensor(full_selection)
            gradients = head_mask_gradients(encoder, encoder.tokenize(list(selection)),
                                            lambda vectors: self_retrieval_loss(vectors, reference))
            flat_order = np.argsort(michel_importance(gradients).ravel(), kind="stable")
        elif order == "random":
            flat_order = np.random.default_rng(seed).permutation(n_layers * n_heads)
        else:
            raise ValueError(f"order must be 'gradient', 'random' or a list of flat head indices, got {order!r}.")
    else:
        flat_order = np.asarray(order, dtype=int)
    step = len(counts) if stop_below is None else 3  # counts judged at a time
    full, _ = embeddings_in_length_chunks(encoder, report, chunk=chunk)
    pruned, judged = [full[None]], [0]
    for start in range(1, len(counts), step):
        batch = counts[start:start + step]
        masks = pruning_masks(flat_order, batch, n_layers, n_heads)  # (len(batch), layers, heads)
        pruned.append(embeddings_in_length_chunks(encoder, report, masks, chunk=chunk)[1])
        judged += batch
        if stop_below is not None and similarity_fidelity(pruned[-1], full).min() < stop_below:
            break
    pruned = np.concatenate(pruned)  # (points, n, d_model)
    return {"counts": np.array(judged), "order": flat_order, "full": full, "pruned": pruned,
            "similarity_kept": similarity_fidelity(pruned, full), "vector_kept": (pruned * full).sum(-1).mean(-1)}


def resampled_removable(counts: Sequence[int], pruned: npt.ArrayLike, full: npt.ArrayLike,
                        thresholds: Sequence[float], *, n_resamples: int = 200, seed: int = 0,
                        groups: Sequence | None = None) -> np.ndarray:
    """Heads removable at each threshold when the judged sentences are resampled: (n_resamples, thresholds).

    ``pruned`` (points, n, d_model) and ``full`` (n, d_model) as from :func:`fidelity_pruning_curve`. Each
    resample draws n sentences with replacement (:func:`mha.core.resampling.bootstrap_indices`), keeps the pairs of
    distinct sentences among the draws, and reads the fidelity curve at each threshold as
    :func:`mha.analysis.caveats.ablation.removable_at_thresholds` does. With ``groups`` (n labels, e.g. each
    sentence's document) the groups are the independent unit: each resample draws as many groups as there are, with
    replacement, and takes all the sentences of each group drawn.
    """
    from mha.analysis.caveats.ablation import removable_at_thresholds

    pruned = as_real_array("pruned", pruned, meaning="(points, sentences, d_model)")
    full = as_real_array("full", full, meaning="(sentences, d_model)")
    if pruned.ndim != 3 or pruned.shape[1:] != full.shape or pruned.shape[0] != len(counts):
        raise ValueError(f"pruned {pruned.shape} must be (len(counts), n, d_model) for full {full.shape}.")
    n = full.shape[0]
    if groups is None:
        members = [np.array([i]) for i in range(n)]
    else:
        groups = check_items("groups", groups, "one label per judged sentence (e.g. its document)")
        if len(groups) != n:
            raise ValueError(f"groups has {len(groups)} labels for {n} judged sentences; give one label per sentence.")
        labels = list(dict.fromkeys(groups))
        members = [np.flatnonzero([g == label for g in groups]) for label in labels]
    unit_pruned = pruned / np.linalg.norm(pruned, axis=-1, keepdims=True)
    unit_full = full / np.linalg.norm(full, axis=-1, keepdims=True)
    similarity, reference = unit_pruned @ np.swapaxes(unit_pruned, -1, -2), unit_full @ unit_full.T  # (points, n, n)
    removable = []
    for draw in bootstrap_indices(len(members), n_resamples, seed):
        sentences = np.concatenate([members[g] for g in draw])  # the sentences of the groups drawn
        rows, columns = np.triu_indices(len(sentences), k=1)
        left, right = sentences[rows], sentences[columns]
        distinct = left != right
        left, right = left[distinct], right[distinct]
        curve = _spearman_rows(similarity[:, left, right], reference[left, right])  # (points,)
        removable.append(removable_at_thresholds(counts, curve, thresholds)[0])
    return np.array(removable)  # (n_resamples, thresholds)


def treebank_document(origin: str) -> str:
    """The document a UD English-EWT sentence comes from, read off its origin: ``"file#<doc id>-0007"`` -> doc id.

    EWT numbers each document's sentences ``<doc id>-0001``, ``-0002`` ... (its ``# newdoc id`` lines name the same
    documents); :attr:`mha.corpora.treebank.AnnotatedSentence.origin` is ``"<file>#<sent_id>"`` (chapter 4.2).
    """
    if not isinstance(origin, str) or "#" not in origin:
        raise ValueError(f"origin {origin!r} is not a treebank sentence's origin '<file>#<sent_id>'; take it from "
                         "read_conllu(...)[i].origin.")
    sent_id = origin.split("#", 1)[1]
    document, _, number = sent_id.rpartition("-")
    if not document or not number.isdigit():
        raise ValueError(f"sentence id {sent_id!r} does not end in '-<number>' after its document id, as UD "
                         "English-EWT's ids do; this reading of documents is for that treebank.")
    return document


def document_split(documents: Sequence[str], n_selection: int, n_report: int, *,
                   seed: int = 0) -> tuple[list[int], list[int]]:
    """Consecutive sentences of whole documents: a selection run and a report run that share no document.

    ``documents`` holds each sentence's document, in corpus order (a document's sentences together). The corpus is
    cut, in its own order, into blocks of consecutive whole documents, each the shortest that holds at least
    ``max(n_selection, n_report)`` sentences (a short remainder joins the last block). The blocks are split in half
    at random by :func:`mha.corpora.treebank.split_sentences` (``seed``); the selection is the first
    ``n_selection`` sentences of the first block of one half, the report the first ``n_report`` of the other's.
    Neighbouring documents of a corpus tend to share a source and a genre (a blog, an email thread, reviews), so
    such a run holds related sentences next to unrelated ones. Returns positions into ``documents``: (selection,
    report) (chapter 4.2).
    """
    from mha.corpora.treebank import split_sentences

    documents = check_items("documents", documents, "each sentence's document (treebank_document of its origin)")
    n_selection = check_whole_number("n_selection", n_selection, minimum=2)
    n_report = check_whole_number("n_report", n_report, minimum=2)
    size = max(n_selection, n_report)
    blocks, block = [], []
    for position, name in enumerate(documents):
        if block and name != documents[position - 1] and len(block) >= size:
            blocks.append(block)  # a block ends at a document's end, once it holds enough sentences
            block = []
        block.append(position)
    if len(block) >= size or not blocks:
        blocks.append(block)
    else:
        blocks[-1] += block
    if len(blocks) < 2 or len(blocks[0]) < size:
        raise ValueError(f"{len(documents)} sentences make {len(blocks)} run(s) of at least {size} sentences; two "
                         "are needed. Ask for fewer sentences or give more documents.")
    selection, report = split_sentences(blocks, 0.5, seed=seed)
    return selection[0][:n_selection], report[0][:n_report]


def pruning_claim_verdict(removable: dict[str, npt.ArrayLike], lower: dict[str, npt.ArrayLike],
                          thresholds: Sequence[float], n_heads: int, *, share: float = 0.2,
                          loose: float = 0.85, strict: float = 0.95) -> tuple[str, str | None]:
    """The verdict on "many heads can be pruned with little loss", from the counts of several designs (4.2).

    ``removable[design]`` (splits, thresholds) holds the heads removable on each split before the fidelity first
    falls below each of ``thresholds``; ``lower[design]`` the same shape, the low end of each count's resampled
    interval. A design **clears** a threshold when every split's count and every low end there is at least
    ``share`` of the ``n_heads`` ("many": a fifth, the lower of the papers' figures). The claim **holds** when every
    design clears both ``loose`` and ``strict``; it **holds with a qualifier** when every design clears ``loose``
    only, the qualifier giving each design's range of counts there (the design's name as the key says it); it is
    **not shown** when some designs clear ``loose`` and others do not; it **fails on this model** when none does.
    Returns ``(verdict, qualifier)`` for :func:`mha.book.glue_verdict`.
    """
    thresholds = as_real_array("thresholds", thresholds, meaning="(thresholds,): fidelities, e.g. (0.85, 0.95)")
    check_rank("thresholds", thresholds.shape, (1,), "(thresholds,): fidelities, e.g. (0.85, 0.95)")
    thresholds = [float(t) for t in thresholds]
    loose = check_finite_number("loose", loose, meaning="one of thresholds")
    strict = check_finite_number("strict", strict, meaning="one of thresholds")
    if loose not in thresholds or strict not in thresholds:
        raise ValueError(f"thresholds {thresholds} must include loose={loose} and strict={strict}.")
    if not removable or set(removable) != set(lower):
        raise ValueError("removable and lower must name the same designs, at least one.")
    n_heads = check_whole_number("n_heads", n_heads, minimum=1)
    bar = share * n_heads
    tables = {}
    for design in removable:
        counts = np.atleast_2d(np.asarray(removable[design]))
        low = np.atleast_2d(np.asarray(lower[design]))
        if counts.shape != low.shape or counts.shape[1] != len(thresholds):
            raise ValueError(f"design {design!r}: removable {counts.shape} and lower {low.shape} must both be "
                             f"(splits, {len(thresholds)} thresholds).")
        tables[design] = counts, low

    def clears(design: str, threshold: float) -> bool:
        k = thresholds.index(threshold)
        counts, low = tables[design]
        return bool(min(counts[:, k].min(), low[:, k].min()) >= bar)

    loose_clear = [clears(design, loose) for design in tables]
    if all(loose_clear) and all(clears(design, strict) for design in tables):
        return "holds", None
    if all(loose_clear):
        k = thresholds.index(loose)
        ranges = [f"{tables[d][0][:, k].min()} to {tables[d][0][:, k].max()} {d}" for d in tables]
        ranges = ranges[0] if len(ranges) == 1 else ", ".join(ranges[:-1]) + " and " + ranges[-1]
        return "holds with a qualifier", (f"how many depends on the sentence pairs judged and the tolerance: of the "
                                          f"{n_heads} heads, {ranges} can go at a rank correlation of {loose:.2f}; "
                                          f"fewer than a fifth on some split at {strict:.2f}")
    if any(loose_clear):
        return "not shown", "only some designs of sentence pairs leave a fifth of the heads removable"
    return "fails on this model", None


PRUNING_TREEBANK_PATH = DATA_DIRECTORY / "pruning_treebank.json"
"""Pruning curves judged on UD English-EWT sentences, written by ``scripts/pruning_treebank.py`` (chapter 4)."""


def load_pruning_treebank(path: str | Path = PRUNING_TREEBANK_PATH) -> dict:
    """The stored curves of ``scripts/pruning_treebank.py``: ``counts``, ``thresholds``, and per design (``splits``:
    random pairs; ``document_splits``: consecutive sentences of whole documents) and split its orders.

    Read from ``path`` (default: the book's file), checked against ``data/SHA256SUMS`` and its shape checked: a
    missing, tampered or malformed file raises ``ValueError`` with the command that regenerates it (chapter 4).
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the pruning curves on treebank sentences"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.pruning_treebank", limit=10_000_000)
    counts = content.get("counts") if isinstance(content, dict) else None
    designs = [content.get(key) for key in ("splits", "document_splits")] if isinstance(content, dict) else [None]
    good = (isinstance(counts, list) and counts and all(type(c) is int and c >= 0 for c in counts)
            and all(isinstance(splits, list) and splits and all(isinstance(split, dict) for split in splits)
                    for splits in designs))
    if good:
        for split in (split for splits in designs for split in splits):
            orders = split.get("orders")
            good = good and isinstance(orders, dict) and bool(orders) and all(
                isinstance(curve, dict) and isinstance(curve.get("similarity_kept"), list)
                and 1 <= len(curve["similarity_kept"]) <= len(counts) for curve in orders.values())
    if not good:
        raise ValueError(f"{what} {path} are malformed: they need 'counts' (whole numbers of heads removed), "
                         f"'splits' and 'document_splits' (the two designs), each split with 'orders' whose "
                         f"'similarity_kept' has a value for each of the first counts. {how}")
    return content
