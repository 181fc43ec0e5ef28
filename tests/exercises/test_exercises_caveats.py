"""Every check of chapter 4 ("Caveats") passes the solution and fails, with a useful message, on the mistakes
learners really make."""

import numpy as np
import pytest
from scipy.stats import rankdata
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha.exercises.caveats import (
    check_attention_rollout,
    check_heads_removable,
    check_michel_importance,
    check_norm_based_attention,
    check_patched_change,
    check_rank_correlation,
    check_ranking_accuracy,
    check_sentence_embedding,
    check_similarity_without_head,
)
from mha.pretrained.sentence_embedding import sentence_embeddings


def not_attempted(*args, **kwargs):
    raise NotImplementedError


# --- norm-based attention -------------------------------------------------------------------------

def norm_attention_solution(attention, values, W_O):
    norms = np.linalg.norm(values @ W_O, axis=-1)           # (heads, n)
    weighted = attention * norms[:, None, :]
    return weighted / weighted.sum(-1, keepdims=True)


def norm_attention_unnormalised(attention, values, W_O):
    return attention * np.linalg.norm(values @ W_O, axis=-1)[:, None, :]


def norm_attention_value_norms(attention, values, W_O):
    weighted = attention * np.linalg.norm(values, axis=-1)[:, None, :]
    return weighted / weighted.sum(-1, keepdims=True)


def norm_attention_rows(attention, values, W_O):
    weighted = attention * np.linalg.norm(values @ W_O, axis=-1)[:, :, None]
    return weighted / weighted.sum(-1, keepdims=True)


def test_norm_based_attention():
    assert check_norm_based_attention(norm_attention_solution)
    for wrong, words in ((norm_attention_unnormalised, "rows sum to 1"), (norm_attention_value_norms, "W_O"),
                         (norm_attention_rows, "KEY"), (not_attempted, "Not attempted")):
        result = check_norm_based_attention(wrong)
        assert not result and words in result.message, result.message


# --- rollout --------------------------------------------------------------------------------------

def rollout_solution(attention, residual_weight=0.5):
    n = attention.shape[-1]
    rollout, layers = np.eye(n), []
    for layer_map in attention.mean(axis=1):
        rollout = ((1 - residual_weight) * layer_map + residual_weight * np.eye(n)) @ rollout
        layers.append(rollout)
    return np.stack(layers)


def rollout_no_residual(attention, residual_weight=0.5):
    return rollout_solution(attention, 0.0)


def rollout_reversed(attention, residual_weight=0.5):
    n = attention.shape[-1]
    rollout, layers = np.eye(n), []
    for layer_map in attention.mean(axis=1):
        rollout = rollout @ ((1 - residual_weight) * layer_map + residual_weight * np.eye(n))
        layers.append(rollout)
    return np.stack(layers)


def test_attention_rollout():
    assert check_attention_rollout(rollout_solution)
    for wrong, words in ((rollout_no_residual, "residual"), (rollout_reversed, "wrong order")):
        result = check_attention_rollout(wrong)
        assert not result and words in result.message, result.message


# --- rank correlation -----------------------------------------------------------------------------

def spearman_solution(a, b):
    return float(np.corrcoef(rankdata(a), rankdata(b))[0, 1])


def spearman_pearson(a, b):
    return float(np.corrcoef(a, b)[0, 1])


def spearman_ordinal(a, b):
    rank = lambda x: np.argsort(np.argsort(x, kind="stable"), kind="stable")  # noqa: E731
    return float(np.corrcoef(rank(a), rank(b))[0, 1])


def test_rank_correlation():
    assert check_rank_correlation(spearman_solution)
    for wrong, words in ((spearman_pearson, "RANKS"), (spearman_ordinal, "average")):
        result = check_rank_correlation(wrong)
        assert not result and words in result.message, result.message


# --- sentence embedding ---------------------------------------------------------------------------

def embedding_solution(hidden_states, real_tokens):
    pooled = (hidden_states * real_tokens[..., None]).sum(1) / real_tokens.sum(1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


def embedding_not_normalised(hidden_states, real_tokens):
    return (hidden_states * real_tokens[..., None]).sum(1) / real_tokens.sum(1, keepdims=True)


def embedding_with_padding(hidden_states, real_tokens):
    pooled = hidden_states.mean(1)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


def embedding_without_specials(hidden_states, real_tokens):
    inner = real_tokens.copy()
    for row, length in enumerate(real_tokens.sum(1)):
        inner[row, [0, length - 1]] = False
    return embedding_solution(hidden_states, inner)


def test_sentence_embedding():
    assert check_sentence_embedding(embedding_solution)
    for wrong, words in ((embedding_not_normalised, "length 1"), (embedding_with_padding, "padding"),
                         (embedding_without_specials, "[CLS] and [SEP]"), (not_attempted, "Not attempted")):
        result = check_sentence_embedding(wrong)
        assert not result and words in result.message, result.message


# --- ranking accuracy -----------------------------------------------------------------------------

def ranking_solution(similarity):
    n = similarity.shape[0]
    right = similarity[np.arange(n), np.arange(n)][:, None]
    wins = (right > similarity).sum(1) + 0.5 * ((right == similarity).sum(1) - 1)
    return float((wins / (2 * n - 1)).mean())


def ranking_over_2n(similarity):
    n = similarity.shape[0]
    right = similarity[np.arange(n), np.arange(n)][:, None]
    wins = (right > similarity).sum(1) + 0.5 * ((right == similarity).sum(1) - 1)
    return float((wins / (2 * n)).mean())


def ranking_ties_lose(similarity):
    n = similarity.shape[0]
    right = similarity[np.arange(n), np.arange(n)][:, None]
    return float(((right > similarity).sum(1) / (2 * n - 1)).mean())


def test_ranking_accuracy():
    assert check_ranking_accuracy(ranking_solution)
    for wrong, words in ((ranking_over_2n, "2n - 1"), (ranking_ties_lose, "one half")):
        result = check_ranking_accuracy(wrong)
        assert not result and words in result.message, result.message


# --- Michel importance ----------------------------------------------------------------------------

def importance_solution(gradients):
    importance = np.abs(gradients).mean(0)
    return importance / np.linalg.norm(importance, axis=1, keepdims=True)


def importance_not_normalised(gradients):
    return np.abs(gradients).mean(0)


def importance_abs_of_mean(gradients):
    importance = np.abs(gradients.mean(0))
    return importance / np.linalg.norm(importance, axis=1, keepdims=True)


def importance_global_norm(gradients):
    importance = np.abs(gradients).mean(0)
    return importance / np.linalg.norm(importance)


def test_michel_importance():
    assert check_michel_importance(importance_solution)
    for wrong, words in ((importance_not_normalised, "each LAYER"), (importance_abs_of_mean, "cancel"),
                         (importance_global_norm, "within each layer")):
        result = check_michel_importance(wrong)
        assert not result and words in result.message, result.message


# --- heads removable ------------------------------------------------------------------------------

def removable_solution(counts, quality, reference, max_drop):
    removable = counts[0]
    for count, value in zip(counts, quality, strict=True):
        if value < reference - max_drop:
            break
        removable = count
    return removable


def removable_anywhere(counts, quality, reference, max_drop):
    return max(c for c, q in zip(counts, quality, strict=True) if q >= reference - max_drop)


def removable_strict(counts, quality, reference, max_drop):
    removable = counts[0]
    for count, value in zip(counts, quality, strict=True):
        if value <= reference - max_drop:
            break
        removable = count
    return removable


def removable_first_bad(counts, quality, reference, max_drop):
    for count, value in zip(counts, quality, strict=True):
        if value < reference - max_drop:
            return count
    return counts[-1]


def test_heads_removable():
    assert check_heads_removable(removable_solution)
    for wrong, words in ((removable_anywhere, "FIRST point"), (removable_strict, "exactly max_drop"),
                         (removable_first_bad, "One step too far"), (not_attempted, "Not attempted")):
        result = check_heads_removable(wrong)
        assert not result and words in result.message, result.message
    assert not check_heads_removable(removable_solution(list(range(3)), [1, 1, 1], 1.0, 0.1))


# --- named slips, on the public case and hidden seeds ------------------------------------------------

def spearman_shortcut_formula(a, b):
    n, d = len(a), rankdata(a) - rankdata(b)
    return float(1 - 6 * (d ** 2).sum() / (n * (n * n - 1)))


def test_the_shortcut_formula_is_named_on_hidden_seeds_too():
    assert_slip_named(check_rank_correlation, spearman_shortcut_formula, ["Case 3", "shortcut 1 - 6 Σd²"],
                      seeds=(0, 1, 2))


def test_the_rank_correlation_key_passes_on_several_seeds_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_rank_correlation, spearman_solution)


# --- 4.2 on the model: the learner's function removes a head and measures ---------------------------

def _vectors(encoder, sentences, **options):
    from mha.pretrained.sentence_embedding import embed

    return embed(encoder, list(sentences), **options)


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def similarity_without_head(encoder, sentence_a, sentence_b, layer, head):
    a, b = _vectors(encoder, [sentence_a, sentence_b], head_mask=encoder.head_mask([(layer, head)]))
    return _cosine(a, b)


def similarity_full_model(encoder, sentence_a, sentence_b, layer, head):
    return _cosine(*_vectors(encoder, [sentence_a, sentence_b]))


def similarity_without_layer(encoder, sentence_a, sentence_b, layer, head):
    mask = encoder.head_mask([(layer, h) for h in range(12)])
    return _cosine(*_vectors(encoder, [sentence_a, sentence_b], head_mask=mask))


def similarity_uniform_head(encoder, sentence_a, sentence_b, layer, head):
    override = encoder.uniform_attention([(layer, head)])
    return _cosine(*_vectors(encoder, [sentence_a, sentence_b], attention_override=override))


def _last_layer(encoder, sentence, layer, head):
    return encoder.trace(sentence, head_mask=encoder.head_mask([(layer, head)])).hidden_states[-1][0].numpy()


def similarity_dot_product(encoder, sentence_a, sentence_b, layer, head):
    a, b = (_last_layer(encoder, s, layer, head).mean(axis=0) for s in (sentence_a, sentence_b))
    return float(a @ b)


def similarity_of_cls(encoder, sentence_a, sentence_b, layer, head):
    return _cosine(*(_last_layer(encoder, s, layer, head)[0] for s in (sentence_a, sentence_b)))


def test_the_similarity_key_passes_on_several_seeds_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_similarity_without_head, similarity_without_head, seeds=(0, 1, 2, 3))


def test_similarity_without_head_names_each_slip():
    for wrong, words in ((similarity_full_model, ["full model"]),
                         (similarity_without_layer, ["every head of the layer"]),
                         (similarity_uniform_head, ["uniform attention"]), (similarity_dot_product, ["cosine"]),
                         (similarity_of_cls, ["[CLS]"])):
        assert_slip_named(check_similarity_without_head, wrong, words)


# --- patching one head between a minimal pair (4.1), the learner's own runs of the model ------------------

def _patched_vectors(encoder, clean, corrupt, layer, heads):
    """The sentence vectors of the clean run, the corrupt run, and the clean run with ``heads`` of ``layer`` taken
    from the corrupt run."""
    clean_run, corrupt_run = encoder.trace(clean), encoder.trace(corrupt)

    def patch(at_layer, z):  # z: (batch, heads, seq, d_head)
        if at_layer == layer:
            z = z.clone()
            z[:, heads] = corrupt_run.head_outputs[layer][:, heads]
        return z

    final = encoder.run_from_layer(clean_run.hidden_states[layer], layer, head_outputs_override=patch)
    return [sentence_embeddings(states, clean_run.real_tokens)[0]
            for states in (clean_run.hidden_states[-1], corrupt_run.hidden_states[-1], final)]


def _share(vectors):
    e_clean, e_corrupt, e_patched = vectors

    def readout(x):
        return float(x @ e_clean - x @ e_corrupt)

    return (readout(e_clean) - readout(e_patched)) / (readout(e_clean) - readout(e_corrupt))


def patched_change(encoder, clean, corrupt, layer, head):
    return _share(_patched_vectors(encoder, clean, corrupt, layer, [head]))


def patched_the_wrong_way(encoder, clean, corrupt, layer, head):
    return _share(_patched_vectors(encoder, corrupt, clean, layer, [head]))


def patched_the_whole_layer(encoder, clean, corrupt, layer, head):
    return _share(_patched_vectors(encoder, clean, corrupt, layer, list(range(12))))


def patched_cosine_change(encoder, clean, corrupt, layer, head):
    e_clean, _, e_patched = _patched_vectors(encoder, clean, corrupt, layer, [head])
    return float(1 - e_patched @ e_clean)


@pytest.mark.slow
def test_the_patched_change_key_passes_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_patched_change, patched_change, seeds=(0, 1, 2))


@pytest.mark.slow
@pytest.mark.parametrize("wrong, words", [
    (patched_the_wrong_way, ["patches the wrong way"]),
    (patched_the_whole_layer, ["patches the whole layer"]),
    (patched_cosine_change, ["1 - cos(e_patched, e_clean)"]),
])
def test_patched_change_slips(wrong, words):
    assert_slip_named(check_patched_change, wrong, words, seeds=(0, 1))
