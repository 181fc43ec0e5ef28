"""The chapter-3 emergence exercise checks pass the solutions and fail, with a useful message, on typical slips."""

import functools

import numpy as np
import pytest
import torch
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha.exercises import emergence
from mha.exercises.emergence import (
    check_heads_with_role,
    check_induction_scores,
    check_k_composition,
    check_permute_heads,
    check_prefix_matching_score,
    check_previous_token_score,
    check_trained_previous_token_head,
    check_uniform_previous_token_score,
)
from mha.lab.checkpoints import load_checkpoint
from mha.lab.induction import FAST_INDUCTION_MODEL, FAST_LEARNING_RATE, train_fast_model
from mha.lab.tasks import InductionTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, train

# --- solutions, written the way a learner would ---------------------------------------------------

def previous_token_score(weights):
    below = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1)  # (batch, heads, seq - 1): weights[i, i-1]
    return below.mean(axis=(0, 2))


def prefix_matching_score(weights, tokens):
    seq = len(tokens)
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(seq):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys].sum(axis=-1)
            count += 1
    return totals / count


def k_composition(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = W_Q @ W_K.T, W_V @ W_O
    return np.linalg.norm(W_QK @ W_OV.T) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))


def heads_with_role(scores, threshold):
    return [(layer, head) for layer in range(scores.shape[0]) for head in range(scores.shape[1])
            if scores[layer, head] > threshold]


def permute_heads(W_Q, W_K, W_V, W_O, order):
    d_head = W_Q.shape[1] // len(order)
    columns = [old * d_head + f for old in order for f in range(d_head)]
    return W_Q[:, columns], W_K[:, columns], W_V[:, columns], W_O[columns, :]


def uniform_previous_token_score(seq):
    return float(np.mean([1 / (i + 1) for i in range(1, seq)]))


# --- every check passes its solution -------------------------------------------------------------

@pytest.mark.parametrize("check, solution", [
    (check_previous_token_score, previous_token_score),
    (check_prefix_matching_score, prefix_matching_score),
    (check_k_composition, k_composition),
    (check_heads_with_role, heads_with_role),
    (check_permute_heads, permute_heads),
    (check_uniform_previous_token_score, uniform_previous_token_score),
])
def test_check_passes_the_solution(check, solution):
    result = check(solution)
    assert result.passed, result.message
    assert result.message.startswith("✓")


def test_numpy_argwhere_answer_passes():
    assert check_heads_with_role(lambda scores, threshold: np.argwhere(scores > threshold)).passed


@pytest.mark.parametrize("check", [check_previous_token_score, check_prefix_matching_score, check_k_composition,
                                   check_heads_with_role, check_permute_heads, check_uniform_previous_token_score])
def test_the_stub_is_reported_as_not_attempted(check):
    def stub(*args):
        raise NotImplementedError

    result = check(stub)
    assert not result.passed and "Not attempted yet" in result.message


# --- typical wrong answers fail with a message that names the slip -------------------------------------

@pytest.mark.parametrize("wrong, words", [
    (lambda w: np.diagonal(w, offset=1, axis1=-2, axis2=-1).mean(axis=(0, 2)), "rows and columns swapped"),
    (lambda w: np.diagonal(w, axis1=-2, axis2=-1)[..., 1:].mean(axis=(0, 2)), "main diagonal"),
    (lambda w: np.diagonal(w, offset=-1, axis1=-2, axis2=-1).sum(axis=-1).mean(axis=0) / w.shape[-1], "seq - 1 rows"),
    (lambda w: np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(axis=-1), "has shape"),
])
def test_previous_token_score_slips(wrong, words):
    result = check_previous_token_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


def duplicate_token_score(weights, tokens):
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(len(tokens)):
        keys = [j for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys].sum(axis=-1)
            count += 1
    return totals / count


def prefix_matching_over_all_queries(weights, tokens):
    totals = np.zeros(weights.shape[0])
    for i in range(len(tokens)):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        totals += weights[:, i, keys].sum(axis=-1)
    return totals / len(tokens)


def prefix_matching_most_recent_copy_only(weights, tokens):
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(len(tokens)):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys[-1]]
            count += 1
    return totals / count


@pytest.mark.parametrize("wrong, words", [
    (duplicate_token_score, "FOLLOWED"),
    (prefix_matching_over_all_queries, "only over the queries"),
    (prefix_matching_most_recent_copy_only, "Case 2"),
])
def test_prefix_matching_slips(wrong, words):
    result = check_prefix_matching_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda Q, K, V, O: np.linalg.norm((Q @ K.T) @ (V @ O)) / (np.linalg.norm(Q @ K.T) * np.linalg.norm(V @ O)),
     "vectors as COLUMNS"),
    (lambda Q, K, V, O: np.linalg.norm((V @ O) @ (Q @ K.T)) / (np.linalg.norm(Q @ K.T) * np.linalg.norm(V @ O)),
     "Q-composition"),
    (lambda Q, K, V, O: np.linalg.norm((Q @ K.T) @ (V @ O).T), "divide by"),
    (lambda Q, K, V, O: np.array([1.0, 2.0]), "one number"),
])
def test_k_composition_slips(wrong, words):
    result = check_k_composition(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda s, t: [tuple(np.unravel_index(np.argmax(s), s.shape))], "Several heads can share a role"),
    (lambda s, t: [(int(l), int(h)) for l, h in np.argwhere(s >= t)], "not ABOVE"),
    (lambda s, t: [int(i) for i in np.flatnonzero(s > t)], "flat index"),
    (lambda s, t: [(0, 3)], "not by index"),  # the index, not the score: fails once the heads are reordered
])
def test_heads_with_role_slips(wrong, words):
    result = check_heads_with_role(wrong)
    assert not result.passed
    assert words in result.message, result.message


def permute_wo_columns(W_Q, W_K, W_V, W_O, order):
    d_head = W_Q.shape[1] // len(order)
    columns = [old * d_head + f for old in order for f in range(d_head)]
    return W_Q[:, columns], W_K[:, columns], W_V[:, columns], W_O[:, columns]


def permute_inverse(W_Q, W_K, W_V, W_O, order):
    return permute_heads(W_Q, W_K, W_V, W_O, list(np.argsort(order)))


def permute_forgetting_w_v(W_Q, W_K, W_V, W_O, order):
    Q, K, _, O = permute_heads(W_Q, W_K, W_V, W_O, order)
    return Q, K, W_V, O


@pytest.mark.parametrize("wrong, words", [
    (permute_wo_columns, "COLUMNS of W_O"),
    (permute_inverse, "inverse order"),
    (permute_forgetting_w_v, "W_V is unchanged"),
    (lambda *args: args[0], "as a tuple"),
])
def test_permute_heads_slips(wrong, words):
    result = check_permute_heads(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda seq: 1 / seq, "later ones included"),
    (lambda seq: float(np.mean([1 / i for i in range(1, seq)])), "not 1 / i"),
    (lambda seq: sum(1 / (i + 1) for i in range(1, seq)) / seq, "seq - 1 queries"),
])
def test_uniform_previous_token_slips(wrong, words):
    result = check_uniform_previous_token_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


def test_a_function_that_raises_is_reported_with_the_case():
    result = check_prefix_matching_score(lambda weights, tokens: weights[5])
    assert not result.passed and "raised IndexError on case 1" in result.message


# --- named slips, on the public case and hidden seeds ------------------------------------------------

def test_the_most_recent_copy_only_is_named_on_hidden_seeds_too():
    assert_slip_named(check_prefix_matching_score, prefix_matching_most_recent_copy_only,
                      ["Case 2", "MOST RECENT earlier copy"], seeds=(0, 1, 3))


def test_the_prefix_matching_key_passes_on_several_seeds_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_prefix_matching_score, prefix_matching_score)


# --- a head found on a model the learner trains (3.5) or loads ---------------------------------------

_trained = functools.lru_cache(maxsize=None)(train_fast_model)  # each seed trained once, for the check and the keys


@pytest.fixture
def one_training_per_seed(monkeypatch):
    """The check's reference and the keys below share one training per seed (a few seconds each)."""
    monkeypatch.setattr(emergence, "train_fast_model", _trained)


def _diagonal_scores(seed, steps, offset):
    model = _trained(seed, steps)  # trained outside no_grad
    with torch.no_grad():
        weights = model(InductionTask().sample(128, seed).inputs).attention_weights
    return weights.diagonal(offset=offset, dim1=-2, dim2=-1).mean(dim=(1, 3))  # (layers, heads)


def trained_previous_token_head(seed, steps):
    scores = _diagonal_scores(seed, steps, -1)
    return divmod(int(scores.argmax()), scores.shape[1])


def trained_own_token_head(seed, steps):
    scores = _diagonal_scores(seed, steps, 0)
    return divmod(int(scores.argmax()), scores.shape[1])


def trained_layer_1_only(seed, steps):
    return 1, int(_diagonal_scores(seed, steps, -1)[1].argmax())


def trained_head_then_layer(seed, steps):
    return tuple(reversed(trained_previous_token_head(seed, steps)))


def test_the_exercise_s_training_recipe_is_the_check_s_reference():
    task, seed, steps = InductionTask(), 3, 15
    model = TinyTransformer(TinyTransformerConfig(vocab_size=task.vocab_size, max_seq_len=task.seq_len,
                                                  **FAST_INDUCTION_MODEL), seed=seed)
    train(model, task, TrainingConfig(steps=steps, learning_rate=FAST_LEARNING_RATE, seed=seed, log_every=steps),
          progress=False)
    reference = train_fast_model(seed, steps).state_dict()
    assert all(torch.equal(value, reference[name]) for name, value in model.state_dict().items())


@pytest.mark.slow
def test_the_trained_previous_token_head_key_passes_and_a_stub_is_not_attempted(one_training_per_seed):
    assert_key_passes_and_stub_fails(check_trained_previous_token_head, trained_previous_token_head, seeds=(0, 1))


@pytest.mark.slow
@pytest.mark.parametrize("wrong, words", [
    (trained_own_token_head, ["OWN token"]),
    (trained_layer_1_only, ["layer 1 only"]),
    (trained_head_then_layer, ["(head, layer)"]),
])
def test_trained_previous_token_head_slips(one_training_per_seed, wrong, words):
    assert_slip_named(check_trained_previous_token_head, wrong, words, seeds=(0,))


def _induction_scores(name, seed, shift=1):
    tokens = InductionTask().held_out().sample(256, seed).inputs
    with torch.no_grad():
        weights = load_checkpoint(name)[0](tokens).attention_weights  # (layers, batch, heads, seq, seq)
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(40, 40, dtype=torch.bool).tril(-1)
    keys = torch.zeros_like(earlier)
    keys[..., shift:] = earlier[..., :40 - shift]  # shift 1: the keys after earlier copies; 0: the copies
    counted = keys.any(-1)
    return ((weights * keys[:, None]).sum(-1) * counted[:, None]).sum(dim=(1, 3)) / counted.sum()


def induction_scores(name, seed):
    return _induction_scores(name, seed).numpy()


def induction_scores_on_the_copy_itself(name, seed):
    return _induction_scores(name, seed, shift=0).numpy()


def induction_scores_by_previous_token(name, seed):
    tokens = InductionTask().held_out().sample(256, seed).inputs
    with torch.no_grad():
        weights = load_checkpoint(name)[0](tokens).attention_weights
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3)).numpy()


def induction_scores_over_every_query(name, seed):
    tokens = InductionTask().held_out().sample(256, seed).inputs
    counted = (tokens[:, :, None] == tokens[:, None, :]).tril(-1).any(-1)
    return _induction_scores(name, seed).numpy() * float(counted.sum()) / counted.numel()


def test_the_induction_scores_key_passes_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_induction_scores, induction_scores)


@pytest.mark.parametrize("wrong, words, seeds", [
    (induction_scores_on_the_copy_itself, ["earlier COPY"], (0, 1, 2)),
    (induction_scores_by_previous_token, ["previous-token scores"], (0, 1, 2)),
    (induction_scores_over_every_query, ["averaged over every query"], (0, 1, 2)),
])
def test_induction_scores_slips(wrong, words, seeds):
    assert_slip_named(check_induction_scores, wrong, words, seeds=seeds)
