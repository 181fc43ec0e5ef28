"""The transformer block and the residual stream, drawn as a diagram (the background page "The transformer in brief").

The book never shows a whole transformer layer in code before chapter 3, so the primer draws one: the layer of
all-MiniLM-L6-v2 as it is computed (BERT's order: add the sublayer's output to its input, *then* normalise), and
the same model seen as a residual stream that every head and every MLP reads from and adds into
{Elhage et al. 2021, "A mathematical framework for transformer circuits"}.

- :func:`draw_transformer_layer`: one layer, box by box, with the sizes written on it, into a given axes.
- :func:`draw_residual_stream`: a few layers as a stream, each head a box that reads and writes, into a given axes.
- :func:`transformer_block_figure`: both side by side, as a :class:`matplotlib.figure.Figure` (not pyplot, so it
  leaves no global state behind), with a title on each panel.

Colours come from the Okabe-Ito palette, which stays distinguishable for colour-blind readers, and every box
carries its name as text, so nothing is told by colour alone.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from mha.book import head_label
from mha.core.validation import check_type, check_whole_number

__all__ = ["draw_residual_stream", "draw_transformer_layer", "transformer_block_figure"]

# Okabe-Ito: safe for the common forms of colour blindness
_ATTENTION = "#56B4E9"  # sky blue
_MLP = "#E69F00"  # orange
_NORM = "#CCCCCC"  # grey
_STREAM = "#009E73"  # bluish green
_EMBED = "#F0E442"  # yellow
_INK = "#222222"


def _box(ax: Axes, x: float, y: float, width: float, height: float, text: str, colour: str,
         fontsize: float = 8.5) -> None:
    """A rounded box centred on (x, y) with its name written in it."""
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=colour, edgecolor=_INK,
                                linewidth=1.0, zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=_INK, zorder=4)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], *, colour: str = _INK,
           width: float = 1.2, style: str = "-|>", connection: str = "arc3") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10, color=colour, linewidth=width,
                                 connectionstyle=connection, shrinkA=0, shrinkB=0, zorder=2))


def _plus(ax: Axes, x: float, y: float, radius: float = 0.17) -> None:
    """The circled plus where a sublayer's output is added to the stream."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor=_INK, linewidth=1.2, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11, fontweight="bold", color=_INK, zorder=4)


def _frame(ax: Axes, width: float, height: float, title: str) -> None:
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def draw_transformer_layer(ax: Axes, *, n_heads: int = 12, d_model: int = 384, d_mlp: int = 1536,
                           layer_norm: str | None = "post") -> None:
    """Draw one transformer layer into ``ax``, from its input at the bottom to its output at the top.

    The layer is multi-head attention with ``n_heads`` heads, then an MLP that widens ``d_model`` features to
    ``d_mlp`` and back; each is added to its input through a skip connection (the circled plus). ``layer_norm`` says
    where LayerNorm sits: ``"post"`` after each addition (BERT and all-MiniLM-L6-v2), ``"pre"`` at the start of each
    branch (GPT-2 and the lab's models when they normalise), ``None`` nowhere. The background page "The transformer
    in brief" draws all-MiniLM-L6-v2's layer (12 heads, 384 features, an MLP 1,536 wide).
    """
    check_type("ax", ax, Axes, "a matplotlib Axes, e.g. plt.subplots()[1]")
    n_heads = check_whole_number("n_heads", n_heads, minimum=1, meaning="the heads of the layer, e.g. 12")
    d_model = check_whole_number("d_model", d_model, minimum=1, meaning="the features of each token, e.g. 384")
    d_mlp = check_whole_number("d_mlp", d_mlp, minimum=1, meaning="the MLP's hidden width, e.g. 1536")
    if layer_norm not in ("post", "pre", None):
        raise ValueError(f"layer_norm must be 'post' (BERT), 'pre' (GPT-2) or None, got {layer_norm!r}.")
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} is not a multiple of n_heads = {n_heads}: each head gets "
                         "d_model / n_heads features, so choose sizes that divide.")
    width, height = 5.2, 8.4
    centre, skip = 2.2, 4.35  # the main path, and the skip connections on the right
    title = {"post": "One layer, as all-MiniLM-L6-v2 computes it",
             "pre": "One layer, normalised before each branch (pre-LN)",
             None: "One layer, with no normalisation"}[layer_norm]
    _frame(ax, width, height, title)

    ax.text(centre, 0.25, f"input: one vector of {d_model} numbers per token", ha="center", fontsize=8)
    y = 0.55
    for branch, (label, colour, branch_height) in enumerate((
            (f"multi-head attention\n{n_heads} heads of {d_model // n_heads} features\n(tokens read each other)",
             _ATTENTION, 1.15),
            (f"MLP, one token at a time\n{d_model} → {d_mlp} → {d_model}, GELU", _MLP, 0.95))):
        start = y
        _arrow(ax, (centre, start), (centre, start + 0.45), style="-")
        y = start + 0.45
        if layer_norm == "pre":
            _box(ax, centre, y + 0.25, 2.2, 0.45, "LayerNorm", _NORM)
            _arrow(ax, (centre, y + 0.48), (centre, y + 0.75))
            y += 0.75
        else:
            _arrow(ax, (centre, y), (centre, y + 0.3))
            y += 0.3
        _box(ax, centre, y + branch_height / 2, 3.0, branch_height, label, colour)
        y += branch_height
        plus_y = y + 0.55
        _arrow(ax, (centre, y), (centre, plus_y - 0.17))
        _plus(ax, centre, plus_y)
        # the skip connection: the input goes round the sublayer and is added back
        _arrow(ax, (centre, start + 0.22), (skip, start + 0.22), style="-", colour=_STREAM, width=1.6)
        _arrow(ax, (skip, start + 0.22), (skip, plus_y), style="-", colour=_STREAM, width=1.6)
        _arrow(ax, (skip, plus_y), (centre + 0.17, plus_y), colour=_STREAM, width=1.6)
        if branch == 0:
            ax.text(skip + 0.08, (start + plus_y) / 2, "skip", rotation=90, va="center", fontsize=7.5,
                    color=_STREAM)
        y = plus_y + 0.17
        if layer_norm == "post":
            _arrow(ax, (centre, y), (centre, y + 0.25))
            _box(ax, centre, y + 0.47, 2.2, 0.45, "LayerNorm", _NORM)
            y += 0.7
    _arrow(ax, (centre, y), (centre, y + 0.45))
    ax.text(centre, y + 0.55, "output: the same shape, to the next layer", ha="center", va="bottom", fontsize=8)


def draw_residual_stream(ax: Axes, *, n_layers: int = 2, n_heads: int = 3, mlp: bool = True) -> None:
    """Draw ``n_layers`` layers as a residual stream into ``ax``: every head reads the stream and adds into it.

    The stream is the vertical line, one vector per token, running from the embeddings at the bottom to the output
    at the top. In each layer the ``n_heads`` heads all read the same stream (arrows out of it) and their outputs,
    each through its rows of W_O, are added to it (arrows into the circled plus); then, with ``mlp``, the MLP reads
    and adds in turn. Normalisation is left out: this is the view of {Elhage et al. 2021}, exact for the lab's
    attention-only models of chapter 3 and a good approximation for all-MiniLM-L6-v2.
    """
    check_type("ax", ax, Axes, "a matplotlib Axes, e.g. plt.subplots()[1]")
    n_layers = check_whole_number("n_layers", n_layers, minimum=1, meaning="the layers drawn, at most 4")
    n_heads = check_whole_number("n_heads", n_heads, minimum=1, meaning="the heads of each layer, at most 6")
    if n_layers > 4 or n_heads > 6:
        raise ValueError(f"draw at most 4 layers of at most 6 heads (got {n_layers} and {n_heads}); the diagram "
                         "shows the idea, not a whole model.")
    per_layer = 2.2 + (1.6 if mlp else 0.0)
    width, height = 5.2, 1.6 + n_layers * per_layer + 0.9
    stream_x = 0.75
    _frame(ax, width, height, "The same model, seen as a residual stream")
    _box(ax, stream_x + 0.95, 0.45, 2.6, 0.5, "embeddings of the tokens", _EMBED)
    y = 0.7
    head_left, head_right = 2.05, 4.95
    spacing = (head_right - head_left) / n_heads
    for layer in range(n_layers):
        # the heads: read from the stream at read_y, write into the plus at write_y
        read_y, write_y = y + 0.5, y + 1.95
        box_y = (read_y + write_y) / 2
        _arrow(ax, (stream_x, y), (stream_x, write_y - 0.17), style="-", colour=_STREAM, width=3.0)
        _arrow(ax, (stream_x, read_y), (head_right - spacing / 2, read_y), style="-", colour=_INK, width=0.9)
        for head in range(n_heads):
            x = head_left + spacing * (head + 0.5)
            _arrow(ax, (x, read_y), (x, box_y - 0.3), width=0.9)
            _box(ax, x, box_y, spacing * 0.8, 0.6, head_label(layer, head), _ATTENTION, fontsize=7.5)
            _arrow(ax, (x, box_y + 0.3), (x, write_y), style="-", width=0.9)
        _arrow(ax, (head_right - spacing / 2, write_y), (stream_x + 0.17, write_y), width=0.9)
        _plus(ax, stream_x, write_y)
        if layer == 0:
            ax.text(head_left - 0.1, read_y - 0.08, "every head reads the stream", fontsize=7, va="top")
            ax.text(head_left - 0.1, write_y + 0.08, "and adds its output to it", fontsize=7, va="bottom")
        y = write_y + 0.17
        if mlp:
            read_y, write_y = y + 0.3, y + 1.45
            _arrow(ax, (stream_x, y), (stream_x, write_y - 0.17), style="-", colour=_STREAM, width=3.0)
            _arrow(ax, (stream_x, read_y), (2.6, read_y), style="-", width=0.9)
            _arrow(ax, (2.6, read_y), (2.6, read_y + 0.22), width=0.9)
            _box(ax, 3.3, (read_y + write_y) / 2, 1.9, 0.55, f"MLP of layer {layer}", _MLP, fontsize=7.5)
            _arrow(ax, (2.6, write_y - 0.22), (2.6, write_y), style="-", width=0.9)
            _arrow(ax, (2.6, write_y), (stream_x + 0.17, write_y), width=0.9)
            _plus(ax, stream_x, write_y)
            y = write_y + 0.17
    _arrow(ax, (stream_x, y), (stream_x, y + 0.45), colour=_STREAM, width=3.0)
    ax.text(stream_x, y + 0.55, "output: one vector per token", ha="left", va="bottom", fontsize=8)
    ax.text(stream_x - 0.25, 0.95 + (y - 0.95) / 2, "residual stream", rotation=90, ha="right", va="center",
            fontsize=8, color=_STREAM)


def transformer_block_figure(*, n_heads: int = 12, d_model: int = 384, d_mlp: int = 1536,
                             layer_norm: str | None = "post", stream_layers: int = 2,
                             stream_heads: int = 3) -> Figure:
    """Both diagrams side by side: one layer box by box (left), and the residual stream view (right).

    Returns a :class:`matplotlib.figure.Figure` (Jupyter shows it when it is the last value of a cell; nothing is
    registered with pyplot). The arguments go to :func:`draw_transformer_layer` and :func:`draw_residual_stream`.
    The background page "The transformer in brief" shows it with all-MiniLM-L6-v2's sizes.
    """
    figure = Figure(figsize=(10.5, 5.6), layout="constrained")
    layer_ax, stream_ax = figure.subplots(1, 2)
    draw_transformer_layer(layer_ax, n_heads=n_heads, d_model=d_model, d_mlp=d_mlp, layer_norm=layer_norm)
    draw_residual_stream(stream_ax, n_layers=stream_layers, n_heads=stream_heads)
    return figure
