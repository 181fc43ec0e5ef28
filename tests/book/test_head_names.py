"""mha.book.head_names: one name for a head, L3H1, made, read back and put on tables."""

import pytest

from mha.book import head_label, head_labels, label_heads, parse_head_label


def test_head_labels_round_trip_and_refuse_other_spellings():
    import numpy as np
    import pandas as pd
    import torch

    assert head_label(3, 1) == "L3H1" and head_label(np.int64(0), torch.tensor(11)) == "L0H11"
    assert parse_head_label("L12H10") == (12, 10)
    assert head_labels(2, 3) == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    assert all(parse_head_label(label) == divmod(i, 3) for i, label in enumerate(head_labels(2, 3)))
    for layer, head in ((-1, 0), (1.0, 2), (True, 1), (0, "1")):
        with pytest.raises(ValueError, match="whole number"):
            head_label(layer, head)
    for label in ("L3 H1", "l3h1", "L3H", "3-1", 31):
        with pytest.raises(ValueError, match="not a head label"):
            parse_head_label(label)
    table = pd.DataFrame({"relation": ["det", "aux"], "layer": [3, 1], "head": [1, 4], "acc": [0.9, 0.97]})
    labelled = label_heads(table)
    assert list(labelled.columns) == ["relation", "head", "acc"] and labelled["head"].tolist() == ["L3H1", "L1H4"]
    assert table["head"].tolist() == [1, 4], "the table passed in is left unchanged"
    indexed = label_heads(table.set_index(["layer", "head"]))
    assert indexed.index.name == "head" and indexed.index.tolist() == ["L3H1", "L1H4"]
    with pytest.raises(ValueError, match="needs a 'layer' and a 'head' column"):
        label_heads(table.drop(columns="layer"))


def test_too_many_head_labels_are_refused_before_the_first_is_made(monkeypatch):
    """10**5 layers of 10**4 heads would be 10**9 labels: refused by LIMITS["items"] before any label is made (a spy
    on head_label counts the labels made, and stops a loop that has started)."""
    import mha.book.head_names as head_names
    from mha.core.validation import SizeLimitError

    made = []

    def counting_label(layer, head):
        made.append((layer, head))
        if len(made) > 1000:
            raise AssertionError("head_labels started making 10**9 labels")
        return f"L{layer}H{head}"

    monkeypatch.setattr(head_names, "head_label", counting_label)
    with pytest.raises(SizeLimitError, match=r"100,000 x 10,000 = 1,000,000,000 items.*LIMITS\['items'\]"):
        head_labels(10**5, 10**4)
    assert made == []
    # the limit itself is allowed: all 10**6 labels made and returned, the last for head 999 of layer 999 (made by
    # a spy, which spares the real label's checks a million times over; head_label(999, 999) is the real one)
    made.clear()
    monkeypatch.setattr(head_names, "head_label", lambda layer, head: made.append((layer, head)) or len(made) - 1)
    assert head_labels(1000, 1000) == list(range(10**6)) and made[-1] == (999, 999)
    monkeypatch.undo()
    assert head_names.head_label(999, 999) == "L999H999"
