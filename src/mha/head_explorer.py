"""The interactive head explorer of chapter 1: type a sentence, choose the number of heads and a head.

The model is one :class:`~mha.attention.MultiHeadAttention` layer with random
weights over :mod:`mha.toy_sentences` vectors. For a fixed ``d_model`` and
seed the projection matrices are the same whatever the head count, so moving
the head-count slider changes only how the features are cut into heads, which
is exactly the point the chapter makes. Bad input (a head count that does not
divide ``d_model``, an empty or over-long sentence, a broken character) shows
a message and keeps the last good map on screen; text the reader typed is
HTML-escaped before it is shown. :func:`problem_html` is how every view of the
book shows such a message, for an unexpected error too, never a traceback.
"""

from __future__ import annotations

import html
import time
from functools import lru_cache

import numpy as np
import torch
from ipywidgets import HTML, Image, IntSlider, Layout, Text, VBox

from .attention import MultiHeadAttention
from .heatmaps import AttentionPNG
from .tokenization import check_no_lone_surrogates
from .toy_sentences import embed_tokens, split_into_tokens

__all__ = ["problem_html", "head_attention_maps", "HeadExplorer"]

DEFAULT_SENTENCE = "The animal did not cross the street because it was too tired ."


def problem_html(problem: BaseException, doing: str = "draw") -> str:
    """What a view shows instead of a traceback: the problem, HTML-escaped, under "Cannot <doing> this:".

    A ``ValueError`` is bad input and its message says what to change; any
    other exception is reported as unexpected, with its type, so the view
    keeps working (and keeps its last good picture) whatever the reader types.
    """
    if isinstance(problem, ValueError):
        text = str(problem)
    else:
        text = (f"an unexpected {type(problem).__name__} ({problem}). The last good view stays on screen; "
                "try other input, and please report this.")
    return f"<b style='color:#b35806'>Cannot {html.escape(doing)} this:</b> {html.escape(text)}"


@lru_cache(maxsize=32)
def _layer(d_model: int, n_heads: int, seed: int) -> MultiHeadAttention:
    return MultiHeadAttention(d_model, n_heads, seed=seed).eval()


def head_attention_maps(sentence: str, n_heads: int, d_model: int = 24, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Tokens of ``sentence`` and every head's attention weights (heads, seq, seq) from a random layer.

    Raises ``ValueError`` (with the fix) for a head count that does not divide
    ``d_model`` and for an empty, over-long or non-text sentence, or one with a
    broken character (a lone surrogate, see :func:`mha.tokenization.check_no_lone_surrogates`).
    """
    layer = _layer(d_model, n_heads, seed)  # validates the head count first
    if isinstance(sentence, str):
        check_no_lone_surrogates(sentence, "the sentence")
    tokens = split_into_tokens(sentence)
    with torch.no_grad():
        weights = layer(embed_tokens(tokens, d_model, seed=seed)).weights[0]  # (heads, seq, seq)
    return tokens, weights.numpy()


class HeadExplorer:
    """Widgets to pick a sentence, a head count and a head, and see that head's attention map.

    Display it as the last expression of a cell. ``refresh()`` recomputes the
    view and returns whether the input was valid; ``last_refresh_seconds``
    says how long the last update took (the book's budget is 0.1 s).
    """

    def __init__(self, sentence: str = DEFAULT_SENTENCE, n_heads: int = 4, d_model: int = 24,
                 max_heads: int = 12, seed: int = 0) -> None:
        self.d_model, self.seed = d_model, seed
        self.sentence_box = Text(value=sentence, description="sentence", continuous_update=False,
                                 layout=Layout(width="95%"))
        self.heads_slider = IntSlider(value=n_heads, min=1, max=max_heads, description="heads")
        self.head_slider = IntSlider(value=0, min=0, max=max(n_heads - 1, 0), description="head shown")
        self.message = HTML()
        self.image = Image(format="png")
        self.widget = VBox([self.sentence_box, self.heads_slider, self.head_slider, self.message, self.image])
        self.last_refresh_seconds = 0.0
        self._canvas = AttentionPNG()
        for control in (self.sentence_box, self.heads_slider, self.head_slider):
            control.observe(lambda change: self.refresh(), names="value")
        self.refresh()

    def refresh(self) -> bool:
        """Redraw for the current controls; on bad input show why and keep the last good map."""
        start = time.perf_counter()
        n_heads = self.heads_slider.value
        try:
            tokens, weights = head_attention_maps(self.sentence_box.value, n_heads, self.d_model, self.seed)
            if self.head_slider.max != n_heads - 1:
                with self.head_slider.hold_trait_notifications():
                    self.head_slider.value = min(self.head_slider.value, n_heads - 1)
                    self.head_slider.max = n_heads - 1
            head = self.head_slider.value
            d_head = self.d_model // n_heads
            image = self._canvas.render(weights[head], tokens, f"head {head} of {n_heads} (d_head = {d_head})")
        except Exception as problem:  # whatever the reader typed, the view answers with a message
            self.message.value = problem_html(problem)
            self.last_refresh_seconds = time.perf_counter() - start
            return False
        self.message.value = (
            f"{n_heads} head{'s' if n_heads > 1 else ''} × d_head = {d_head} features each "
            f"(d_model = {self.d_model}); showing head {head}. Tokens: "
            f"<code>{html.escape(' | '.join(tokens))}</code>"
        )
        self.image.value = image
        self.last_refresh_seconds = time.perf_counter() - start
        return True

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        # Shown where widgets cannot run (a static page, a terminal): say what this is.
        bundle["text/plain"] = (f"HeadExplorer(sentence={self.sentence_box.value!r}, heads={self.heads_slider.value}, "
                                f"head={self.head_slider.value}, d_model={self.d_model}): run the notebook to use it.")
        return bundle
