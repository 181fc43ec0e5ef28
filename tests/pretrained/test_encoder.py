"""mha.pretrained.encoder and mha.pretrained.tokenizer: the rebuilt all-MiniLM-L6-v2 must equal transformers' BertModel.

The reference is transformers' ``BertModel`` loaded from the same local folder
with eager attention (so it returns attention weights). Hidden states and
attention weights must agree within 1e-5 on varied sentences, one at a time
and as a padded batch. Interventions and input errors are tested too.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded

import numpy as np
import pytest
import torch

torch.set_num_threads(1)  # two shared cores: one thread is faster than two competing

from mha.pretrained.encoder import MiniLMEncoder  # noqa: E402
from mha.pretrained.overrides import uniform_attention_weights  # noqa: E402
from mha.pretrained.tokenizer import TokenizedBatch  # noqa: E402
from mha.pretrained.traces import EncoderTrace, SentenceTrace  # noqa: E402

TOLERANCE = 1e-5

SENTENCES = [
    "Hi",
    "The cat sat on the mat.",
    "Time flies like an arrow; fruit flies like a banana.",
    "Colourless green ideas sleep furiously.",
    "Don't panic -- it isn't the end of the world, is it?",
    "The keys to the cabinet, which nobody had seen since Tuesday, were on the table.",
    "Antidisestablishmentarianism and floccinaucinihilipilification are rarely used words.",
    "In 1969, Apollo 11 landed at 20:17 UTC; 600,000,000 people watched.",
    "Zoë's café in Zürich serves crème brûlée and jalapeño bagels.",
    "WHY IS EVERYONE SHOUTING IN THIS THREAD!!!",
    "She said, \"I'll be there at 5 p.m.\" -- and then she wasn't.",
    "The horse raced past the barn fell.",
    "Buffalo buffalo Buffalo buffalo buffalo buffalo Buffalo buffalo.",
    "Email me at someone@example.com or visit https://example.org/a-b_c?d=1.",
    "def forward(self, x): return x @ self.W + self.b  # vectors are rows",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "🙂 Emoji and symbols ∑, ∞ and → become unknown or split tokens.",
    "The old man the boat.",
    "Although the committee, after months of deliberation and several heated meetings in which members "
    "repeatedly disagreed about the budget, the schedule and the scope of the project, finally approved "
    "the proposal, many observers remained sceptical that the plan would ever be carried out as described.",
    " ".join(["The quick brown fox jumps over the lazy dog, again and again, in Zürich."] * 28),  # near 512 positions
]
BATCH = SENTENCES[
    :-1
]  # the padded batch: every length from 3 to ~70 tokens (the 500-token one would dominate the time)


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder.load()


@pytest.fixture(scope="module")
def reference(encoder):
    from transformers import BertModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    return BertModel.from_pretrained(str(encoder.model_path), attn_implementation="eager", local_files_only=True).eval()


def reference_outputs(reference, inputs: TokenizedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' hidden states (layers + 1, batch, seq, d_model) and weights (layers, batch, heads, seq, seq)."""
    with torch.inference_mode():
        out = reference(input_ids=inputs.input_ids, attention_mask=inputs.real_tokens.long(),
                        token_type_ids=inputs.token_type_ids, output_attentions=True, output_hidden_states=True)
    return torch.stack(out.hidden_states), torch.stack(out.attentions)


def assert_within_tolerance(ours: torch.Tensor, theirs: torch.Tensor, what: str) -> None:
    assert ours.shape == theirs.shape, f"{what}: shape {tuple(ours.shape)} != transformers' {tuple(theirs.shape)}"
    difference = (ours - theirs).abs().max().item()
    assert difference <= TOLERANCE, f"{what} differ from transformers' by up to {difference:.2e} (> {TOLERANCE})"


# ---------------------------------------------------------------- equal to transformers


@pytest.mark.parametrize("sentence", SENTENCES, ids=[f"sentence{i}" for i in range(len(SENTENCES))])
@pytest.mark.slow
def test_single_sentence_matches_transformers(encoder, reference, sentence):
    trace = encoder.trace(sentence)
    hidden, weights = reference_outputs(reference, trace.inputs)
    assert_within_tolerance(trace.hidden_states, hidden, "hidden states")
    assert_within_tolerance(trace.attention_weights, weights, "attention weights")


@pytest.mark.slow
def test_padded_batch_matches_transformers(encoder, reference):
    trace = encoder.trace(BATCH)
    hidden, weights = reference_outputs(reference, trace.inputs)
    real = trace.real_tokens  # (batch, seq)
    assert len(set(trace.lengths)) > 10, "the batch should hold sentences of many different lengths"
    assert_within_tolerance(trace.hidden_states[:, real], hidden[:, real], "hidden states at real tokens")
    # rows of real queries: every key, padded ones included
    assert_within_tolerance(trace.attention_weights.transpose(2, 3)[:, real], weights.transpose(2, 3)[:, real],
                            "attention weights of real queries")
    padded_keys = ~real[None, :, None, None, :]  # (1, batch, 1, 1, seq_k)
    assert trace.attention_weights.masked_select(padded_keys).abs().max() < 1e-12, "padding must get no attention"
    # and each sentence comes out as it does on its own
    alone = encoder.trace(BATCH[3])
    n = alone.lengths[0]
    torch.testing.assert_close(trace.hidden_states[:, 3, :n], alone.hidden_states[:, 0], atol=TOLERANCE, rtol=0)


# ---------------------------------------------------------------- what the trace holds


def test_trace_shapes_and_sentence_view(encoder):
    trace = encoder.trace(["The cat sat.", "A much longer sentence about the cat."])
    layers, heads, d_model, d_head = 6, 12, 384, 32
    batch, seq = trace.inputs.input_ids.shape
    assert isinstance(trace, EncoderTrace)
    assert trace.hidden_states.shape == (layers + 1, batch, seq, d_model)
    assert trace.attention_weights.shape == (layers, batch, heads, seq, seq)
    for per_head in (trace.queries, trace.keys, trace.values, trace.head_outputs):
        assert per_head.shape == (layers, batch, heads, seq, d_head)
    assert trace.hidden_states.dtype == torch.float32

    sentence = trace.sentence(0)
    n = trace.lengths[0]
    assert isinstance(sentence, SentenceTrace)
    assert sentence.tokens == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"] and n == 6
    assert sentence.word_ids == [None, 0, 1, 2, 3, None]
    assert sentence.words == ["The", "cat", "sat", "."]
    assert isinstance(sentence.attention, np.ndarray) and sentence.attention.shape == (layers, heads, n, n)
    np.testing.assert_allclose(sentence.attention.sum(-1), 1.0, atol=1e-5)
    assert sentence.queries.shape == sentence.head_outputs.shape == (layers, heads, n, d_head)
    assert sentence.hidden_states.shape == (layers + 1, n, d_model)
    np.testing.assert_array_equal(trace.attention_maps(0), sentence.attention)
    assert trace.tokens[0][n:] == ["[PAD]"] * (seq - n) and trace.word_ids[0][n:] == [None] * (seq - n)


def test_queries_keys_values_reproduce_the_weights(encoder):
    trace = encoder.trace(["Time flies like an arrow.", "Fruit flies like a banana, or so they say."])
    scores = trace.queries @ trace.keys.transpose(-2, -1) / math.sqrt(32)  # (layers, batch, heads, seq, seq)
    scores = scores.masked_fill(~trace.real_tokens[None, :, None, None, :], float("-inf"))
    torch.testing.assert_close(scores.softmax(-1), trace.attention_weights, atol=1e-6, rtol=0)
    torch.testing.assert_close(trace.attention_weights @ trace.values, trace.head_outputs, atol=1e-6, rtol=0)


def test_head_weights_are_the_heads_own_slices(encoder):
    trace = encoder.trace("The cat sat on the mat.")
    stacked = encoder.stacked_head_weights()
    assert stacked.W_Q.shape == (6, 12, 384, 32) and stacked.W_O.shape == (6, 12, 32, 384)
    for layer, head in ((0, 0), (3, 7), (5, 11)):
        own = trace.head_weights(layer, head)
        assert own.W_Q.shape == own.W_K.shape == own.W_V.shape == (384, 32) and own.W_O.shape == (32, 384)
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
            assert torch.equal(getattr(stacked, name)[layer, head], getattr(own, name)), name
        queries = trace.hidden_states[layer, 0] @ own.W_Q + own.b_Q  # (seq, d_head)
        torch.testing.assert_close(queries, trace.queries[layer, 0, head], atol=1e-6, rtol=0)


def test_load_is_cached_and_frozen(encoder):
    assert MiniLMEncoder.load() is encoder
    assert not any(parameter.requires_grad for parameter in encoder.parameters())
    assert encoder.config.n_layers == 6 and encoder.config.n_heads == 12 and encoder.config.d_head == 32


# ---------------------------------------------------------------- interventions


@pytest.mark.slow
def test_head_mask_removes_exactly_one_head(encoder, reference):
    inputs = encoder.tokenize(BATCH[:4])
    layer, head, d_head = 2, 5, 32
    with torch.inference_mode():
        plain = encoder(inputs)
        masked = encoder(inputs, head_mask=encoder.head_mask([(layer, head)]))
    assert masked.head_outputs[layer, :, head].abs().max() == 0
    assert torch.equal(masked.attention_weights[: layer + 1], plain.attention_weights[: layer + 1])
    assert (masked.hidden_states[layer + 1] - plain.hidden_states[layer + 1]).abs().max() > 1e-3

    # removing a head = zeroing its rows of W_O (its columns of transformers' (d_out, d_in) dense weight)
    ablated = copy.deepcopy(reference)
    with torch.no_grad():
        ablated.encoder.layer[layer].attention.output.dense.weight[:, head * d_head : (head + 1) * d_head] = 0
    hidden, _ = reference_outputs(ablated, inputs)
    real = inputs.real_tokens
    assert_within_tolerance(masked.hidden_states[:, real], hidden[:, real], "hidden states with a head removed")

    if "head_mask" in inspect.signature(type(reference).forward).parameters:  # transformers < 5 still had it
        mask = torch.ones(6, 12)
        mask[layer, head] = 0
        with torch.inference_mode():
            theirs = reference(input_ids=inputs.input_ids, attention_mask=real.long(), head_mask=mask,
                               output_hidden_states=True)
        assert_within_tolerance(masked.hidden_states[:, real], torch.stack(theirs.hidden_states)[:, real],
                                "hidden states with transformers' head_mask")


def test_head_mask_per_sentence(encoder):
    inputs = encoder.tokenize(BATCH[:2])
    per_sentence = torch.ones(2, 6, 12)  # (batch, layers, heads)
    per_sentence[0, 0, :] = 0  # remove all of layer 0 in sentence 0 only
    with torch.inference_mode():
        plain = encoder(inputs)
        masked = encoder(inputs, head_mask=per_sentence)
    assert torch.equal(masked.hidden_states[:, 1], plain.hidden_states[:, 1])
    assert (masked.hidden_states[1, 0] - plain.hidden_states[1, 0]).abs().max() > 1e-3


def test_uniform_attention_override(encoder):
    inputs = encoder.tokenize(["Short one.", "A somewhat longer sentence than the first one."])
    chosen = [(1, 0), (1, 7), (4, 3)]
    with torch.inference_mode():
        plain = encoder(inputs)
        overridden = encoder(inputs, attention_override=encoder.uniform_attention(chosen))
    real = inputs.real_tokens  # (batch, seq)
    expected_rows = real / real.sum(-1, keepdim=True)  # (batch, seq_k)
    for layer, head in chosen:
        weights = overridden.attention_weights[layer, :, head]  # (batch, seq_q, seq_k)
        torch.testing.assert_close(weights, expected_rows[:, None, :].expand_as(weights), atol=0, rtol=0)
        torch.testing.assert_close(overridden.head_outputs[layer, :, head],
                                   weights @ overridden.values[layer, :, head], atol=1e-6, rtol=0)
    untouched = [h for h in range(12) if h not in (0, 7)]
    assert torch.equal(overridden.attention_weights[1, :, untouched], plain.attention_weights[1, :, untouched])
    assert torch.equal(overridden.hidden_states[:2], plain.hidden_states[:2])
    assert (overridden.hidden_states[2] - plain.hidden_states[2]).abs().max() > 1e-3
    assert uniform_attention_weights(real, 5).shape == (2, 1, 5, real.shape[1])


# ---------------------------------------------------------------- resuming at a layer


def test_run_from_layer_resumes_the_stored_states(encoder):
    inputs = encoder.tokenize(BATCH[:3])  # padded
    mask = encoder.head_mask([(3, 2), (4, 0), (4, 9)])
    override = encoder.uniform_attention([(4, 1), (5, 7)])
    with torch.inference_mode():
        plain = encoder(inputs)
        masked = encoder(inputs, head_mask=mask)
        overridden = encoder(inputs, attention_override=override)
        for layer in range(6):  # no intervention: the last layer's output again, whatever the layer resumed
            resumed = encoder.run_from_layer(plain.hidden_states[layer], layer, real_tokens=inputs.real_tokens)
            torch.testing.assert_close(resumed, plain.hidden_states[-1], atol=1e-6, rtol=0)
        for layer in (0, 3):  # the first layer the mask and the override touch is 3 and 4
            with_mask = encoder.run_from_layer(plain.hidden_states[layer], layer, real_tokens=inputs.real_tokens,
                                               head_mask=mask)
            with_override = encoder.run_from_layer(plain.hidden_states[layer], layer, real_tokens=inputs.real_tokens,
                                                   attention_override=override)
            torch.testing.assert_close(with_mask, masked.hidden_states[-1], atol=1e-6, rtol=0)
            torch.testing.assert_close(with_override, overridden.hidden_states[-1], atol=1e-6, rtol=0)
        alone = encoder.trace(BATCH[1])  # one sentence: no padding, so no key mask is needed
        torch.testing.assert_close(encoder.run_from_layer(alone.hidden_states[2], 2), alone.hidden_states[-1],
                                   atol=1e-6, rtol=0)


def test_run_from_layer_can_skip_the_padding(encoder):
    inputs = encoder.tokenize(BATCH[:3])  # padded
    real = inputs.real_tokens
    mask = encoder.head_mask([(2, 4), (4, 9)])
    with torch.inference_mode():
        plain = encoder(inputs, head_mask=mask)
        for layer in (0, 2):
            kept = encoder.run_from_layer(plain.hidden_states[layer], layer, real_tokens=real, head_mask=mask)
            skipped = encoder.run_from_layer(plain.hidden_states[layer], layer, real_tokens=real, head_mask=mask,
                                             skip_padding=True)
            assert torch.equal(skipped[real], kept[real])  # every real token bit for bit as with the padding run
            assert not skipped[~real].any() and kept[~real].abs().min() > 0  # padding: 0 instead of the model's
            torch.testing.assert_close(skipped[real], plain.hidden_states[-1][real], atol=1e-6, rtol=0)
        with pytest.raises(ValueError, match="skip_padding must be True or False"):
            encoder.run_from_layer(plain.hidden_states[1], 1, real_tokens=real, skip_padding="yes")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e, t: e.run_from_layer(t.hidden_states[6], 6), "layer must be a whole number in 0..5"),
        (lambda e, t: e.run_from_layer(t.hidden_states[:2], 1), r"give a tensor \(batch, seq, 384\)"),
        (lambda e, t: e.run_from_layer(t.hidden_states[1].numpy(), 1), "hidden_states is ndarray"),
        (lambda e, t: e.run_from_layer(t.hidden_states[1], 1, real_tokens=t.real_tokens[:, :2]), "real_tokens is"),
        (lambda e, t: e.run_from_layer(t.hidden_states[3], 3, real_tokens=t.real_tokens,
                                       head_mask=e.head_mask([(1, 0), (4, 4)])),
         r"changes layers \[1\], below layer 3"),
    ],
)
def test_run_from_layer_explains_bad_arguments(encoder, call, message):
    trace = encoder.trace(BATCH[:2])
    with pytest.raises(ValueError, match=message):
        call(encoder, trace)


# ---------------------------------------------------------------- tokenisation


def test_words_and_word_ids(encoder):
    raw = encoder.tokenize("Don't panic, Zoë!")
    assert raw.words == [["Don", "'", "t", "panic", ",", "Zoë", "!"]]
    assert [raw.words[0][w] for w in raw.word_ids[0] if w is not None][-2:] == ["Zoë", "!"]

    split = encoder.tokenize(["New York", "is", "unbelievably", "big"], is_split_into_words=True)
    assert split.words == [["New York", "is", "unbelievably", "big"]]
    assert split.tokens[0][:3] == ["[CLS]", "new", "york"] and split.word_ids[0][:3] == [None, 0, 0]
    assert split.word_ids[0].count(2) > 1  # "unbelievably" is several wordpieces

    batch = encoder.tokenize([["A", "cat"], ["Three", "small", "cats"]])
    assert batch.input_ids.shape == (2, 5) and batch.lengths == [4, 5]
    assert batch.tokens[0][-1] == "[PAD]" and batch.word_ids[0][-1] is None
    assert batch.input_ids[0, -1] == 0 and not batch.real_tokens[0, -1]


LONG_TEXT = "word " * 600


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ("", {}, "empty or only whitespace"),
        ("   \n\t", {}, "empty or only whitespace"),
        (42, {}, "got int"),
        (None, {}, "got NoneType"),
        ([], {}, "empty list"),
        (["fine", 3], {}, "sentence 1 is int"),
        (["fine", ["a", "b"]], {}, "mixes strings and lists"),
        ([["a", "  "]], {}, "word 1 of sentence 0 is empty"),
        ([["a", 7]], {}, "word 1 of sentence 0 is int"),
        ([[]], {}, "empty list of words"),
        (["a", "\u200b"], {"is_split_into_words": True}, "produced no wordpieces"),
        ("\x00\x01", {}, "produced no wordpieces"),
        ("one string", {"is_split_into_words": True}, "needs a list of words"),
        (LONG_TEXT, {}, r"602 tokens long .* only 512 positions.*truncate=True"),
    ],
)
def test_bad_text_raises_a_clear_error(encoder, text, options, message):
    with pytest.raises(ValueError, match=message):
        encoder.trace(text, **options)


def test_truncation_only_when_asked_and_with_a_warning(encoder):
    with pytest.warns(UserWarning, match="more than 512 tokens long; truncated to the model.s 512") as caught:
        inputs = encoder.tokenize(LONG_TEXT, truncate=True)
    assert caught[0].filename == __file__, "the warning should point at the caller's line"
    assert inputs.input_ids.shape == (1, 512) and inputs.tokens[0][-1] == "[SEP]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder.tokenize("short text", truncate=True)  # nothing to cut, nothing to say


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.trace("a b", head_mask=torch.ones(12, 6)), "head_mask has shape"),
        (lambda e: e.head_mask([(6, 0)]), "layer must be a whole number in 0..5"),
        (lambda e: e.head_mask([(0, 12)]), "head must be a whole number in 0..11"),
        (lambda e: e.uniform_attention([3]), r"\(layer, head\) pairs"),
        (lambda e: e.check_heads([(0, 12)]), "head must be a whole number in 0..11"),
        (lambda e: e.head_weights(-1, 0), "layer must be"),
        (lambda e: e.trace(["a", "b"]).sentence(2), "sentence index"),
        (lambda e: e(torch.tensor([[101, 102]])), "takes a TokenizedBatch"),
        (lambda e: e.trace("a b", attention_override=lambda layer, w, real: w[..., :1]), "attention_override"),
    ],
)
def test_bad_arguments_raise_a_clear_error(encoder, call, message):
    with pytest.raises(ValueError, match=message):
        call(encoder)
