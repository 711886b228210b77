"""Attention heatmaps as images: one figure per (sentence, kind, layer), heads in a grid.

Rendered with matplotlib's Agg backend on a private ``Figure`` (no pyplot state, no
display). Each head is a ``[q, k]`` heatmap (viridis, 0 -> 1) with the query tokens down
the left and the key tokens along the bottom; cells are ``CELL_INCHES`` square at
``DPI`` so that 8-point labels are readable without zooming. The layout is computed in
inches, so ``image_size`` tells the exact pixel size of ``render_heads`` beforehand.

    pixels = render_heads(weights[layer], query_labels, key_labels, "encdec · layer 0")
    png = to_png(pixels)
"""
from __future__ import annotations

import dataclasses
import io
import math
from typing import List, Sequence, Tuple

import numpy as np

DPI = 100
CELL_INCHES = 0.2          # one token = 20 pixels
FONT_SIZE = 8
CHAR_INCHES = 0.068        # width of an 8-point label character
PAD_INCHES = 0.15          # around and between panels
TITLE_INCHES = 0.6         # the figure's title band
HEAD_TITLE_INCHES = 0.22   # each panel's "head i"
COLORBAR_INCHES = 0.6      # colour bar and its tick labels
COLORMAP = "viridis"


@dataclasses.dataclass(frozen=True)
class Layout:
    """Panel geometry in inches (origin: the figure's bottom-left corner)."""

    num_heads: int
    columns: int
    rows: int
    left: float        # room for query labels
    bottom: float      # room for key labels (vertical)
    width: float       # heatmap width: k cells
    height: float      # heatmap height: q cells

    @property
    def panel_width(self) -> float:
        """Query labels sit left of the first column only, so they are not part of a panel."""
        return self.width + PAD_INCHES

    @property
    def panel_height(self) -> float:
        """Key labels sit under the last row only, so they are not part of a panel."""
        return self.height + HEAD_TITLE_INCHES + PAD_INCHES

    @property
    def figure_size(self) -> Tuple[float, float]:
        return (PAD_INCHES + self.left + self.columns * self.panel_width + COLORBAR_INCHES,
                TITLE_INCHES + self.rows * self.panel_height + self.bottom + PAD_INCHES)

    def heatmap_box(self, head: int) -> Tuple[float, float, float, float]:
        """(x, y, width, height) of head ``head``'s heatmap, in inches."""
        row, column = divmod(head, self.columns)
        x = PAD_INCHES + self.left + column * self.panel_width
        top = self.figure_size[1] - TITLE_INCHES - row * self.panel_height
        y = top - HEAD_TITLE_INCHES - self.height
        return x, y, self.width, self.height


def layout(num_heads: int, query_labels: Sequence[str], key_labels: Sequence[str],
           columns: int = 0) -> Layout:
    """Heads in ``columns`` columns (0: ``ceil(sqrt(h))``); label margins fit the longest
    label (query labels left of the first column, key labels under the last panel of each
    column)."""
    if num_heads < 1 or not query_labels or not key_labels:
        raise ValueError(f"need >= 1 head and non-empty labels, got {num_heads} heads, "
                         f"{len(query_labels)} query and {len(key_labels)} key labels")
    columns = min(columns or math.ceil(math.sqrt(num_heads)), num_heads)
    margin = lambda labels: 0.15 + CHAR_INCHES * max(len(label) for label in labels)
    return Layout(num_heads=num_heads, columns=columns, rows=math.ceil(num_heads / columns),
                  left=margin(query_labels), bottom=margin(key_labels),
                  width=CELL_INCHES * len(key_labels), height=CELL_INCHES * len(query_labels))


def image_size(num_heads: int, query_labels: Sequence[str], key_labels: Sequence[str],
               columns: int = 0) -> Tuple[int, int]:
    """(width, height) in pixels of ``render_heads`` for these heads, labels and columns."""
    width, height = layout(num_heads, query_labels, key_labels, columns).figure_size
    return int(width * DPI), int(height * DPI)  # as Agg sizes its canvas (truncation)


def render_heads(weights: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str],
                 title: str, columns: int = 0) -> np.ndarray:
    """weights [h, q, k] -> RGB uint8 [H, W, 3] with ``(W, H) == image_size(...)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    weights = np.asarray(weights, np.float32)
    if weights.ndim != 3 or weights.shape[1:] != (len(query_labels), len(key_labels)):
        raise ValueError(f"weights {weights.shape} do not match [h, {len(query_labels)}, "
                         f"{len(key_labels)}] (query, key labels)")
    geometry = layout(weights.shape[0], query_labels, key_labels, columns)
    fig_width, fig_height = geometry.figure_size
    figure = Figure(figsize=(fig_width, fig_height), dpi=DPI, facecolor="white")
    canvas = FigureCanvasAgg(figure)
    figure.text(PAD_INCHES / fig_width, 1 - 0.08 / fig_height, title, fontsize=FONT_SIZE + 1,
                fontweight="bold", va="top", linespacing=1.3)
    image = None
    for head in range(weights.shape[0]):
        x, y, w, h = geometry.heatmap_box(head)
        axes = figure.add_axes((x / fig_width, y / fig_height, w / fig_width, h / fig_height))
        image = axes.imshow(weights[head], cmap=COLORMAP, vmin=0.0, vmax=1.0,
                            aspect="auto", interpolation="nearest")
        axes.set_title(f"head {head}", fontsize=FONT_SIZE + 1, pad=3)
        # Token labels on the outer panels only (the panels line up): ticks are costly.
        row, column = divmod(head, geometry.columns)
        if row == geometry.rows - 1 or head + geometry.columns >= weights.shape[0]:
            axes.set_xticks(range(len(key_labels)), labels=list(key_labels), rotation=90,
                            fontsize=FONT_SIZE)
        else:
            axes.set_xticks([])
        if column == 0:
            axes.set_yticks(range(len(query_labels)), labels=list(query_labels),
                            fontsize=FONT_SIZE)
        else:
            axes.set_yticks([])
        axes.tick_params(length=2, pad=1)
    _, top_y, _, _ = geometry.heatmap_box(0)
    bar = figure.add_axes(((fig_width - COLORBAR_INCHES + 0.1) / fig_width,
                           top_y / fig_height, 0.12 / fig_width,
                           geometry.height / fig_height))
    colorbar = figure.colorbar(image, cax=bar)
    colorbar.ax.tick_params(labelsize=FONT_SIZE)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[:, :, :3].copy()
    return pixels


def pad_to_same_size(images: Sequence[np.ndarray]) -> np.ndarray:
    """RGB images of different sizes -> uint8 [n, H, W, 3] padded white at right/bottom."""
    height = max(image.shape[0] for image in images)
    width = max(image.shape[1] for image in images)
    batch = np.full([len(images), height, width, 3], 255, np.uint8)
    for index, image in enumerate(images):
        batch[index, :image.shape[0], :image.shape[1]] = image
    return batch


def to_png(pixels: np.ndarray) -> bytes:
    """RGB uint8 [H, W, 3] -> PNG bytes."""
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, np.uint8)).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def record_title(kind: str, layer: int, mode: str, text: str, limit: int = 40) -> str:
    """``encdec · layer 0 · reference`` and the forced text (shortened to ``limit``)."""
    shown = text if len(text) <= limit else text[:limit - 1] + "…"
    return f'{kind} · layer {layer} · {mode}\n"{shown}"'


def tensorboard_columns(num_heads: int) -> int:
    """Head columns for TensorBoard, whose image cards are ~350 pixels wide and scale wider
    images down: one column up to 4 heads, then two."""
    return 1 if num_heads <= 4 else 2


def kind_layer_images(records, kind: str, layer: int, columns: int = 0) -> List[np.ndarray]:
    """One rendered image per record for ``kind`` and ``layer`` (``columns``: see
    ``layout``)."""
    images = []
    for record in records:
        queries, keys = record.axis_labels(kind)
        text = record.target
        images.append(render_heads(record.weights[kind][layer], queries, keys,
                                   record_title(kind, layer, record.mode, text),
                                   columns))
    return images
