"""The random-layer explorer (chapter 1, "Multi-head attention"): type a sentence, choose a head count and a head.

The model is one :class:`~mha.core.attention.MultiHeadAttention` layer with random
weights over :mod:`mha.core.toy_sentences` vectors. For a fixed ``d_model`` and
seed the projection matrices are the same whatever the head count, so moving
the head-count slider changes only how the features are cut into heads, which
is exactly the point the chapter makes. Bad input (a head count that does not
divide ``d_model``, an empty or over-long sentence, a broken character) shows
a message and keeps the last good map on screen; text the reader typed is
HTML-escaped before it is shown (:class:`mha.views.explorer.Explorer` does that
for every view).
"""

from __future__ import annotations

import html
from functools import lru_cache

import numpy as np
import torch
from ipywidgets import IntSlider, Layout, Text

from mha.core.attention import MultiHeadAttention
from mha.core.toy_sentences import MAX_TOKENS, embed_tokens, split_into_tokens
from mha.core.validation import check_no_lone_surrogates, check_seed, check_type, check_whole_number
from mha.views.contract import ExplorerView
from mha.views.explorer import Explorer, problem_html
from mha.views.heatmaps import AttentionMap

__all__ = ["head_attention_maps", "RandomLayerExplorer"]

DEFAULT_SENTENCE = "The animal did not cross the street because it was too tired ."


@lru_cache(maxsize=32)
def _layer(d_model: int, n_heads: int, seed: int) -> MultiHeadAttention:
    return MultiHeadAttention(d_model, n_heads, seed=seed).eval()


def head_attention_maps(sentence: str, n_heads: int, d_model: int = 24, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Tokens of ``sentence`` and every head's attention weights (heads, seq, seq) from a random layer.

    Raises ``ValueError`` (with the fix) for a head count that does not divide
    ``d_model`` and for an empty, over-long or non-text sentence, or one with a
    broken character (a lone surrogate, see :func:`mha.core.validation.check_no_lone_surrogates`).
    """
    layer = _layer(check_whole_number("d_model", d_model, minimum=1), check_whole_number("n_heads", n_heads, minimum=1),
                   check_seed("seed", seed))  # numbers first: the cache hashes them; the layer checks the head count
    if isinstance(sentence, str):
        check_no_lone_surrogates(sentence, "the sentence")
    tokens = split_into_tokens(sentence)
    with torch.no_grad():
        weights = layer(embed_tokens(tokens, d_model, seed=seed)).weights[0]  # (heads, seq, seq)
    return tokens, weights.numpy()


class RandomLayerExplorer(Explorer):
    """Widgets to pick a sentence, a head count and a head, and see that head's map (chapter 1, "Multi-head attention").

    :meth:`view_data` gives the view for any sentence, head count and head without touching the widgets;
    refreshing, timing, messages and the text form come from :class:`~mha.views.explorer.Explorer`.
    """

    what_to_try = ("Move the head count from 1 to 12 and step through the heads; type your own sentence; try a "
                   "head count that does not divide d_model, such as 5.")
    what_to_notice = ("The projections never change, only how the d_model features are cut into heads: with more "
                      "heads each map is computed from fewer features (d_head), and the heads of one count differ "
                      "from each other. A count that does not divide d_model is refused and the last map stays.")

    def __init__(self, sentence: str = DEFAULT_SENTENCE, n_heads: int = 4, d_model: int = 24,
                 max_heads: int = 12, seed: int = 0) -> None:
        check_type("sentence", sentence, str, "the sentence to show first, as text")
        max_heads = check_whole_number("max_heads", max_heads, minimum=1, meaning="the head slider's end")
        n_heads = check_whole_number("n_heads", n_heads, minimum=1, maximum=max_heads, meaning="the first head count")
        self.d_model, self.seed, self.max_heads = d_model, seed, max_heads
        self.sentence_box = Text(value=sentence, description="sentence", continuous_update=False,
                                 layout=Layout(width="95%"))
        self.heads_slider = IntSlider(value=n_heads, min=1, max=max_heads, description="heads")
        self.head_slider = IntSlider(value=0, min=0, max=max(n_heads - 1, 0), description="head shown")
        super().__init__({"sentence": self.sentence_box, "heads": self.heads_slider, "head": self.head_slider})

    def view_data(self, *, sentence: str, heads: int, head: int) -> ExplorerView:
        """Head ``head`` (clamped to the head count) of a ``heads``-head layer on ``sentence``; ``ValueError`` if
        bad."""
        head = check_whole_number("head", head, minimum=0, meaning="heads are counted from 0")
        tokens, weights = head_attention_maps(sentence, heads, self.d_model, self.seed)  # (heads, seq, seq)
        head = min(head, heads - 1)
        d_head = self.d_model // heads
        message = (
            f"{heads} head{'s' if heads > 1 else ''} × d_head = {d_head} features each "
            f"(d_model = {self.d_model}); showing head {head}. Tokens: "
            f"<code>{html.escape(' | '.join(tokens))}</code>"
        )
        attention_map = AttentionMap(weights[head], tokens, title=f"head {head} of {heads} (d_head = {d_head})")
        return ExplorerView(message, attention_map, slider_max={"head": heads - 1}, shown={"head": head})

    def _state(self) -> dict[str, object]:
        return {**self.values(), "d_model": self.d_model}

    def recipe_arguments(self) -> dict:
        return {"sentence": self.sentence_box.value, "n_heads": self.heads_slider.value, "d_model": self.d_model,
                "max_heads": self.max_heads, "seed": self.seed}

    def site_payload(self) -> dict:
        """The layer itself, so that the page computes every map, typed sentences included (``site/views.js``).

        ``W_Q``, ``W_K`` (d_model, d_model, vectors-as-rows) and their biases, written exactly (float32 values as
        shortest decimals); the message this module gives for each head count the layer refuses; and the start.
        """
        layer = _layer(self.d_model, 1, self.seed)  # the same projections for every head count

        def exact(tensor: torch.Tensor) -> list:
            return tensor.detach().double().tolist()

        refusals = {}
        for heads in range(1, self.max_heads + 1):
            try:
                _layer(self.d_model, heads, self.seed)
            except ValueError as problem:
                refusals[str(heads)] = problem_html(problem, self.doing)
        return {"kind": "head-explorer", "d_model": self.d_model, "seed": self.seed, "max_heads": self.max_heads,
                "max_tokens": MAX_TOKENS, "sentence": self.sentence_box.value, "heads": self.heads_slider.value,
                "head": self.head_slider.value, "W_Q": exact(layer.W_Q), "b_Q": exact(layer.b_Q),
                "W_K": exact(layer.W_K), "b_K": exact(layer.b_K), "refusals": refusals}
