"""The interactive view of the lab's induction models (chapter 3, heads are not preassigned).

Pick a trained model (one per seed), a layer, a head and a held-out sequence
(a repeat period never seen in training), or type a sequence of token ids,
and see that head's attention map next to its scores: previous-token and
prefix-matching on this sequence and on the whole held-out batch, copying,
its role by :data:`mha.induction_roles.ROLE_THRESHOLD`, and its K-composition
with the heads of the neighbouring layer. Rows attend *from*, columns are
attended *to*. Everything the view can show is computed when it is built, so
an update only runs one short sequence through the model and draws one map
(the book's budget is 0.1 s). Typed sequences that are not token ids, fall
outside the vocabulary or do not fit the model get a message that says what
to change (any other error is shown as a message too), the last good map stays
on screen, and typed text is HTML-escaped before it is shown.
"""

from __future__ import annotations

import html
import io
import re
import time
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from ipywidgets import HTML, Dropdown, Image, IntSlider, Layout, Text, VBox
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from PIL import Image as PILImage

from .checkpoints import checkpoint_names, load_checkpoint
from .circuit_scores import (composition_score_baseline, head_role_scores, k_composition_scores,
                             prefix_matching_score, previous_token_score)
from .head_explorer import problem_html
from .heatmaps import COLORMAP
from .induction_roles import ROLE_THRESHOLD, held_out_batch, role_labels

__all__ = ["induction_model_names", "parse_token_ids", "prefix_matching_keys", "InductionLabExplorer"]

_SEED_NAME = re.compile(r"^induction_2layer_seed(\d+)$")


def induction_model_names() -> list[str]:
    """The final 2-layer induction checkpoints in ``data/lab``, one per seed, in seed order."""
    found = [(int(match.group(1)), name) for name in checkpoint_names() if (match := _SEED_NAME.match(name))]
    return [name for _, name in sorted(found)]


def _shortened(piece: str, keep: int = 24) -> str:
    return piece if len(piece) <= keep else f"{piece[:keep]}..."


def parse_token_ids(text: str, vocab_size: int, max_len: int) -> list[int]:
    """Token ids typed as whole numbers separated by spaces or commas; ``ValueError`` saying what to fix.

    Ids must lie in ``0 .. vocab_size - 1`` and there must be 2 to
    ``max_len`` of them (a map needs two positions; the model has positional
    embeddings for ``max_len``).
    """
    if not isinstance(text, str):
        raise ValueError(f"type the tokens as text, got {type(text).__name__}.")
    pieces = [piece for piece in re.split(r"[\s,]+", text.strip()) if piece]
    not_ids = [piece for piece in pieces if not re.fullmatch(r"[0-9]+", piece)]
    if not_ids:
        raise ValueError(f"{_shortened(not_ids[0])!r} is not a token id: type whole numbers from 0 to "
                         f"{vocab_size - 1} (digits 0-9) separated by spaces, e.g. 5 17 42 8 5 17 42.")
    # a huge number is outside the vocabulary before it is converted (int() refuses over 4,300 digits)
    outside = [piece for piece in pieces if len(piece.lstrip("0")) > len(str(vocab_size)) or int(piece) >= vocab_size]
    if outside:
        raise ValueError(f"token id {_shortened(outside[0])} is outside the vocabulary: the ids are 0 to "
                         f"{vocab_size - 1}.")
    ids = [int(piece) for piece in pieces]
    if len(ids) < 2:
        raise ValueError(f"type at least 2 token ids (got {len(ids)}): a map needs two positions.")
    if len(ids) > max_len:
        raise ValueError(f"that is {len(ids)} tokens, but the model has positions for {max_len}; remove "
                         f"{len(ids) - max_len}.")
    return ids


def prefix_matching_keys(tokens: Sequence[int]) -> list[tuple[int, int]]:
    """(query, key) pairs where key ``j + 1`` follows an earlier copy ``j < i`` of query ``i``'s token.

    These are the keys an induction head attends to (Olsson et al. 2022), the
    same ones :func:`mha.circuit_scores.prefix_matching_score` scores.
    """
    tokens = list(tokens)
    return [(i, j + 1) for i in range(len(tokens)) for j in range(i) if tokens[j] == tokens[i]]


class _MapCanvas:
    """Draws one (seq, seq) map to PNG in a few milliseconds by redrawing only what changes (blitting).

    The axes, ticks, labels and colorbar are drawn once per sequence length
    and kept as a background; an update restores it and draws the heatmap,
    the circles on the prefix-matching keys and the title on top.
    """

    def __init__(self, size: tuple[float, float] = (5.4, 4.8), dpi: int = 72) -> None:
        self.figure = Figure(figsize=size, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        self.figure.subplots_adjust(left=0.14, bottom=0.13, right=0.98, top=0.92)
        self.axes = self.figure.subplots()
        self.image = self.axes.imshow(np.zeros((2, 2)), cmap=COLORMAP, vmin=0.0, vmax=1.0, aspect="equal",
                                      interpolation="nearest", animated=True)
        self.figure.colorbar(ScalarMappable(norm=Normalize(0.0, 1.0), cmap=COLORMAP), ax=self.axes, shrink=0.8,
                             label="attention weight")
        self.axes.set_xlabel("key: position attended to", fontsize=9)
        self.axes.set_ylabel("query: position attending from", fontsize=9)
        # a white ring on a black ring: visible on the dark and the bright end of the colormap alike
        self.circles = [self.axes.scatter([], [], s=18, facecolors="none", edgecolors=colour, linewidths=width,
                                          animated=True) for colour, width in (("black", 2.2), ("white", 0.9))]
        self.title = self.axes.set_title("", fontsize=9)
        self.title.set_animated(True)
        self._seq = None
        self._background = None

    def _prepare(self, seq: int) -> None:
        """Set limits and ticks for ``seq`` positions, draw the static parts, keep them as the background."""
        self.image.set_extent((-0.5, seq - 0.5, seq - 0.5, -0.5))
        self.axes.set_xlim(-0.5, seq - 0.5)
        self.axes.set_ylim(seq - 0.5, -0.5)
        step = 5 if seq > 12 else 1
        self.axes.set_xticks(range(0, seq, step))
        self.axes.set_yticks(range(0, seq, step))
        self.canvas.draw()
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._seq = seq

    def render(self, weights: np.ndarray, marked: Sequence[tuple[int, int]], title: str) -> bytes:
        """PNG bytes of ``weights`` (seq, seq), with open circles on the ``marked`` (query, key) cells."""
        seq = weights.shape[0]
        if seq != self._seq:
            self._prepare(seq)
        self.canvas.restore_region(self._background)
        self.image.set_data(weights)
        centres = np.array([(key, query) for query, key in marked], dtype=float).reshape(-1, 2)  # (n, xy)
        for circles in self.circles:
            circles.set_offsets(centres)
        self.title.set_text(title)
        for artist in (self.image, *self.circles, self.title):
            self.figure.draw_artist(artist)
        pixels = np.asarray(self.canvas.buffer_rgba())[..., :3]  # (height, width, RGB)
        buffer = io.BytesIO()
        PILImage.fromarray(pixels).save(buffer, format="png", compress_level=1)
        return buffer.getvalue()


@lru_cache(maxsize=8)
def _baseline(d_model: int, d_head: int) -> float:
    return composition_score_baseline(d_model, d_head)


class _ModelView:
    """Everything the explorer shows about one model that does not depend on the chosen sequence."""

    def __init__(self, name: str, batch) -> None:
        self.model, self.info = load_checkpoint(name)
        n_layers = self.info.config.n_layers
        self.label = f"seed {self.info.seed}" + ("" if n_layers == 2 else f" ({n_layers}-layer model)")
        self.scores = head_role_scores(self.model, batch.inputs, batch.details["repeat_mask"])  # each (layers, heads)
        self.roles = role_labels(self.scores, ROLE_THRESHOLD)  # layers x heads
        self.k_composition = [k_composition_scores(self.model, layer, layer + 1)
                              for layer in range(n_layers - 1)]  # each (heads of layer, heads of layer + 1)
        self.baseline = _baseline(self.info.config.d_model, self.info.config.d_head)


class InductionLabExplorer:
    """Widgets to pick a seed, layer, head and held-out sequence of the lab's induction models (chapter 3).

    ``names`` are checkpoint names (default: every 2-layer induction seed,
    :func:`induction_model_names`); ``n_sequences`` held-out sequences fill
    the sequence slider. Display the explorer as the last expression of a
    cell. ``refresh()`` redraws and returns whether the input was valid;
    ``last_refresh_seconds`` is how long the last update took.
    """

    def __init__(self, names: Sequence[str] | None = None, *, n_sequences: int = 16, layer: int = 1, head: int = 0,
                 sequence: int = 0) -> None:
        names = induction_model_names() if names is None else list(names)
        if not names:
            raise ValueError("no induction checkpoints to show; pass checkpoint names or regenerate data/lab with "
                             "python scripts/train_checkpoints.py.")
        self.batch = held_out_batch()
        available = len(self.batch.inputs)
        if isinstance(n_sequences, bool) or not isinstance(n_sequences, int) or not 1 <= n_sequences <= available:
            raise ValueError(f"n_sequences must be a whole number from 1 to {available}, got {n_sequences!r}.")
        self.views = {name: _ModelView(name, self.batch) for name in names}
        first = self.views[names[0]]
        n_layers, n_heads = first.info.config.n_layers, first.info.config.n_heads
        self.model_menu = Dropdown(options=[(view.label, name) for name, view in self.views.items()], value=names[0],
                                   description="model")
        self.layer_slider = IntSlider(value=min(max(layer, 0), n_layers - 1), min=0, max=n_layers - 1,
                                      description="layer")
        self.head_slider = IntSlider(value=min(max(head, 0), n_heads - 1), min=0, max=n_heads - 1, description="head")
        self.sequence_slider = IntSlider(value=min(max(sequence, 0), n_sequences - 1), min=0, max=n_sequences - 1,
                                         description="held-out seq")
        self.own_tokens = Text(placeholder="or type token ids, e.g. 5 17 42 8 5 17 42, then press Enter",
                               continuous_update=False, description="your own", layout=Layout(width="95%"))
        self.message = HTML()
        self.image = Image(format="png")
        self.widget = VBox([self.model_menu, self.layer_slider, self.head_slider, self.sequence_slider,
                            self.own_tokens, self.message, self.image])
        self.last_refresh_seconds = 0.0
        self._canvas = _MapCanvas()
        for control in (self.model_menu, self.layer_slider, self.head_slider, self.sequence_slider, self.own_tokens):
            control.observe(lambda change: self.refresh(), names="value")
        self.refresh()

    # -- what to show ----------------------------------------------------------------------------

    def _sequence(self, view: _ModelView) -> tuple[torch.Tensor, torch.Tensor | None, str]:
        """Token ids (1, seq), the query mask for prefix matching (or None), and a description."""
        typed = self.own_tokens.value
        if typed.strip():
            config = view.info.config
            ids = parse_token_ids(typed, config.vocab_size, config.max_seq_len)
            return torch.tensor([ids]), None, f"your {len(ids)} tokens"
        index = self.sequence_slider.value
        period = int(self.batch.details["period"][index])
        start = int(self.batch.details["repeat_start"][index])
        description = f"held-out sequence {index}: period {period} (never trained on), repeat from position {start}"
        return self.batch.inputs[index:index + 1], self.batch.details["repeat_mask"][index:index + 1], description

    def _composition_text(self, view: _ModelView, layer: int, head: int) -> str:
        parts = []
        if layer < len(view.k_composition):
            values = view.k_composition[layer][head]  # with the heads of layer + 1
            parts.append(f"its output read by the keys of layer {layer + 1} heads: "
                         + ", ".join(f"H{h} {v:.2f}" for h, v in enumerate(values.tolist())))
        if layer > 0:
            values = view.k_composition[layer - 1][:, head]  # with the heads of layer - 1
            parts.append(f"its keys read layer {layer - 1} heads: "
                         + ", ".join(f"H{h} {v:.2f}" for h, v in enumerate(values.tolist())))
        if not parts:
            return "K-composition: none (a one-layer model has nothing to compose with)."
        return f"K-composition (chance ≈ {view.baseline:.2f}): " + "; ".join(parts) + "."

    def refresh(self) -> bool:
        """Redraw for the current controls; on bad input show why and keep the last good map."""
        start = time.perf_counter()
        view = self.views[self.model_menu.value]
        n_layers, n_heads = view.info.config.n_layers, view.info.config.n_heads
        if self.layer_slider.max != n_layers - 1 or self.head_slider.max != n_heads - 1:
            with self.layer_slider.hold_trait_notifications(), self.head_slider.hold_trait_notifications():
                self.layer_slider.value = min(self.layer_slider.value, n_layers - 1)
                self.layer_slider.max = n_layers - 1
                self.head_slider.value = min(self.head_slider.value, n_heads - 1)
                self.head_slider.max = n_heads - 1
        layer, head = self.layer_slider.value, self.head_slider.value
        try:
            message, image = self._draw(view, layer, head)
        except Exception as problem:  # whatever the reader typed, the view answers with a message
            self.message.value = problem_html(problem)
            self.last_refresh_seconds = time.perf_counter() - start
            return False
        self.message.value = message
        self.image.value = image
        self.last_refresh_seconds = time.perf_counter() - start
        return True

    def _draw(self, view: _ModelView, layer: int, head: int) -> tuple[str, bytes]:
        """The message (HTML) and the map (PNG) for the current sequence; ``ValueError`` for bad typed tokens."""
        tokens, query_mask, description = self._sequence(view)
        with torch.no_grad():
            weights = view.model(tokens).attention_weights[layer]  # (1, heads, seq, seq)
        here_previous = float(previous_token_score(weights)[head])
        try:
            here_prefix = f"{float(prefix_matching_score(weights, tokens, query_mask)[head]):.2f}"
        except ValueError:
            here_prefix = "undefined (no token repeats)"
        scores = {key: float(value[layer, head]) for key, value in view.scores.items()}
        role = view.roles[layer][head]
        message = (
            f"<b>{html.escape(view.label)}, layer {layer}, head {head}</b>: role by score "
            f"(threshold {ROLE_THRESHOLD}): <b>{html.escape(role)}</b>.<br>"
            f"On {html.escape(description)}: previous-token {here_previous:.2f}, prefix-matching {here_prefix}.<br>"
            f"On all {len(self.batch.inputs)} held-out sequences: previous-token {scores['previous_token']:.2f}, "
            f"prefix-matching {scores['prefix_matching']:.2f}; copying {scores['copying']:.2f}.<br>"
            f"{html.escape(self._composition_text(view, layer, head))}<br>"
            f"Circles mark the keys an induction head attends to: the token after an earlier copy of the query's "
            f"token. Tokens: <code>{' '.join(str(t) for t in tokens[0].tolist())}</code>"
        )
        title = f"{view.label}, layer {layer}, head {head} ({role})"
        marked = prefix_matching_keys(tokens[0].tolist())
        return message, self._canvas.render(weights[0, head].numpy(), marked, title)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        # Shown where widgets cannot run (a static page, a terminal): say what this is.
        bundle["text/plain"] = (f"InductionLabExplorer(model={self.model_menu.value!r}, layer={self.layer_slider.value}, "
                                f"head={self.head_slider.value}, sequence={self.sequence_slider.value}): "
                                f"run the notebook to use it.")
        return bundle

