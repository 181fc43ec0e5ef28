"""Word-level attention: columns summed over a word's pieces, rows averaged (chapter 3)."""

import numpy as np
import pytest

from mha.pretrained.word_maps import word_attention, word_strings, word_units

# [CLS] play ##ing cards [SEP]: word 0 = "play ##ing", word 1 = "cards"
WORD_IDS = [None, 0, 0, 1, None]
TOKENS = ["[CLS]", "play", "##ing", "cards", "[SEP]"]
ATTENTION = np.array([
    # to: CLS  play  ##ing cards SEP      (rows = from)
    [0.20, 0.20, 0.20, 0.20, 0.20],  # [CLS]
    [0.10, 0.10, 0.30, 0.50, 0.00],  # play
    [0.00, 0.40, 0.20, 0.20, 0.20],  # ##ing
    [0.50, 0.25, 0.25, 0.00, 0.00],  # cards
    [0.00, 0.00, 0.00, 0.00, 1.00],  # [SEP]
])


def test_units_group_pieces_and_order_specials():
    assert word_units(WORD_IDS) == [(1, 2), (3,)]
    assert word_units(WORD_IDS, keep_special=True) == [(0,), (1, 2), (3,), (4,)]


def test_received_is_summed_and_sent_is_averaged():
    words = word_attention(ATTENTION, WORD_IDS)
    # row "playing" = mean of rows play and ##ing; column "playing" = play + ##ing
    expected = np.array([
        [((0.10 + 0.30) + (0.40 + 0.20)) / 2, (0.50 + 0.20) / 2],
        [0.25 + 0.25, 0.00],
    ])
    np.testing.assert_allclose(words, expected)


def test_rows_sum_to_at_most_one_without_specials_and_exactly_one_with_them():
    without = word_attention(ATTENTION, WORD_IDS)
    assert (without.sum(-1) <= 1 + 1e-12).all()
    np.testing.assert_allclose(without.sum(-1), [1 - (0.1 + 0.0 + 0.0 + 0.2) / 2, 0.5])
    with_specials = word_attention(ATTENTION, WORD_IDS, keep_special=True)
    assert with_specials.shape == (4, 4)
    np.testing.assert_allclose(with_specials.sum(-1), 1.0)
    np.testing.assert_allclose(with_specials[0], [0.2, 0.4, 0.2, 0.2])  # [CLS] row: its own unit


def test_direction_is_not_transposed():
    # "cards" sends half its attention to "playing"; "playing" sends none back to itself via cards' row
    words = word_attention(ATTENTION, WORD_IDS)
    assert words[1, 0] == pytest.approx(0.5)  # row = cards (from), column = playing (to)
    assert words[0, 1] == pytest.approx(0.35)


def test_single_piece_words_leave_the_map_unchanged_and_leading_axes_broadcast():
    rng = np.random.default_rng(0)
    attention = rng.dirichlet(np.ones(4), size=(2, 3, 4))  # (layers, heads, seq, seq)
    words = word_attention(attention, [0, 1, 2, 3])
    np.testing.assert_allclose(words, attention)
    batched = word_attention(np.stack([ATTENTION, ATTENTION]), WORD_IDS)
    np.testing.assert_allclose(batched[1], word_attention(ATTENTION, WORD_IDS))


def test_word_strings_glue_pieces():
    assert word_strings(TOKENS, WORD_IDS) == ["playing", "cards"]
    assert word_strings(TOKENS, WORD_IDS, keep_special=True) == ["[CLS]", "playing", "cards", "[SEP]"]


def test_bad_inputs_raise_helpful_errors():
    with pytest.raises(ValueError, match="word_ids has 3 entries"):
        word_attention(ATTENTION, [None, 0, 1])
    with pytest.raises(ValueError, match="skip words"):
        word_units([None, 0, 2, None])
    with pytest.raises(ValueError, match="word index"):
        word_units([None, "a", None])
    with pytest.raises(ValueError, match="seq, seq"):
        word_attention(np.ones((3, 4)), [0, 1, 2, 3])
