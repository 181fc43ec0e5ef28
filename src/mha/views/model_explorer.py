"""The pretrained model's heads (chapter 3, "Empirical head roles"): pick a layer, a head and a sentence, see the map.

It shows the heads of the pretrained all-MiniLM-L6-v2 (:mod:`mha.pretrained.encoder`),
token by token or merged into words (:mod:`mha.pretrained.word_maps`). Rows attend *from*,
columns are attended *to*. Any text the model takes (up to its 512 tokens) is drawn; a map of more than
:data:`MAX_VIEW_TOKENS` units is drawn a window of that many queries and keys at a time, moved by two sliders
under the view, as the website does (``web/views/map_window.js``). A typed sentence that is empty, longer than the
model takes or holds a broken character gets a message saying what to change
(any other error is shown as a message too), and the last good map stays on
screen; typed text is HTML-escaped before it is shown. The maps of the last
:data:`CACHED_SENTENCES` sentences are kept, so going back to one is instant.
"""

from __future__ import annotations

import functools
import html
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from ipywidgets import HTML, Checkbox, Dropdown, IntSlider, Layout, Text, Widget

from mha.analysis.head_roles.score_spread import treebank_score_spread
from mha.book import head_label
from mha.core.layouts import QUERY_KEY, takes_attention
from mha.core.validation import InputError, as_real_array, check_items, check_whole_number
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.word_maps import word_attention, word_strings
from mha.views.contract import OPENINGS, ExplorerView
from mha.views.explorer import Explorer
from mha.views.heatmaps import AttentionMap

__all__ = ["MAX_VIEW_TOKENS", "CACHED_SENTENCES", "sentence_attention", "strongest_link", "map_window",
           "ModelHeadExplorer"]

MAX_VIEW_TOKENS = 40
"""Most units (tokens or words, [CLS] and [SEP] included) a map draws at once, so that its labels stay legible: a
longer map is drawn a window of this many queries and keys at a time. The model itself takes up to 512 tokens."""

CACHED_SENTENCES = 16
"""How many (sentence, word level) maps a :class:`ModelHeadExplorer` keeps; the least recently shown goes first."""

TYPE_YOUR_OWN = "(type your own below)"


def sentence_attention(encoder: MiniLMEncoder, sentence: str, *,
                       word_level: bool = False) -> tuple[list[str], np.ndarray]:
    """Labels and every head's weights (layers, heads, n, n) for one sentence, tokens or words.

    Word level merges word pieces (received attention summed, sent attention
    averaged; [CLS] and [SEP] kept as units of their own, so rows still sum to 1).
    A sentence longer than the model's positions (512 tokens) is refused by its tokenizer, before the model runs.
    """
    encoder = check_encoder(encoder)
    if not isinstance(sentence, str):
        raise ValueError(f"the sentence must be text (str), got {type(sentence).__name__}.")
    if not sentence.strip():
        raise ValueError("the sentence is empty: type a few words, e.g. 'The keys to the cabinet are on the table.'")
    traced = encoder.trace(sentence).sentence()
    if not word_level:
        return list(traced.tokens), traced.attention
    labels = word_strings(traced.tokens, traced.word_ids, keep_special=True)
    return labels, word_attention(traced.attention, traced.word_ids, keep_special=True)


@takes_attention(weights=QUERY_KEY)
def strongest_link(weights: np.ndarray) -> tuple[int, int] | None:
    """The (query, key) pair of two different units with the largest weight, [CLS] and [SEP] left out.

    ``weights`` is one head's map (n, n) whose first and last units are
    [CLS] and [SEP]; indices count those too. ``None`` when fewer than two
    units lie between them, so that no link between two different ones exists.
    """
    weights = as_real_array("weights", weights, meaning="one head's map (n, n)")
    if weights.ndim != 2:
        raise InputError(f"weights has shape {weights.shape}; it should be one head's map (n, n).")
    between = weights[1:-1, 1:-1].copy()  # (n - 2, n - 2): without [CLS] and [SEP]; the caller's map stays
    if between.shape[0] < 2:
        return None
    np.fill_diagonal(between, -np.inf)  # a unit attending to itself is not a link
    query, key = np.unravel_index(np.argmax(between), between.shape)
    return int(query) + 1, int(key) + 1


@takes_attention(weights=QUERY_KEY)
def map_window(weights: np.ndarray, labels: Sequence[str], first_query: int, first_key: int, *, title: str = "",
               size: int = MAX_VIEW_TOKENS) -> tuple[AttentionMap, str]:
    """The part of one head's map (n, n) that a view draws: ``size`` queries from ``first_query`` and ``size`` keys
    from ``first_key`` (both kept inside the map), each label numbered by its position, and a sentence that says
    which part is shown; the whole map and "" when it fits (n <= size)."""
    n = len(labels)
    if n <= size:
        return AttentionMap(weights, labels, title=title), ""
    row, column = (min(max(int(first), 0), n - size) for first in (first_query, first_key))
    numbered = [f"{index} {label}" for index, label in enumerate(labels)]
    window = AttentionMap(weights[row:row + size, column:column + size], numbered[row:row + size],
                          numbered[column:column + size], title=title)  # (size, size)
    return window, (f" The map has {n} rows and columns; shown: queries {row} to {row + size - 1} and keys {column} "
                    f"to {column + size - 1}, each cell its exact weight. Move the window with the sliders under "
                    "the view.")


@functools.lru_cache(maxsize=2)
def _treebank_spread(encoder: MiniLMEncoder) -> dict:
    """The score spread of ``encoder``, computed once per encoder (every chapter-3 view of a build shares one)."""
    return treebank_score_spread(encoder)


EXAMPLE_LENGTHS = (8, 30)
"""The treebank sentences a view offers as a head's examples: from 8 to 30 tokens ([CLS] and [SEP] included), long
enough to show a pattern and short enough to read whole as a map, and with at least :data:`EXAMPLE_WORDS` words
that hold a letter (not a line of underscores or a list of numbers)."""

EXAMPLE_WORDS = 5

EXAMPLE_SCORES = {"on the previous token": "content_prev_token_share", "on [CLS]": "cls_share",
                  "on the token itself": "content_same_token_share", "on punctuation": "punct_share"}
"""The role scores a view finds a head's examples by: the scores panel's name -> the stored per-sentence share."""


@functools.lru_cache(maxsize=1)
def _treebank_examples() -> dict:
    """For every head, the UD English-EWT dev sentence (of :data:`EXAMPLE_LENGTHS`) where each score of
    :data:`EXAMPLE_SCORES` is highest and lowest, from the shares stored per sentence
    (:func:`~mha.analysis.head_roles.treebank_heads.load_treebank_sentence_shares`; chapter 3, "A tour of all 72
    heads"). Returns {source, texts: the sentences named, scores: {name: {highest, lowest: (layers * heads) indices
    into texts, head by head, highest_values, lowest_values: the scores in hundredths}}}."""
    from mha.analysis.head_roles.treebank_heads import load_treebank_sentence_shares
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu

    shares = load_treebank_sentence_shares()
    treebank = read_conllu(EWT_DEV_PATH)
    low, high = EXAMPLE_LENGTHS
    worded = np.array([sum(any(c.isalpha() for c in word) for word in sentence.words) >= EXAMPLE_WORDS
                       for sentence in treebank])  # (sentences,)
    eligible = (shares["tokens"] >= low) & (shares["tokens"] <= high) & worded  # (sentences,)
    found = {}
    for name, key in EXAMPLE_SCORES.items():
        per_head = shares[key].reshape(len(eligible), -1).copy()  # (sentences, layers * heads)
        per_head[~eligible] = np.nan
        found[name] = (np.nanargmax(per_head, axis=0), np.nanargmin(per_head, axis=0), per_head)
    named = sorted({int(i) for highest, lowest, _ in found.values() for i in (*highest, *lowest)})
    position = {sentence: index for index, sentence in enumerate(named)}
    heads = np.arange(next(iter(found.values()))[2].shape[1])

    def hundredths(values: np.ndarray) -> list[int]:
        return [int(v) for v in np.rint(values * 100)]

    return {"source": f"UD English-EWT (dev split): the {int(eligible.sum())} of its {len(eligible)} sentences with "
                      f"{low} to {high} tokens and {EXAMPLE_WORDS} words or more",
            "texts": [" ".join(treebank[i].words) for i in named],
            "scores": {name: {"highest": [position[int(i)] for i in highest],
                              "lowest": [position[int(i)] for i in lowest],
                              "highest_values": hundredths(per_head[highest, heads]),
                              "lowest_values": hundredths(per_head[lowest, heads])}
                       for name, (highest, lowest, per_head) in found.items()}}


class ModelHeadExplorer(Explorer):
    """Widgets to pick a layer, a head and a sentence of all-MiniLM-L6-v2 and see that head's map.

    ``sentences`` fill the menu; the reader can also type one, which switches the menu to
    :data:`TYPE_YOUR_OWN`. ``what_to_try`` and ``what_to_notice`` replace the general guidance with a page's own,
    and ``opening`` says whether the view first shows one map or every head (:data:`~mha.views.contract.OPENINGS`).
    The rest is :class:`~mha.views.explorer.Explorer`'s. Used in (chapter 3, "A tour of all 72 heads"), (chapter 3,
    "Syntax: heads that follow grammatical relations"), (chapter 3, "Coreference, honestly") and (chapter 3, "Content
    and rare words").
    """

    what_to_try = ("Step through the layers and heads on one sentence, then the other sentences of the menu, then "
                   "type your own; tick \"merge word pieces into words\" to read the map word by word.")
    what_to_notice = ("How much of each row goes to [CLS] and [SEP] (the message gives both shares), and which few "
                      "heads link two different words: the strongest link is named under the controls. A bright "
                      "cell says where a head looks, not what the model does with it.")

    site_note = ("On the website, a sentence you type runs through the model in your page, from weights that load "
                 "the first time you press Enter (the note above the map gives their size); nothing leaves your "
                 "computer. The stored sentences are the package's own maps, computed when the site was built.")

    def __init__(self, sentences: Sequence[str], *, layer: int = 0, head: int = 0, word_level: bool = False,
                 encoder: MiniLMEncoder | None = None, what_to_try: str | None = None,
                 what_to_notice: str | None = None, opening: str = "map") -> None:
        if not check_items("sentences", sentences, "a list of sentences for the menu"):
            raise ValueError("give at least one sentence for the menu.")
        self.own_guidance = {"what_to_try": what_to_try, "what_to_notice": what_to_notice}
        for name, text in self.own_guidance.items():  # each page says what to try and notice on its own sentences
            if text is not None:
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"{name} is the text shown above the view: give a sentence, got {text!r}.")
                setattr(self, name, text)
        if opening not in OPENINGS:
            raise ValueError(f"opening is how the view first shows: one of {', '.join(OPENINGS)}, got {opening!r}.")
        self.opening = opening
        self.menu_sentences = list(sentences)
        self.encoder = encoder or MiniLMEncoder.load()
        n_layers, n_heads = self.encoder.config.n_layers, self.encoder.config.n_heads
        self.cache_size = CACHED_SENTENCES
        self._cache: OrderedDict[tuple[str, bool], tuple[list[str], np.ndarray]] = OrderedDict()
        self.sentence_menu = Dropdown(options=[*sentences, TYPE_YOUR_OWN], value=sentences[0], description="sentence",
                                      layout=Layout(width="95%"))
        self.own_sentence = Text(placeholder="type a sentence, then press Enter", continuous_update=False,
                                 description="your own", layout=Layout(width="95%"))
        self.layer_slider = IntSlider(value=layer, min=0, max=n_layers - 1, description="layer")
        self.head_slider = IntSlider(value=head, min=0, max=n_heads - 1, description="head")
        self.word_level = Checkbox(value=word_level, description="merge word pieces into words")
        self.typed_sentences: list[str] = []
        """Sentences typed in the kernel, added to the view's menu."""
        self.typing_problem = HTML()
        self.window_sliders = {name: IntSlider(value=0, min=0, max=0, description=label, continuous_update=False,
                                               layout=Layout(display="none"))
                               for name, label in (("query", "queries from"), ("key", "keys from"))}
        """The first query (row) and key (column) of the window drawn on a map of more than MAX_VIEW_TOKENS units."""
        self._token_counts: dict[str, int] = {}
        for slider in self.window_sliders.values():
            slider.observe(self._window_moved, names="value")
        super().__init__({"sentence": self.sentence_menu, "typed": self.own_sentence, "layer": self.layer_slider,
                          "head": self.head_slider, "word_level": self.word_level})
        self._fit_window()

    def _control_moved(self, name: str) -> None:
        if name == "typed" and self.sentence_menu.value != TYPE_YOUR_OWN:
            with self.quietly():
                self.sentence_menu.value = TYPE_YOUR_OWN
        ok = self.refresh()
        if ok:
            self._fit_window()
        if name == "typed":
            self.typing_problem.value = "" if ok else self.message.value
            typed = self.own_sentence.value
            if ok and typed not in self.menu_sentences + self.typed_sentences:
                self.typed_sentences.append(typed)
            if ok:
                self.publish()

    def _fit_window(self) -> None:
        """Give the window sliders the reach of the longest map the view's menu holds (in Jupyter, views.js moves
        between its sentences without the kernel), and show them only when it is larger than the window (a slider
        that can no longer reach its value is moved back, quietly). Words are never more than tokens."""
        for sentence in {self.sentence, *self.menu_sentences, *self.typed_sentences} - self._token_counts.keys():
            self._token_counts[sentence] = len(self.encoder.tokenize(sentence).tokens[0])  # the tokenizer alone
        units = max(self._token_counts[sentence]
                    for sentence in {self.sentence, *self.menu_sentences, *self.typed_sentences})
        with self.quietly():
            for slider in self.window_sliders.values():
                slider.max = max(units - MAX_VIEW_TOKENS, 0)
                slider.layout.display = None if units > MAX_VIEW_TOKENS else "none"

    def _window_moved(self, change) -> None:
        if not self._quiet and self.refresh():
            self.publish()

    def kernel_widgets(self) -> list[Widget]:
        """A box to type a sentence (the kernel runs the model on it and adds it to the view's menu), and the
        sliders that move the window over a long map."""
        return [self.own_sentence, self.typing_problem, *self.window_sliders.values()]

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

    def view_data(self, *, sentence: str, typed: str, layer: int, head: int, word_level: bool) -> ExplorerView:
        """Head ``head`` of ``layer`` on the menu's ``sentence`` (or on ``typed`` when the menu says to type one)."""
        unit = "words" if word_level else "tokens"
        config = self.encoder.config
        layer = check_whole_number("layer", layer, minimum=0, maximum=config.n_layers - 1, meaning="counted from 0")
        head = check_whole_number("head", head, minimum=0, maximum=config.n_heads - 1, meaning="counted from 0")
        labels, attention = self._attention(typed if sentence == TYPE_YOUR_OWN else sentence, word_level)
        weights = attention[layer, head]  # (n, n)
        link = strongest_link(weights)
        if link is None:
            link_text = (f"There is only one {unit[:-1]} between [CLS] and [SEP], so no link between two different "
                         f"{unit}; type a longer sentence to see one.")
        else:
            link_text = (f"Strongest link between two different {unit}: <code>{html.escape(labels[link[0]])}</code> → "
                         f"<code>{html.escape(labels[link[1]])}</code>.")
        drawn, window_text = map_window(weights, labels, self.window_sliders["query"].value,
                                        self.window_sliders["key"].value, title=head_label(layer, head))
        message = (
            f"{head_label(layer, head)}: {len(labels)} {unit}; "
            f"attention to [CLS] {weights[:, 0].mean():.0%}, to [SEP] {weights[:, -1].mean():.0%} (mean over rows). "
            + link_text + window_text
        )
        return ExplorerView(message, drawn)

    def _state(self) -> dict[str, object]:
        return {"sentence": self.sentence, "layer": self.layer_slider.value, "head": self.head_slider.value}

    def recipe_arguments(self) -> dict:
        given = {name: text for name, text in self.own_guidance.items() if text is not None}
        opening = {} if self.opening == "map" else {"opening": self.opening}
        return {"sentences": self.menu_sentences, "layer": self.layer_slider.value, "head": self.head_slider.value,
                "word_level": self.word_level.value, **given, **opening}

    def site_choices(self) -> dict[str, list]:
        choices = self.choices()
        choices["sentence"] = self.menu_sentences + self.typed_sentences
        return choices

    def site_values(self) -> dict[str, object]:
        return {**self.values(), "sentence": self.sentence}

    def page_model(self) -> dict:
        """The website runs all-MiniLM-L6-v2 in the page on a typed sentence of up to the model's 512 tokens; it
        needs the most units a map draws at once (``max_tokens``: a longer map is drawn a window of that many
        queries and keys at a time) and, to read the sentence's scores against, their spread over treebank
        sentences (:func:`~mha.analysis.head_roles.score_spread.treebank_score_spread`); and, for "find where a head
        does this", each head's treebank sentences with its highest and lowest scores (:func:`_treebank_examples`)."""
        return {"max_tokens": MAX_VIEW_TOKENS, "spread": _treebank_spread(self.encoder),
                "examples": _treebank_examples()}

    def site_arguments(self, values: dict[str, object]) -> dict[str, object]:
        # every sentence of the payload's menu (typed ones too) is read by its text, whatever it says
        return {**values, "sentence": TYPE_YOUR_OWN, "typed": values["sentence"]}
