"""Tests for mha.book.verdicts: the verdict words, their text, and the glue record a verdict leaves."""

from __future__ import annotations

import pytest

from mha.book import VERDICTS, glue_verdict, parse_verdict, verdict_text
from mha.book.prose import _GLUED


def test_the_verdicts_are_the_four_the_claims_page_defines():
    assert VERDICTS == ("holds", "holds with a qualifier", "fails on this model", "not shown")


@pytest.mark.parametrize("verdict", VERDICTS)
@pytest.mark.parametrize("qualifier", [None, "small but real", "at MiniLM's width: within 1.5x of one head"])
def test_a_verdict_reads_back_as_written(verdict, qualifier):
    text = verdict_text(verdict, qualifier)
    assert text == (verdict if qualifier is None else f"{verdict}: {qualifier}")
    assert parse_verdict(text) == (verdict, qualifier)


def test_the_longer_verdict_is_not_read_as_holds_with_a_qualifier_phrase():
    # "holds with a qualifier" starts with "holds"; it must not come back as holds + a stray qualifier
    assert parse_verdict("holds with a qualifier") == ("holds with a qualifier", None)
    assert parse_verdict("holds: with a qualifier") == ("holds", "with a qualifier")


@pytest.mark.parametrize("bad", ["fails", "Holds", "holds:", "holds:  x", "untested", "", "holds with a qualifier x"])
def test_a_text_that_is_no_verdict_is_refused(bad):
    with pytest.raises(ValueError, match="verdicts"):
        parse_verdict(bad)


@pytest.mark.parametrize("verdict, qualifier", [("fails", None), ("holds", ""), ("holds", " padded"),
                                                ("holds", 3)])
def test_a_wrong_word_or_qualifier_is_refused_with_what_to_write(verdict, qualifier):
    with pytest.raises(ValueError, match="verdict|qualifier"):
        verdict_text(verdict, qualifier)


def test_glue_verdict_stores_the_text_under_a_name_ending_in_verdict(capsys):
    text = glue_verdict("toy_claim_verdict", "holds with a qualifier", "on one layer only")
    assert text == "holds with a qualifier: on one layer only"
    assert _GLUED["toy_claim_verdict"] == text
    with pytest.raises(ValueError, match="_verdict"):
        glue_verdict("toy_claim", "holds")
    with pytest.raises(TypeError):
        parse_verdict(None)
