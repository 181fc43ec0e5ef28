"""The chapter-3 lab explorer: answers within the interactive budget, explains bad input, keeps the last good map."""

import base64
import json
import re
import shutil
import subprocess
from importlib.resources import files

import numpy as np
import pytest
import torch

from mha.lab.checkpoints import load_checkpoint
from mha.views.heatmaps import weight_hundredths
from mha.views.induction_explorer import (
    TYPED_TOKEN_RULES,
    InductionLabExplorer,
    induction_model_names,
    parse_token_ids,
    prefix_matching_keys,
)
from mha.views.payloads import decode_payload, site_payload, stored_weights
from mha.views.widget import join_modules

torch.set_num_threads(1)

TYPED = [5, 17, 42, 8, 5, 17, 42]


def checkpoint_map(name: str, tokens: list[int], layer: int, head: int) -> np.ndarray:
    """One head's map (seq, seq) of a stored checkpoint on ``tokens``, straight from the model."""
    model, _ = load_checkpoint(name)
    with torch.no_grad():
        return model(torch.tensor([tokens])).attention_weights[layer][0, head].numpy()


def shown(view) -> tuple:
    """What a view (an ExplorerView) shows, hashable: its map's title, and the weights' shape and bytes."""
    drawn = view.attention_map
    return drawn.title, drawn.weights.shape, drawn.weights.tobytes()


@pytest.fixture(scope="module")
def explorer():
    return InductionLabExplorer()


def test_the_menu_lists_every_seed_in_order():
    names = induction_model_names()
    assert names[0] == "induction_2layer_seed0" and len(names) >= 5
    assert [int(name.rsplit("seed", 1)[1]) for name in names] == sorted(int(n.rsplit("seed", 1)[1]) for n in names)


def test_prefix_matching_keys_are_the_tokens_after_earlier_copies():
    assert prefix_matching_keys([5, 17, 42, 5, 17]) == [(3, 1), (4, 2)]
    assert prefix_matching_keys([1, 2, 3]) == []


@pytest.mark.parametrize("text, words", [
    ("5 x 7", "'x' is not a token id"),
    ("5 -3", "'-3' is not a token id"),
    ("5 64", "outside the vocabulary"),
    ("7", "at least 2"),
    (" ".join(["1"] * 41), "remove 1"),
])
def test_bad_token_sequences_are_explained(text, words):
    with pytest.raises(ValueError, match=words):
        parse_token_ids(text, vocab_size=64, max_len=40)


def test_commas_and_spaces_both_separate_tokens():
    assert parse_token_ids(" 5, 17,42  8 ", vocab_size=64, max_len=40) == [5, 17, 42, 8]


@pytest.mark.slow
def test_default_view_shows_a_map_and_the_head_scores(explorer):
    drawn = explorer.current.attention_map
    assert drawn.title.startswith("seed 0, L1H0 (")
    assert drawn.query_labels == [str(position) for position in range(len(drawn.weights))]
    held_out = explorer.batch.inputs[0].tolist()
    np.testing.assert_allclose(drawn.weights, checkpoint_map("induction_2layer_seed0", held_out, 1, 0), atol=1e-6)
    assert drawn.marked == prefix_matching_keys(held_out) and drawn.marked
    message = explorer.message.value
    assert "seed 0, L1H0" in message and "induction" in message
    assert "never trained on" in message and "K-composition" in message


def test_the_roles_shown_follow_the_scores_not_the_index(explorer):
    explorer.own_tokens.value = ""
    explorer.model_menu.value = "induction_2layer_seed0"
    explorer.layer_slider.value = 0
    explorer.head_slider.value = 3
    assert "role by score (threshold 0.5): <b>previous-token</b>" in explorer.message.value
    explorer.model_menu.value = "induction_2layer_seed2"
    assert "role by score (threshold 0.5): <b>-</b>" in explorer.message.value
    explorer.head_slider.value = 0
    assert "<b>previous-token</b>" in explorer.message.value


def test_bad_typed_tokens_keep_the_last_map_and_escape_html(explorer):
    explorer.own_tokens.value = ""
    good = explorer.current
    explorer.own_tokens.value = "<script>alert(1)</script>"
    assert "Cannot draw this" in explorer.message.value
    assert "<script>" not in explorer.message.value and "&lt;script&gt;" in explorer.message.value
    assert explorer.current is good
    explorer.own_tokens.value = "3 99"
    assert "outside the vocabulary" in explorer.message.value
    assert explorer.current is good
    explorer.own_tokens.value = "5 17 42 8 5 17 42"
    assert "your 7 tokens" in explorer.message.value
    drawn = explorer.current.attention_map
    model, layer, head = explorer.model_menu.value, explorer.layer_slider.value, explorer.head_slider.value
    np.testing.assert_allclose(drawn.weights, checkpoint_map(model, TYPED, layer, head), atol=1e-6)
    assert drawn.marked == [(4, 1), (5, 2), (6, 3)]
    explorer.own_tokens.value = "5 17 42 8"
    assert "undefined (no token repeats)" in explorer.message.value
    explorer.own_tokens.value = ""
    assert "held-out sequence" in explorer.message.value


def test_constructor_arguments_are_checked():
    with pytest.raises(ValueError, match="n_sequences"):
        InductionLabExplorer(["induction_2layer_seed0"], n_sequences=0)
    with pytest.raises(ValueError, match="no induction checkpoints"):
        InductionLabExplorer([])
    with pytest.raises(Exception, match="no checkpoint called"):
        InductionLabExplorer(["induction_9layer_seed0"])


def test_a_one_layer_model_can_be_shown_next_to_the_others():
    explorer = InductionLabExplorer(["induction_2layer_seed0", "induction_1layer_seed0"], n_sequences=2)
    explorer.layer_slider.value = 1
    explorer.model_menu.value = "induction_1layer_seed0"
    assert explorer.layer_slider.max == 0 and explorer.layer_slider.value == 0
    assert "nothing to compose with" in explorer.message.value


def test_every_control_redraws_the_map(explorer):
    # How fast each update is belongs to the benchmark (scripts/bench_views.py, budget 50 ms), not to a timed test.
    explorer.own_tokens.value = ""
    explorer.refresh()
    pictures = []
    for name in induction_model_names()[:5]:
        explorer.model_menu.value = name
        for layer in (0, 1):
            explorer.layer_slider.value = layer
            for head in range(4):
                explorer.head_slider.value = head
                pictures.append(shown(explorer.current))
    for sequence in range(16):
        explorer.sequence_slider.value = sequence
        pictures.append(shown(explorer.current))
    assert len(set(pictures)) > 40, "moving the model, layer, head and sequence controls should change the map"


@pytest.mark.parametrize("text, words", [
    ("5 ٣", "'٣' is not a token id"),  # a digit of another script: only 0-9 are ids
    ("5 " + "9" * 5000, "token id 999999999999999999999999... is outside the vocabulary"),
    ("5 000000000000000000000007", None),
])
def test_odd_digits_and_huge_numbers_are_explained(text, words):
    if words is None:
        assert parse_token_ids(text, vocab_size=64, max_len=40) == [5, 7]
    else:
        with pytest.raises(ValueError, match=re.escape(words)):
            parse_token_ids(text, vocab_size=64, max_len=40)


@pytest.mark.parametrize("typed", ["<img src=x onerror=alert(1)>", "<script>", "1 2 \ud800"])
def test_html_and_broken_characters_typed_are_shown_as_text(explorer, typed):
    explorer.own_tokens.value = ""
    good = explorer.current
    explorer.own_tokens.value = typed
    message = explorer.message.value
    assert "Cannot draw this" in message and "is not a token id" in message
    assert "<img" not in message and "<script" not in message and "\ud800" not in message
    assert explorer.current is good and explorer.typing_problem.value == message
    explorer.own_tokens.value = ""


def test_an_unexpected_error_is_a_message_not_a_dead_view(explorer, monkeypatch):
    explorer.own_tokens.value = ""
    good = explorer.current

    def broken(*args, **kwargs):
        raise RuntimeError("no more memory")
    monkeypatch.setattr(explorer.views[explorer.model_menu.value], "model", broken)
    explorer.own_tokens.value = "9 8 7 9 8 7"  # a sequence the model has not run on: it runs now, and fails
    assert "unexpected RuntimeError (no more memory)" in explorer.message.value
    assert explorer.current is good
    monkeypatch.undo()
    explorer.own_tokens.value = ""
    assert explorer.refresh() and shown(explorer.current) == shown(good)


# --- in Jupyter: the view drawn by views.js, and the box to type token ids under it ------------------------------


@pytest.mark.slow
def test_typed_ids_are_drawn_in_every_map_of_the_view_on_screen():
    explorer = InductionLabExplorer(["induction_2layer_seed0", "induction_2layer_seed1"], n_sequences=2)
    assert explorer.own_tokens in explorer.widget.children and explorer.typing_problem in explorer.widget.children
    held_out = explorer.view_widget.payload
    explorer.own_tokens.value = " ".join(map(str, TYPED))
    assert explorer.typing_problem.value == ""
    payload = decode_payload(explorer.view_widget.payload)
    assert [control["name"] for control in payload["controls"]] == ["model", "layer", "head", "sequence"]
    assert len(payload["drawn"]) == 2 * 2 * 4 * 2  # model, layer, head, sequence: each its own view
    for key, index in payload["views"].items():
        chosen = zip(payload["controls"], key.split("|"), strict=True)
        model, layer, head, _ = (control["values"][int(i)] for control, i in chosen)
        drawn = payload["drawn"][index]
        message = payload["strings"][drawn["message"]]
        assert "On your 7 tokens:" in message and "Tokens: <code>5 17 42 8 5 17 42</code>" in message
        assert drawn["map"]["shape"] == [7, 7] and drawn["map"]["marked"] == [[4, 1], [5, 2], [6, 3]]
        np.testing.assert_array_equal(stored_weights(payload, drawn["map"]),
                                      weight_hundredths(checkpoint_map(model, TYPED, layer, head)))
    typed = explorer.view_widget.payload
    for bad in ("5 <b>x</b>", "5 64"):
        explorer.own_tokens.value = bad
        problem = explorer.typing_problem.value
        assert problem.startswith("<b style='color:#b35806'>Cannot draw this:</b> ") and "<b>x" not in problem
        assert explorer.view_widget.payload == typed  # the view on screen keeps the last good ids
    assert "outside the vocabulary" in explorer.typing_problem.value
    explorer.own_tokens.value = ""  # no typed ids: the held-out sequences again, exactly as at first
    assert explorer.typing_problem.value == "" and explorer.view_widget.payload == held_out


# The website's typed token ids (section 3.6, views/typed_sequences.js) against the package, under Node.js: the
# page checks what the reader types with the rules and words of this view (TYPED_TOKEN_RULES, carried in the
# payload), so every input gets parse_token_ids's ids or its message word for word; the circles of a typed map are
# prefix_matching_keys's; and the payload's float32 weights give back each checkpoint's parameters exactly.

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (apt install nodejs)")

TYPED_TEXTS = ["5 17 42 8 5 17 42", " 5, 17,42  8 ", "5 x 7", "5 -3", "5 64", "7", "", " ".join(["1"] * 41),
         " ".join(["1"] * 40), "5 ٣", "5 " + "9" * 5000, "5 000000000000000000000007", "<img src=x onerror=alert(1)>",
         "it's 5", "a\"b' 5", "back\\slash 3", "x" * 60, "63 0", "5 1.5", "1e3 4", "5\t6\n7"]


@pytest.fixture(scope="module")
def page_parts(tmp_path_factory):
    """Run a script with the page's parseTokenIds and prefixMatchingKeys: script -> its printed JSON."""
    root = tmp_path_factory.mktemp("web")
    web = files("mha.views") / "web"
    shutil.copytree(web / "views", root / "views")
    shutil.copy(web / "payload.schema.json", root)
    (root / "probe.js").write_text('import { parseTokenIds, prefixMatchingKeys } from "./views/typed_sequences.js";\n'
                                   "globalThis.probe = { parseTokenIds, prefixMatchingKeys };\n", encoding="utf-8")
    script = join_modules("probe.js", root)

    def run(body: str):
        done = subprocess.run(["node", "-e", script + "\n" + body], capture_output=True, text=True, timeout=60,
                              check=True)
        return json.loads(done.stdout)
    return run


def python_answer(text: str) -> dict:
    try:
        return {"ids": parse_token_ids(text, vocab_size=64, max_len=40)}
    except ValueError as problem:
        return {"message": str(problem)}


@needs_node
def test_typed_ids_get_the_packages_ids_or_its_message_word_for_word(page_parts):
    answers = page_parts(
        f"const rules = {json.dumps(TYPED_TOKEN_RULES)};\n"
        f"console.log(JSON.stringify({json.dumps(TYPED_TEXTS)}.map((text) => {{\n"
        "  try { return { ids: probe.parseTokenIds(text, rules, 64, 40) }; }\n"
        "  catch (error) { return { message: error.message }; } })));")
    expected = [python_answer(text) for text in TYPED_TEXTS]
    assert sum("message" in answer for answer in expected) >= 10  # the refusals are exercised, not only the ids
    for text, page, package in zip(TYPED_TEXTS, answers, expected, strict=True):
        assert page == package, text[:60]


@needs_node
def test_the_circles_are_the_packages_prefix_matching_keys(page_parts):
    rng = np.random.default_rng(0)
    sequences = [[5, 17, 42, 8, 5, 17, 42], [1, 2, 3], [3, 3, 3, 3]] + [rng.integers(0, 5, 12).tolist()
                                                                       for _ in range(5)]
    page = page_parts(f"console.log(JSON.stringify({json.dumps(sequences)}.map(probe.prefixMatchingKeys)));")
    assert page == [[list(pair) for pair in prefix_matching_keys(ids)] for ids in sequences]
    assert page[1] == [] and page[0]


@pytest.mark.slow
def test_the_payload_carries_each_checkpoint_exactly_in_menu_order_less_what_attention_ignores():
    names = induction_model_names()[:2]
    explorer = InductionLabExplorer(names, n_sequences=1)
    sequences = explorer.page_sequences()
    assert sequences["rules"] == TYPED_TOKEN_RULES
    assert "typed_sequences" in site_payload(explorer)  # in Jupyter the kernel runs typed ids: no weights there
    assert "typed_sequences" not in site_payload(explorer, hosted=True)
    tokens = torch.randint(0, 64, (8, 40), generator=torch.Generator().manual_seed(0))
    for name, stored in zip(names, sequences["models"], strict=True):
        model, info = load_checkpoint(name)
        with torch.no_grad():
            expected = [weights.clone() for weights in model(tokens).attention_weights]
        values = np.frombuffer(base64.b64decode(stored["weights"]), dtype="<f4")
        offset = 0
        for (layout_name, shape, sent), (parameter_name, parameter) in zip(stored["layout"], model.named_parameters(),
                                                                             strict=True):
            assert layout_name == parameter_name and tuple(shape) == tuple(parameter.shape)
            if sent:
                size = int(np.prod(shape))
                np.testing.assert_array_equal(values[offset:offset + size].reshape(shape), parameter.detach().numpy())
                offset += size
            else:  # what the page sets to 0 leaves PyTorch's attention exactly as it was
                with torch.no_grad():
                    parameter.zero_()
        assert offset == len(values)
        assert [sent for _, _, sent in stored["layout"]].count(False) == 5  # W_U, the last layer's V and O
        with torch.no_grad():
            for before, after in zip(expected, model(tokens).attention_weights, strict=True):
                torch.testing.assert_close(after, before, rtol=0, atol=0)
        assert stored["config"]["max_seq_len"] == info.config.max_seq_len
