"""The book's attention maps in Python: figures for the prose, and the shared choices the views draw with.

One convention, always labelled on the axes: rows are queries (the token that attends *from*), columns are keys
(the token attended *to*), and each row of an attention map sums to 1. The colormap is viridis, which stays
readable for colour-blind readers and in greyscale. Open rings (black under white, so they show on any colour)
mark cells the text points at. Colours run from 0 to 1, the same scale as the interactive views, so one head looks
the same in a figure and in a view.

- :func:`draw_attention` and :func:`attention_grid`: matplotlib figures for the notebooks, from (chapter 1, "The
  mechanism") to (chapter 4, "Caveats").
- :func:`cell_colours` and :func:`weight_hundredths`: the palette and the two-decimal weights that ``views.js``
  (:mod:`mha.views.widget`) draws the views' maps and tables with.

:class:`AttentionMap` is the plain data of one map: weights, labels, a title and the marked cells.
Figures are built with :class:`matplotlib.figure.Figure`, not pyplot, so no global state is touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mha.core.layouts import HEADS, QUERY_KEY, check_attention_layout, takes_attention
from mha.core.validation import InputError, as_real_array, check_items

__all__ = ["COLORMAP", "KEY_AXIS", "QUERY_AXIS", "AttentionMap", "draw_attention", "attention_grid",
           "weight_hundredths", "weight_texts", "MISSING_WEIGHT", "cell_colours", "script_safe_labels"]

COLORMAP = "viridis"
KEY_AXIS = "key: attended to"
QUERY_AXIS = "query: attends from"
_RINGS = (("black", 2.2), ("white", 0.9))  # (edge colour, line width): a white ring on a black one


def _checked_map(weights, query_labels: Sequence[str], key_labels: Sequence[str] | None):
    """``weights`` as a float array (seq_q, seq_k) and both label lists; ``ValueError`` if they do not match."""
    weights = as_real_array("weights", weights)
    query_labels = list(query_labels)
    key_labels = query_labels if key_labels is None else list(key_labels)
    if weights.shape != (len(query_labels), len(key_labels)):
        raise ValueError(
            f"weights have shape {weights.shape} but there are {len(query_labels)} query tokens and "
            f"{len(key_labels)} key tokens; pass one head's map, with one row per query token and one column per "
            f"key token.")
    return weights, query_labels, key_labels


@dataclass(eq=False)
class AttentionMap:
    """One head's map as plain data: ``weights`` (seq_q, seq_k), row and column labels, a title, marked cells.

    ``key_labels`` defaults to ``query_labels`` (self-attention); ``marked`` lists (query, key) cells to ring.
    Every form in this module draws the same object, so a view's picture and its table show the same numbers.
    """

    weights: np.ndarray
    query_labels: Sequence[str]
    key_labels: Sequence[str] | None = None
    title: str = ""
    marked: Sequence[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_attention_layout("weights", self.weights, QUERY_KEY)
        self.weights, self.query_labels, self.key_labels = _checked_map(self.weights, self.query_labels,
                                                                        self.key_labels)
        self.marked = [(int(query), int(key)) for query, key in self.marked]


def _ring_centres(marked: Sequence[tuple[int, int]]) -> np.ndarray:
    """(n, 2) x, y centres of the marked (query, key) cells: x is the key's column, y the query's row."""
    return np.array([(key, query) for query, key in marked], dtype=float).reshape(-1, 2)


@takes_attention(weights=QUERY_KEY)
def draw_attention(
    ax: Axes,
    weights: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    title: str = "",
    vmax: float | None = None,
    show_labels: bool = True,
    marked: Sequence[tuple[int, int]] = (),
):
    """Draw one head's weights (seq_q, seq_k) on ``ax``, ringing the ``marked`` (query, key) cells.

    Returns the image, for a colorbar.
    """
    weights, query_tokens, key_tokens = _checked_map(weights, query_tokens, key_tokens)
    image = ax.imshow(weights, cmap=COLORMAP, vmin=0.0, vmax=1.0 if vmax is None else vmax, aspect="equal")
    ax.set_title(title, fontsize=9)
    if show_labels:
        ax.set_xticks(range(len(key_tokens)), labels=key_tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(len(query_tokens)), labels=query_tokens, fontsize=7)
        ax.set_xlabel(KEY_AXIS, fontsize=8)
        ax.set_ylabel(QUERY_AXIS, fontsize=8)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if len(marked):
        centres = _ring_centres(marked)
        for colour, width in _RINGS:
            ax.scatter(centres[:, 0], centres[:, 1], s=22, facecolors="none", edgecolors=colour, linewidths=width)
    return image


@takes_attention(weights=HEADS)
def attention_grid(
    weights: np.ndarray,
    tokens: Sequence[str],
    *,
    titles: Sequence[str] | None = None,
    suptitle: str = "",
    ncols: int = 4,
    panel_size: float = 2.6,
    show_labels: bool = True,
    dpi: int = 80,
) -> Figure:
    """A grid of heatmaps, one per head: ``weights`` has shape (heads, seq, seq).

    All panels share one colour scale, 0 to 1 as in the interactive views, and one
    colorbar, so heads can be compared by eye.
    """
    weights = as_real_array("weights", weights)
    if weights.ndim != 3:
        raise ValueError(f"weights have shape {weights.shape}; attention_grid needs (heads, seq, seq).")
    n_heads = weights.shape[0]
    titles = [f"head {h}" for h in range(n_heads)] if titles is None else list(titles)
    ncols = min(ncols, n_heads)
    nrows = math.ceil(n_heads / ncols)
    figure = Figure(figsize=(panel_size * ncols + 0.8, panel_size * nrows + (0.5 if suptitle else 0.1)), dpi=dpi,
                    layout="constrained")
    axes = np.atleast_1d(figure.subplots(nrows, ncols, squeeze=False)).ravel()
    image = None
    for head, ax in enumerate(axes):
        if head >= n_heads:
            ax.set_axis_off()
            continue
        image = draw_attention(ax, weights[head], tokens, title=titles[head], show_labels=show_labels)
        if show_labels and head % ncols:
            ax.set_ylabel("")
        if show_labels and head < n_heads - ncols:
            ax.set_xlabel("")
    figure.colorbar(image, ax=axes.tolist(), shrink=0.8, label="attention weight")
    if suptitle:
        figure.suptitle(suptitle, fontsize=11)
    return figure


def cell_colours() -> list[list[str]]:
    """[background, text] colours for each of the colormap's 256 levels: white text on the dark ones.

    The website's views (``website/views.js``) colour their maps and tables from this list too.
    """
    rgb = colormaps[COLORMAP](np.linspace(0.0, 1.0, 256))[:, :3]  # (256, 3)
    dark = rgb @ np.array([0.2126, 0.7152, 0.0722]) < 0.45  # relative luminance
    return [[f"#{r:02x}{g:02x}{b:02x}", "#fff" if is_dark else "#000"]
            for (r, g, b), is_dark in zip((rgb * 255).round().astype(int).tolist(), dark, strict=True)]


MISSING_WEIGHT = "\u2014"
"""What a view's table shows for a weight that is NaN or infinite (an em dash): it has no hundredths."""


def _hundredths(weights: np.ndarray) -> np.ndarray:
    return np.rint(weights * 100).astype(np.int64)


def weight_hundredths(weights) -> np.ndarray:
    """Each weight (from 0 to 1) in whole hundredths, as a view's table shows it: 0.254 -> 25. Same shape.

    A NaN or infinite weight has no whole number of hundredths and is refused (cast, NaN would become -2**63);
    :func:`weight_texts` shows it as a dash.
    """
    weights = as_real_array("weights", weights)
    if not np.isfinite(weights).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(weights))[0])
        raise InputError(f"weights holds {weights[where]} at {where}, which has no whole number of hundredths. "
                         "Find where it came from; weight_texts shows such a weight as a dash.")
    return _hundredths(weights)


def weight_texts(weights) -> list:
    """Each weight as the text a view's table shows, two decimals from :func:`weight_hundredths` ("0.25").

    Nested lists of the same shape; a NaN or infinite weight is shown as :data:`MISSING_WEIGHT`, a dash. The
    website's views write their tables from the same hundredths.
    """
    weights = as_real_array("weights", weights)
    finite = np.isfinite(weights)
    hundredths = _hundredths(np.where(finite, weights, 0.0))
    return np.vectorize(lambda h, known: f"{'-' * (h < 0)}{abs(h) // 100}.{abs(h) % 100:02d}" if known
                        else MISSING_WEIGHT, otypes=[object])(hundredths, finite).tolist()


def script_safe_labels(labels: Sequence[str]) -> list[str]:
    """Token labels that cannot end the ``<script>`` element a bertviz view is written into (chapter 3).

    bertviz writes its labels into a script with ``json.dumps``, which leaves ``</script>`` as it is: a label
    holding it would end the script and let the rest of the label run as HTML. Angle brackets become the look-alike
    quotation marks ‹ and ›, so the label still reads the same.
    """
    labels = check_items("labels", labels, "a list of labels (text)")
    return [str(label).replace("<", "\u2039").replace(">", "\u203a") for label in labels]
