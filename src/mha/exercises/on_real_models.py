"""Checks for the exercises of chapters 3 and 4 that run on the real model or on real training runs.

Section 3.2 "Syntax: heads that follow grammatical relations": :func:`check_held_out_relation_head`.
Section 3.5 "Induction heads": :func:`check_phase_change_step`.
Section 4.2 "Redundancy and pruning": :func:`check_attention_without_head`.
Section 4.3 "Layer dependence": :func:`check_selection_inflation`.

Unlike the other checks, their cases are not synthetic: they come from all-MiniLM-L6-v2 on sentences of UD
English-EWT's dev split drawn with the check's ``seed`` (:func:`treebank_relation_hits`, :func:`treebank_trace`),
and from the held-out loss curves of the tiny induction models trained for section 3.5's phase-change spread
(``data/lab/induction_phase_spread.json``). Another ``seed`` draws other sentences, layers, relations, runs and
splits, which is what the autograder's hidden variants use. The learner's function still receives plain arrays and
numbers only, so it can be graded in a process that cannot import the package
(:mod:`mha.exercises.sandbox`). The expected answers come from the package (:mod:`mha.analysis.head_roles.relations`,
:func:`mha.lab.training.steepest_drop`) or from the model itself (its attention block run with a head mask).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache

import numpy as np
import torch

from mha.analysis.head_roles.relations import RelationHits, relation_hits
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
from mha.lab.checkpoints import load_json
from mha.lab.training import TrainingLog, steepest_drop
from mha.pretrained.corpus_encoding import encode_records
from mha.pretrained.encoder import MiniLMEncoder

from .checking import CheckResult, answer_number, answer_tuple, compare_array, compare_number, run_check

__all__ = [
    "check_held_out_relation_head",
    "check_phase_change_step",
    "check_attention_without_head",
    "check_selection_inflation",
    "treebank_relation_hits",
    "treebank_trace",
]

CASE_SENTENCES = 40  # treebank sentences per seed: enough pairs for every common relation, quick to encode
RELATIONS = ("det_noun", "adj_noun", "subj_verb", "obj_verb", "obj_prep", "aux_verb")  # each with >= 10 pairs


# --- real cases ---------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _treebank_sentences() -> tuple:
    return tuple(s for s in read_conllu(EWT_DEV_PATH) if 8 <= len(s.words) <= 25)


def _drawn_sentences(seed: int, count: int) -> list:
    sentences = _treebank_sentences()
    return [sentences[i] for i in np.random.default_rng(seed).choice(len(sentences), count, replace=False)]


@lru_cache(maxsize=4)
def treebank_relation_hits(seed: int = 0) -> RelationHits:
    """all-MiniLM-L6-v2's relation hits (:func:`~mha.analysis.head_roles.relations.relation_hits`, row mode) on
    :data:`CASE_SENTENCES` EWT dev sentences of 8 to 25 words drawn with ``seed``: hits (40, relations, 6, 12)."""
    return relation_hits(encode_records(MiniLMEncoder.load(), _drawn_sentences(seed, CASE_SENTENCES)))


@lru_cache(maxsize=4)
def treebank_trace(seed: int = 0):
    """The encoder and its trace of one EWT dev sentence drawn with ``seed`` (a batch of one, so no padding)."""
    encoder = MiniLMEncoder.load()
    sentence = _drawn_sentences(10_000 + seed, 1)[0]
    return encoder, encoder.trace([sentence.text])


def _pooled_best(hits: np.ndarray, pairs: np.ndarray, items: np.ndarray) -> tuple[int, float]:
    """The flat head with the highest pooled accuracy over ``items`` (first on ties), and that accuracy."""
    accuracy = hits[items].sum(axis=0).ravel() / pairs[items].sum()  # (layers * heads,)
    best = int(np.argmax(accuracy))
    return best, float(accuracy[best])


# --- 3.2: a relation head, chosen on some sentences and reported on others -----------------------

def check_held_out_relation_head(held_out_relation_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(hits (sentences, layers, heads), pairs (sentences,), selection, held_out) -> (layer, head, selection
    accuracy, held-out accuracy)``, on the real model's hits for one relation on treebank sentences (3.2)."""
    rng = np.random.default_rng(seed)
    counts = treebank_relation_hits(seed)
    n = len(counts)

    def cases() -> Iterator:
        for case, relation in enumerate(rng.choice(RELATIONS, size=4, replace=False)):
            r = counts.relations.index(str(relation))
            hits, pairs = counts.hits[:, r], counts.pairs[:, r]  # (sentences, layers, heads), (sentences,)
            order = rng.permutation(n)
            cut = (n // 2, 3 * n // 8, 5 * n // 8, n // 2)[case]  # halves of different sizes
            selection, held_out = np.sort(order[:cut]), np.sort(order[cut:])
            label = (f"the model's {relation} hits on {n} treebank sentences, {len(selection)} to choose on, "
                     f"{len(held_out)} held out")
            yield label, (hits.copy(), pairs.copy(), selection.copy(), held_out.copy()), {}, \
                (hits, pairs, selection, held_out)

    def compare(got, case) -> str | None:
        hits, pairs, selection, held_out = case
        n_heads = hits.shape[2]
        layer, head, chosen_acc, held_acc = answer_tuple(
            got, ["layer", "head", "selection_accuracy", "held_out_accuracy"], "a tuple of four")
        layer = answer_number(layer, "the layer", whole=True)
        head = answer_number(head, "the head", whole=True)
        best, best_acc = _pooled_best(hits, pairs, selection)
        if (layer, head) != divmod(best, n_heads):
            per_sentence = np.where(pairs[selection, None, None] > 0,
                                    hits[selection] / np.maximum(pairs[selection], 1)[:, None, None], np.nan)
            slips = {
                divmod(_pooled_best(hits, pairs, held_out)[0], n_heads):
                    "That head is the best on the HELD-OUT sentences: choose using the selection sentences only.",
                divmod(_pooled_best(hits, pairs, np.arange(len(pairs)))[0], n_heads):
                    "That head is the best over ALL sentences: the choice may look at the selection sentences only.",
                divmod(int(np.nanargmax(np.nanmean(per_sentence, axis=0).ravel())), n_heads):
                    "That head has the best mean of per-sentence accuracies; pool instead: all hits over all pairs, "
                    "so a sentence with many pairs counts for more.",
            }
            hint = slips.get((layer, head), "")
            want = divmod(best, n_heads)
            return f"you chose layer {layer}, head {head}; the selection sentences choose layer {want[0]}, " \
                   f"head {want[1]}. {hint}".rstrip()
        held = float(hits[held_out].sum(axis=0)[layer, head] / pairs[held_out].sum())
        problem = compare_number(chosen_acc, best_acc, {}, "the selection accuracy")
        if problem:
            return problem
        return compare_number(held_acc, held, {
            "selection": (best_acc, "That is its accuracy where it was chosen; score the same head on held_out."),
            "best held out": (_pooled_best(hits, pairs, held_out)[1],
                              "That is the best held-out accuracy of any head; report the CHOSEN head's."),
        }, "the held-out accuracy")

    return run_check(held_out_relation_head, cases(), compare,
                     "chooses a head on some sentences and reports it on others")


# --- 3.5: where the phase change happens ---------------------------------------------------------

@lru_cache(maxsize=1)
def _spread_curves() -> tuple:
    """(d_model, learning rate, seed, steps, held-out repeat losses) of each run of section 3.5's spread."""
    study = load_json("induction_phase_spread.json")
    return tuple((run["d_model"], run["learning_rate"], run["seed"], [row["step"] for row in run["head_scores"]],
                  [row["repeat_loss"] for row in run["head_scores"]]) for run in study["runs"])


def check_phase_change_step(phase_change_step: Callable, seed: int = 0) -> CheckResult:
    """``fn(steps (n,) ints, losses (n,) floats, window_steps int) -> int``: the logged step midway through the
    ``window_steps`` of training where the loss falls most, on real training runs (3.5)."""
    rng = np.random.default_rng(seed)
    curves = _spread_curves()

    def cases() -> Iterator:
        for index, window in zip(rng.choice(len(curves), size=4, replace=False), (200, 400, 200, 600)):
            d_model, rate, run_seed, steps, losses = curves[index]
            label = (f"the held-out repeat loss of a run with d_model {d_model}, learning rate {rate:g}, seed "
                     f"{run_seed} ({len(steps)} rows, every {steps[1] - steps[0]} steps), window {window}")
            yield label, (list(steps), list(losses), window), {}, (steps, losses, window)

    def compare(got, case) -> str | None:
        steps, losses, window = case

        def steepest(values, window_steps) -> int:
            rows = [{"step": s, "repeat_loss": v} for s, v in zip(steps, values)]
            return int(steepest_drop(TrainingLog(rows=rows), "repeat_loss", window_steps=window_steps)["step"])

        want = steepest(losses, window)
        at, half = steps.index(want), window // (steps[1] - steps[0]) // 2
        slips = {
            "start": (steps[max(at - half, 0)], "That is where the steepest window STARTS; return its middle."),
            "end": (steps[min(at + half, len(steps) - 1)], "That is where the steepest window ENDS; return "
                    "its middle."),
            "index": (at, "That is the row's position in the list; return its step."),
            "neighbours": (steepest(losses, steps[1] - steps[0]), "That compares neighbouring rows only; compare "
                           "rows window_steps apart, so one noisy evaluation is not taken for the phase change."),
            "rise": (steepest([-v for v in losses], window), "That is where the loss RISES most: a fall is the "
                     "loss at the window's start minus the loss at its end."),
        }
        return compare_number(got, want, {name: slip for name, slip in slips.items() if slip[0] != want}, "the step")

    return run_check(phase_change_step, cases(), compare, "finds the phase change on real training runs")


# --- 4.2: one head removed by hand ---------------------------------------------------------------

def check_attention_without_head(attention_without_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(head_outputs (heads, seq, d_head), W_O (d_model, d_model), b_O (d_model,), head int) -> (seq, d_model)``:
    a real attention layer's output with one head removed, against the model run with that head masked (4.2)."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        encoder, trace = treebank_trace(seed)
        for _ in range(4):
            layer, head = int(rng.integers(encoder.config.n_layers)), int(rng.integers(encoder.config.n_heads))
            attention = encoder.layers[layer].attention
            x = trace.hidden_states[layer]  # (1, seq, d_model): the layer's input
            with torch.no_grad():
                mask = torch.ones(encoder.config.n_heads)
                mask[head] = 0.0
                want = attention(x, head_mask=mask).output[0].numpy()  # (seq, d_model)
                z = trace.head_outputs[layer, 0].numpy()  # (heads, seq, d_head)
            W_O, b_O = attention.W_O.detach().numpy(), attention.b_O.detach().numpy()
            label = f"layer {layer} of the model on a treebank sentence of {z.shape[1]} tokens, head {head} removed"
            yield label, (z.copy(), W_O.copy(), b_O.copy(), head), {}, (want, z, W_O, b_O, head)

    def compare(got, case) -> str | None:
        want, z, W_O, b_O, head = case
        heads, seq, d_head = z.shape
        merged = z.transpose(1, 0, 2).reshape(seq, heads * d_head)  # (seq, d_model)
        rows = slice(head * d_head, (head + 1) * d_head)
        kept_only = np.zeros_like(merged)
        kept_only[:, rows] = merged[:, rows]
        columns_zeroed = W_O.copy()
        columns_zeroed[:, rows] = 0.0
        slips = {
            "no bias": (want - b_O, "Add the bias b_O: the layer adds it whichever heads are kept."),
            "full": (merged @ W_O + b_O, "That is the output with every head kept; set the head's z to 0 first."),
            "kept only": (kept_only @ W_O + b_O, "That keeps ONLY that head; remove it and keep the others."),
            "columns": (merged @ columns_zeroed + b_O, "You zeroed columns of W_O, which are output features; the "
                        "head is read by the ROWS head * d_head to (head + 1) * d_head."),
        }
        scrambled = z.reshape(seq, heads * d_head).copy()  # the heads axis not moved first
        scrambled[:, rows] = 0.0
        slips["reshape"] = (scrambled @ W_O + b_O, "You reshaped (heads, seq, d_head) to (seq, heads * d_head) "
                            "without moving the heads axis: transpose to (seq, heads, d_head) first.")
        return compare_array(got, want, slips, "the attention output", atol=2e-4)

    return run_check(attention_without_head, cases(), compare, "removes one head from a real attention layer")


# --- 4.3: how much choosing the best head inflates its score --------------------------------------

def check_selection_inflation(selection_inflation: Callable, seed: int = 0) -> CheckResult:
    """``fn(scores (items, heads), splits (n_splits, items) bool) -> (n_splits,)``: for each split, the chosen
    head's mean on the choosing items (True) minus its mean on the others, on the real model's per-sentence
    accuracies (4.3)."""
    rng = np.random.default_rng(seed)
    counts = treebank_relation_hits(seed)

    def cases() -> Iterator:
        for relation, n_splits in zip(rng.choice(RELATIONS, size=4, replace=False), (3, 8, 20, 50)):
            r = counts.relations.index(str(relation))
            some = counts.pairs[:, r] > 0
            scores = counts.hits[some, r].reshape(int(some.sum()), -1) / counts.pairs[some, r][:, None]  # (items, 72)
            splits = np.zeros((n_splits, len(scores)), dtype=bool)
            for row in splits:
                row[rng.permutation(len(scores))[:len(scores) // 2]] = True
            label = f"per-sentence {relation} accuracies of the model's 72 heads on {len(scores)} sentences, " \
                    f"{n_splits} random splits"
            yield label, (scores.copy(), splits.copy()), {}, (scores, splits)

    def compare(got, case) -> str | None:
        scores, splits = case
        chosen_means = np.array([scores[split].mean(axis=0) for split in splits])  # (n_splits, heads)
        other_means = np.array([scores[~split].mean(axis=0) for split in splits])
        best = chosen_means.argmax(axis=1)
        rows = np.arange(len(splits))
        want = chosen_means[rows, best] - other_means[rows, best]
        slips = {
            "sign": (-want, "The sign is reversed: the chosen items' mean minus the others', so "
                     "inflation is positive."),
            "best elsewhere": (chosen_means[rows, best] - other_means.max(axis=1),
                               "You subtracted the best head on the OTHER items; follow the chosen head there."),
            "all items": (chosen_means[rows, best] - scores.mean(axis=0)[best],
                          "You compared with the head's mean over all items; compare with the items not chosen on."),
        }
        return compare_array(got, want, slips, "the inflation")

    return run_check(selection_inflation, cases(), compare, "measures how much choosing inflates a score")
