"""The interactive view of chapter 3: pick a layer, a head and a sentence (or type one) and see that head's map.

It shows the heads of the pretrained all-MiniLM-L6-v2 (:mod:`mha.encoder`),
token by token or merged into words (:mod:`mha.words`). Rows attend *from*,
columns are attended *to*. A typed sentence that is empty, too long to read
as a map or holds a broken character gets a message saying what to change
(any other error is shown as a message too), and the last good map stays on
screen; typed text is HTML-escaped before it is shown. The maps of the last
:data:`CACHED_SENTENCES` sentences are kept, so going back to one is instant.
"""

from __future__ import annotations

import html
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from ipywidgets import HTML, Checkbox, Dropdown, Image, IntSlider, Layout, Text, VBox

from .encoder import MiniLMEncoder
from .head_explorer import problem_html
from .heatmaps import AttentionPNG
from .words import word_attention, word_strings

__all__ = ["MAX_VIEW_TOKENS", "CACHED_SENTENCES", "sentence_attention", "strongest_link", "ModelHeadExplorer"]

MAX_VIEW_TOKENS = 40
"""Longest sentence (in wordpiece tokens, [CLS] and [SEP] included) the view draws; the model accepts 512."""

CACHED_SENTENCES = 16
"""How many (sentence, word level) maps a :class:`ModelHeadExplorer` keeps; the least recently shown goes first."""

TYPE_YOUR_OWN = "(type your own below)"


def sentence_attention(encoder: MiniLMEncoder, sentence: str, *, word_level: bool = False,
                       max_tokens: int = MAX_VIEW_TOKENS) -> tuple[list[str], np.ndarray]:
    """Labels and every head's weights (layers, heads, n, n) for one sentence, tokens or words.

    Word level merges word pieces (received attention summed, sent attention
    averaged; [CLS] and [SEP] kept as units of their own, so rows still sum to 1).
    """
    if not isinstance(sentence, str):
        raise ValueError(f"the sentence must be text (str), got {type(sentence).__name__}.")
    if not sentence.strip():
        raise ValueError("the sentence is empty: type a few words, e.g. 'The keys to the cabinet are on the table.'")
    traced = encoder.trace(sentence).sentence()
    if len(traced.tokens) > max_tokens:
        raise ValueError(
            f"the sentence has {len(traced.tokens)} tokens with [CLS] and [SEP]; a map of more than {max_tokens} "
            f"cannot be read. Shorten it (the model itself accepts up to 512 tokens)."
        )
    if not word_level:
        return list(traced.tokens), traced.attention
    labels = word_strings(traced.tokens, traced.word_ids, keep_special=True)
    return labels, word_attention(traced.attention, traced.word_ids, keep_special=True)


def strongest_link(weights: np.ndarray) -> tuple[int, int] | None:
    """The (query, key) pair of two different units with the largest weight, [CLS] and [SEP] left out.

    ``weights`` is one head's map (n, n) whose first and last units are
    [CLS] and [SEP]; indices count those too. ``None`` when fewer than two
    units lie between them, so that no link between two different ones exists.
    """
    between = np.array(weights, dtype=float)[1:-1, 1:-1]  # (n - 2, n - 2): without [CLS] and [SEP]
    if between.shape[0] < 2:
        return None
    np.fill_diagonal(between, -np.inf)  # a unit attending to itself is not a link
    query, key = np.unravel_index(np.argmax(between), between.shape)
    return int(query) + 1, int(key) + 1


class ModelHeadExplorer:
    """Widgets to pick a layer, a head and a sentence of all-MiniLM-L6-v2 and see that head's map (chapter 3).

    ``sentences`` fill the menu; the reader can also type one. Display the
    explorer as the last expression of a cell. ``refresh()`` redraws and
    returns whether the input was valid; ``last_refresh_seconds`` is the time
    the last update took.
    """

    def __init__(self, sentences: Sequence[str], *, layer: int = 0, head: int = 0, word_level: bool = False,
                 encoder: MiniLMEncoder | None = None) -> None:
        if not sentences:
            raise ValueError("give at least one sentence for the menu.")
        self.encoder = encoder or MiniLMEncoder.load()
        n_layers, n_heads = self.encoder.config.n_layers, self.encoder.config.n_heads
        self.sentence_menu = Dropdown(options=[*sentences, TYPE_YOUR_OWN], value=sentences[0], description="sentence",
                                      layout=Layout(width="95%"))
        self.own_sentence = Text(placeholder="type a sentence, then press Enter", continuous_update=False,
                                 description="your own", layout=Layout(width="95%"))
        self.layer_slider = IntSlider(value=layer, min=0, max=n_layers - 1, description="layer")
        self.head_slider = IntSlider(value=head, min=0, max=n_heads - 1, description="head")
        self.word_level = Checkbox(value=word_level, description="merge word pieces into words")
        self.message = HTML()
        self.image = Image(format="png")
        self.widget = VBox([self.sentence_menu, self.own_sentence, self.layer_slider, self.head_slider,
                            self.word_level, self.message, self.image])
        self.last_refresh_seconds = 0.0
        self._canvas = AttentionPNG(size=(5.4, 5.0))
        self.cache_size = CACHED_SENTENCES
        self._cache: OrderedDict[tuple[str, bool], tuple[list[str], np.ndarray]] = OrderedDict()
        self.own_sentence.observe(self._typed, names="value")
        for control in (self.sentence_menu, self.layer_slider, self.head_slider, self.word_level):
            control.observe(lambda change: self.refresh(), names="value")
        self.refresh()

    def _typed(self, change) -> None:
        if self.sentence_menu.value != TYPE_YOUR_OWN:
            self.sentence_menu.value = TYPE_YOUR_OWN  # triggers refresh
        else:
            self.refresh()

    @property
    def sentence(self) -> str:
        """The sentence currently shown: the menu's choice, or what the reader typed."""
        return self.own_sentence.value if self.sentence_menu.value == TYPE_YOUR_OWN else self.sentence_menu.value

    def _attention(self, sentence: str, word_level: bool) -> tuple[list[str], np.ndarray]:
        """Labels and weights of one sentence, from a small least-recently-used cache (typed sentences add up)."""
        key = (sentence, word_level)
        if key in self._cache:
            self._cache.move_to_end(key)
        else:
            self._cache[key] = sentence_attention(self.encoder, sentence, word_level=word_level)
            while len(self._cache) > max(self.cache_size, 1):
                self._cache.popitem(last=False)
        return self._cache[key]

    def refresh(self) -> bool:
        """Redraw for the current controls; on bad input say why and keep the last good map."""
        start = time.perf_counter()
        unit = "words" if self.word_level.value else "tokens"
        try:
            labels, attention = self._attention(self.sentence, self.word_level.value)
            layer, head = self.layer_slider.value, self.head_slider.value
            weights = attention[layer, head]
            image = self._canvas.render(weights, labels, f"layer {layer}, head {head}")
        except Exception as problem:  # whatever the reader typed, the view answers with a message
            self.message.value = problem_html(problem)
            self.last_refresh_seconds = time.perf_counter() - start
            return False
        link = strongest_link(weights)
        if link is None:
            link_text = (f"There is only one {unit[:-1]} between [CLS] and [SEP], so no link between two different "
                         f"{unit}; type a longer sentence to see one.")
        else:
            link_text = (f"Strongest link between two different {unit}: <code>{html.escape(labels[link[0]])}</code> → "
                         f"<code>{html.escape(labels[link[1]])}</code>.")
        self.message.value = (
            f"layer {layer}, head {head}: {len(labels)} {unit}; "
            f"attention to [CLS] {weights[:, 0].mean():.0%}, to [SEP] {weights[:, -1].mean():.0%} (mean over rows). "
            + link_text
        )
        self.image.value = image
        self.last_refresh_seconds = time.perf_counter() - start
        return True

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = (f"ModelHeadExplorer(sentence={self.sentence!r}, layer={self.layer_slider.value}, "
                                f"head={self.head_slider.value}): run the notebook to use it.")
        return bundle
