"""The one way the book draws an attention map: as a figure, as PNG for a live view, and as a table of numbers.

One convention, always labelled on the axes: rows are queries (the token that attends *from*), columns are keys
(the token attended *to*), and each row of an attention map sums to 1. The colormap is viridis, which stays
readable for colour-blind readers and in greyscale. Open rings (black under white, so they show on any colour)
mark cells the text points at. Three forms share those choices:

- :func:`draw_attention` and :func:`attention_grid`: matplotlib figures for the notebooks, from (chapter 1, "The
  mechanism") to (chapter 4, "Caveats").
- :class:`AttentionPNG`: one map as PNG bytes in a few milliseconds, for the interactive views of
  :mod:`mha.views.explorer`.
- :func:`attention_table_html`: the same numbers as an HTML table, for a screen reader and for anyone who wants
  the exact weights.

:class:`AttentionMap` is the plain data all three can draw: weights, labels, a title and the marked cells.
Figures are built with :class:`matplotlib.figure.Figure`, not pyplot, so the views redraw without global state.
"""

from __future__ import annotations

import html
import io
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from matplotlib import colormaps, font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.transforms import blended_transform_factory
from PIL import Image as PILImage
from PIL import ImageDraw, ImageFont

__all__ = ["COLORMAP", "KEY_AXIS", "QUERY_AXIS", "AttentionMap", "draw_attention", "attention_grid", "AttentionPNG",
           "weight_hundredths", "weight_texts", "cell_colours", "script_safe_labels", "attention_table_html"]

COLORMAP = "viridis"
KEY_AXIS = "key: attended to"
QUERY_AXIS = "query: attends from"
_RINGS = (("black", 2.2), ("white", 0.9))  # (edge colour, line width): a white ring on a black one


def _checked_map(weights, query_labels: Sequence[str], key_labels: Sequence[str] | None):
    """``weights`` as a float array (seq_q, seq_k) and both label lists; ``ValueError`` if they do not match."""
    weights = np.asarray(weights, dtype=float)
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
        self.weights, self.query_labels, self.key_labels = _checked_map(self.weights, self.query_labels,
                                                                        self.key_labels)
        self.marked = [(int(query), int(key)) for query, key in self.marked]


def _ring_centres(marked: Sequence[tuple[int, int]]) -> np.ndarray:
    """(n, 2) x, y centres of the marked (query, key) cells: x is the key's column, y the query's row."""
    return np.array([(key, query) for query, key in marked], dtype=float).reshape(-1, 2)


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
    image = ax.imshow(weights, cmap=COLORMAP, vmin=0.0, vmax=vmax or max(weights.max(), 1e-9), aspect="equal")
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

    All panels share one colour scale (0 to the largest weight shown) and one
    colorbar, so heads can be compared by eye.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights have shape {weights.shape}; attention_grid needs (heads, seq, seq).")
    n_heads = weights.shape[0]
    titles = [f"head {h}" for h in range(n_heads)] if titles is None else list(titles)
    ncols = min(ncols, n_heads)
    nrows = math.ceil(n_heads / ncols)
    figure = Figure(figsize=(panel_size * ncols + 0.8, panel_size * nrows + (0.5 if suptitle else 0.1)), dpi=dpi,
                    layout="constrained")
    axes = np.atleast_1d(figure.subplots(nrows, ncols, squeeze=False)).ravel()
    vmax = max(weights.max(), 1e-9)
    image = None
    for head, ax in enumerate(axes):
        if head >= n_heads:
            ax.set_axis_off()
            continue
        image = draw_attention(ax, weights[head], tokens, title=titles[head], vmax=vmax,
                               show_labels=show_labels)
        if show_labels and head % ncols:
            ax.set_ylabel("")
        if show_labels and head < n_heads - ncols:
            ax.set_xlabel("")
    figure.colorbar(image, ax=axes.tolist(), shrink=0.8, label="attention weight")
    if suptitle:
        figure.suptitle(suptitle, fontsize=11)
    return figure


@lru_cache(maxsize=8)
def _font(size_px: int) -> ImageFont.FreeTypeFont:
    """Matplotlib's own sans-serif font (DejaVu Sans) at ``size_px`` pixels, for labels pasted into a PNG."""
    return ImageFont.truetype(font_manager.findfont(FontProperties(family=["sans-serif"])), size_px)


@lru_cache(maxsize=4096)
def _label_mask(text: str, size_px: int, max_length: int, upright: bool) -> np.ndarray:
    """Ink of one label (rows, columns) from 0 to 1, cut to ``max_length`` pixels with "…", turned up if asked."""
    font = _font(size_px)
    shown, kept = text, text
    while font.getlength(shown) > max_length and kept:
        kept = kept[:-1]
        shown = kept + "…"
    ascent, descent = font.getmetrics()
    canvas = PILImage.new("L", (max(math.ceil(font.getlength(shown)), 1), ascent + descent))
    ImageDraw.Draw(canvas).text((0, 0), shown, font=font, fill=255)
    ink = np.asarray(canvas, dtype=np.float32) / 255.0  # (height, width)
    return np.rot90(ink) if upright else ink  # turned a quarter left: it reads upwards, as matplotlib's rotation=90


def _paste_ink(pixels: np.ndarray, ink: np.ndarray, top: int, left: int) -> None:
    """Darken ``pixels`` (height, width, RGB) by ``ink`` (rows, columns) with its corner at (top, left), clipped."""
    rows = slice(max(top, 0), min(top + ink.shape[0], pixels.shape[0]))
    columns = slice(max(left, 0), min(left + ink.shape[1], pixels.shape[1]))
    if rows.start >= rows.stop or columns.start >= columns.stop:
        return
    part = ink[rows.start - top:rows.stop - top, columns.start - left:columns.stop - left, None]
    pixels[rows, columns] = (pixels[rows, columns] * (1.0 - part)).astype(np.uint8)  # black ink over the page


class _LabelPlaces(NamedTuple):
    """Where :class:`AttentionPNG` pastes the labels of a map of one size, in image pixels (row 0 at the top)."""

    columns: list[int]  # x of each key's centre
    rows: list[int]  # image row of each query's centre
    below: int  # first row under the axes and their ticks: the key labels hang from it
    left_of: int  # last column left of the axes and their ticks: the query labels end at it
    key_room: int  # pixels a key label may take before the key axis title
    query_room: int  # pixels a query label may take after the query axis title
    title_centre: int
    title_bottom: int
    title_room: int


_AXIS_TITLE_ROOM = 14  # pixels kept for an axis title (8 points) at the figure's edge


class AttentionPNG:
    """Renders an :class:`AttentionMap` to PNG bytes in a few milliseconds, for the interactive views.

    One figure with a fixed 0..1 colour scale is reused. Its frame, ticks, axis titles and colorbar are drawn
    once per map size and kept as a background (the last ``cached_backgrounds`` sizes); an update restores it,
    draws only the map and the rings on top (blitting), and pastes the title and tick labels from a cache of
    rendered words in matplotlib's font, so a new sentence costs no more than a new head. ``axis_titles`` name
    the (key, query) axes; a map with more than ``max_labels`` rows labels every fifth one (``None``: all);
    ``margins`` are the (left, bottom, right, top) edges of the axes in the figure, with room for the labels,
    and a label longer than its margin is cut with "…".
    """

    label_size, title_size = 7, 9
    """Sizes of the tick labels and the title in pixels (7 and 9 points at 72 dpi, as in :func:`draw_attention`)."""

    def __init__(self, size: tuple[float, float] = (4.6, 4.2), dpi: int = 72, *,
                 margins: tuple[float, float, float, float] = (0.22, 0.26, 0.98, 0.93),
                 axis_titles: tuple[str, str] = (KEY_AXIS, QUERY_AXIS), max_labels: int | None = None,
                 cached_backgrounds: int = 16) -> None:
        self.figure = Figure(figsize=size, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        left, bottom, right, top = margins
        self.figure.subplots_adjust(left=left, bottom=bottom, right=right, top=top)
        self.axes = self.figure.subplots()
        self.image = self.axes.imshow(np.zeros((2, 2)), cmap=COLORMAP, vmin=0.0, vmax=1.0, aspect="equal",
                                      interpolation="nearest", animated=True)
        self.figure.colorbar(ScalarMappable(norm=Normalize(0.0, 1.0), cmap=COLORMAP), ax=self.axes, shrink=0.8,
                             label="attention weight")
        self.axes.tick_params(labelbottom=False, labelleft=False)  # the labels are pasted by render()
        # the axis titles sit at the figure's edges, outside the margins the labels may fill
        self.axes.set_xlabel(axis_titles[0], fontsize=8, va="bottom")
        self.axes.xaxis.set_label_coords(0.5, 2 / self.figure.bbox.height,
                                         transform=blended_transform_factory(self.axes.transAxes,
                                                                             self.figure.transFigure))
        self.axes.set_ylabel(axis_titles[1], fontsize=8, va="top")
        self.axes.yaxis.set_label_coords(2 / self.figure.bbox.width, 0.5,
                                         transform=blended_transform_factory(self.figure.transFigure,
                                                                             self.axes.transAxes))
        self.rings = [self.axes.scatter([], [], s=18, facecolors="none", edgecolors=colour, linewidths=width,
                                        animated=True) for colour, width in _RINGS]
        self.max_labels = max_labels
        self.cached_backgrounds = cached_backgrounds
        self._backgrounds: OrderedDict[tuple[int, int], tuple[object, _LabelPlaces, int]] = OrderedDict()

    def _step(self, n_queries: int, n_keys: int) -> int:
        return 5 if self.max_labels is not None and max(n_queries, n_keys) > self.max_labels else 1

    def _background(self, n_queries: int, n_keys: int) -> tuple[object, _LabelPlaces, int]:
        """The static parts drawn for a map of this size, where its labels go, and every how many rows they stand.

        Cached by size, the least recently used going first.
        """
        self.image.set_extent((-0.5, n_keys - 0.5, n_queries - 0.5, -0.5))
        self.axes.set_xlim(-0.5, n_keys - 0.5)
        self.axes.set_ylim(n_queries - 0.5, -0.5)
        key = (n_queries, n_keys)
        if key in self._backgrounds:
            self._backgrounds.move_to_end(key)
            return self._backgrounds[key]
        step = self._step(n_queries, n_keys)
        self.axes.set_xticks(range(0, n_keys, step))
        self.axes.set_yticks(range(0, n_queries, step))
        self.canvas.draw()  # everything but the animated map and rings
        width, height = self.figure.bbox.width, self.figure.bbox.height
        box = self.axes.get_window_extent()  # display pixels, origin at the bottom left
        pad = round(7.0 * self.figure.dpi / 72)  # tick length + label pad, as matplotlib's 3.5 + 3.5 points
        centres = self.axes.transData.transform(np.stack([np.arange(max(n_queries, n_keys))] * 2, axis=1))
        below, left_of = round(height - box.y0) + pad, round(box.x0) - pad
        places = _LabelPlaces(
            columns=[round(x) for x in centres[:n_keys, 0]], rows=[round(height - y) for y in centres[:n_queries, 1]],
            below=below, left_of=left_of, key_room=round(height) - below - _AXIS_TITLE_ROOM,
            query_room=left_of - _AXIS_TITLE_ROOM, title_centre=round((box.x0 + box.x1) / 2),
            title_bottom=round(height - box.y1) - round(6.0 * self.figure.dpi / 72),  # matplotlib's 6-point pad
            title_room=round(width) - 4)
        self._backgrounds[key] = (self.canvas.copy_from_bbox(self.figure.bbox), places, step)
        while len(self._backgrounds) > max(self.cached_backgrounds, 1):
            self._backgrounds.popitem(last=False)
        return self._backgrounds[key]

    def _paste_labels(self, pixels: np.ndarray, attention_map: AttentionMap, places: _LabelPlaces, step: int) -> None:
        """The title above the axes, key labels under the columns (upright when long), query labels left of rows."""
        ink = _label_mask(attention_map.title, self.title_size, places.title_room, False)
        _paste_ink(pixels, ink, places.title_bottom - ink.shape[0], places.title_centre - ink.shape[1] // 2)
        upright = any(len(label) > 3 for label in attention_map.key_labels)  # long key labels stand up to fit
        for column, label in list(zip(places.columns, attention_map.key_labels))[::step]:
            ink = _label_mask(label, self.label_size, places.key_room, upright)
            _paste_ink(pixels, ink, places.below, column - ink.shape[1] // 2)
        for row, label in list(zip(places.rows, attention_map.query_labels))[::step]:
            ink = _label_mask(label, self.label_size, places.query_room, False)
            _paste_ink(pixels, ink, row - ink.shape[0] // 2, places.left_of - ink.shape[1])

    def render(self, attention_map: AttentionMap) -> bytes:
        """PNG bytes of the map, its labels on both axes, rings on its marked cells, its title above."""
        n_queries, n_keys = attention_map.weights.shape
        background, places, step = self._background(n_queries, n_keys)
        self.canvas.restore_region(background)
        self.image.set_data(attention_map.weights)
        centres = _ring_centres(attention_map.marked)
        for rings in self.rings:
            rings.set_offsets(centres)
        for artist in (self.image, *self.rings):
            self.figure.draw_artist(artist)
        pixels = np.array(self.canvas.buffer_rgba())[..., :3]  # (height, width, RGB), a copy to paste into
        self._paste_labels(pixels, attention_map, places, step)
        buffer = io.BytesIO()
        PILImage.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="png", compress_level=1)
        return buffer.getvalue()


@lru_cache(maxsize=1)
def cell_colours() -> list[list[str]]:
    """[background, text] colours for each of the colormap's 256 levels: white text on the dark ones.

    The website's views (``site/views.js``) colour their maps and tables from this list too.
    """
    rgb = colormaps[COLORMAP](np.linspace(0.0, 1.0, 256))[:, :3]  # (256, 3)
    dark = rgb @ np.array([0.2126, 0.7152, 0.0722]) < 0.45  # relative luminance
    return [[f"#{r:02x}{g:02x}{b:02x}", "#fff" if is_dark else "#000"]
            for (r, g, b), is_dark in zip((rgb * 255).round().astype(int).tolist(), dark)]


_CELL_STYLES = [f"background:{background};color:{text};padding:1px 2px" for background, text in cell_colours()]


def weight_hundredths(weights) -> np.ndarray:
    """Each weight (from 0 to 1) in whole hundredths, as a view's table shows it: 0.254 -> 25. Same shape."""
    return np.rint(np.asarray(weights, dtype=float) * 100).astype(np.int64)


def weight_texts(weights) -> list:
    """Each weight as the text a view's table shows, two decimals from :func:`weight_hundredths` ("0.25").

    Nested lists of the same shape. The website's views write their tables from the same hundredths.
    """
    return np.vectorize(lambda h: f"{h // 100}.{h % 100:02d}", otypes=[object])(weight_hundredths(weights)).tolist()


def attention_table_html(weights: np.ndarray, query_labels: Sequence[str], title: str,
                         key_labels: Sequence[str] | None = None) -> str:
    """One head's map (seq_q, seq_k) as an HTML table of its weights: a row per query, a column per key.

    The text form of a map, for a screen reader (chapter 1, "Attention from scratch"): every weight is written
    to two decimals, on the viridis colour of the picture, with the three-decimal value and the (query → key)
    pair in its tooltip; the caption says which axis is which. Labels and title are HTML-escaped.
    """
    weights, query_labels, key_labels = _checked_map(weights, query_labels, key_labels)
    levels = np.clip(np.rint(weights * 255), 0, 255).astype(int).tolist()  # (seq_q, seq_k): colormap levels
    queries = [html.escape(label) for label in query_labels]
    keys = [html.escape(label) for label in key_labels]
    header = "".join(f"<th scope='col' style='writing-mode:vertical-rl;transform:rotate(180deg);"
                     f"font-weight:normal;padding:1px'>{key}</th>" for key in keys)
    rows = []
    for query, row_levels, values, texts in zip(queries, levels, weights.tolist(), weight_texts(weights)):
        cells = "".join(f"<td style='{_CELL_STYLES[level]}' title='{query} → {key}: {value:.3f}'>{text}</td>"
                        for level, value, key, text in zip(row_levels, values, keys, texts))
        rows.append(f"<tr><th scope='row' style='text-align:right;font-weight:normal;padding:0 4px'>{query}</th>"
                    f"{cells}</tr>")
    return (f"<table style='border-collapse:collapse;font-size:9px;text-align:right'><caption style='text-align:left'>"
            f"<b>{html.escape(title)}</b><br>rows: query, the position attending FROM · columns: key, the position "
            f"attended TO</caption><tr><td></td>{header}</tr>{''.join(rows)}</table>")


def script_safe_labels(labels: Sequence[str]) -> list[str]:
    """Token labels that cannot end the ``<script>`` element a bertviz view is written into (chapter 3).

    bertviz writes its labels into a script with ``json.dumps``, which leaves ``</script>`` as it is: a label
    holding it would end the script and let the rest of the label run as HTML. Angle brackets become the look-alike
    quotation marks ‹ and ›, so the label still reads the same.
    """
    return [str(label).replace("<", "\u2039").replace(">", "\u203a") for label in labels]
