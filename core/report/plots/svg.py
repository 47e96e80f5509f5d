"""Heatmaps as SVG text: the timeline of one input and the intervention mask, drawn by the
browser itself (no chart library to load, so the Mechanisms page's first view draws at once).

Both read the same panels and masks as their plotly counterparts (``traces.timeline_figure``,
``interventions.mask_figure``, which the PNG/HTML downloads keep using): x = image row (1-based),
y = unit. Every cell carries a ``<title>`` (the browser's tooltip: row, unit, value); each mask
cell of ``mask_svg`` also carries ``data-cell="t,i"`` (0-based) for a click handler.
"""

from __future__ import annotations

import base64
import hashlib
import io
from html import escape

import numpy as np
from plotly.colors import get_colorscale, sample_colorscale

from .style import MASK_COLORS, TIMESTEP_AXIS

CELL_H = 18  # px per unit row
LABEL_W = 96  # px for the unit names left of the cells
LEGEND_W = 120  # px for each panel's colour legend right of the cells
TITLE_H = 22
IMAGE_PX = 4  # px per image column (the rotated image's height)
FONT = 'font-family="Source Sans Pro, Source Sans 3, sans-serif"'
SMALLEST = 0.9  # the SVG shrinks with its column down to this share of its size, then scrolls: text stays readable
NAN_FILL = "#ffffff"


def column_width(T: int, room: int = 760, widest: int = 26) -> int:
    """Width of one timestep's column: ``T`` columns fit ``room`` px, none wider than ``widest``."""
    return int(max(6, min(widest, room // max(T, 1))))


def colours(values, scale: str | list = "Viridis", lo: float | None = None, hi: float | None = None) -> list[str]:
    """Fill colours of ``values`` on a plotly colour scale between ``lo`` and ``hi`` (their own
    range when None); a missing value (NaN) is white."""
    v = np.asarray(values, dtype=float).ravel()
    finite = v[np.isfinite(v)]
    lo = float(finite.min()) if lo is None and finite.size else (0.0 if lo is None else float(lo))
    hi = float(finite.max()) if hi is None and finite.size else (1.0 if hi is None else float(hi))
    span = hi - lo if hi > lo else 1.0
    pos = np.clip((np.nan_to_num(v, nan=lo) - lo) / span, 0.0, 1.0)
    scale = get_colorscale(scale) if isinstance(scale, str) else scale
    # 256 levels sampled once: a lookup per cell instead of an interpolation per cell
    table = sample_colorscale(scale, list(np.linspace(0, 1, 256)))
    return [NAN_FILL if not np.isfinite(x) else table[int(round(p * 255))] for x, p in zip(v, pos)]


def _png_uri(image: np.ndarray) -> str:
    from PIL import Image

    img = np.asarray(image)
    if img.dtype != np.uint8:
        img = (np.clip(img, 0, 1) * 255).round().astype(np.uint8) if img.max() <= 1 else np.clip(img, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _text(x: float, y: float, s: str, anchor: str = "start", extra: str = "", size: int = 12) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} font-size="{size}"'
            f'{" " + extra if extra else ""}>{escape(str(s))}</text>')


def _legend(p: dict, x: float, y: float, height: float) -> list[str]:
    """A panel's colour legend: two swatches for a 0/1 panel, a gradient with its ends otherwise."""
    title = str(p.get("colorbar", ""))
    out = [_text(x, y + 11, title, extra='font-weight="bold"')] if title else []
    if p.get("binary"):
        cols = p.get("colors", MASK_COLORS)
        for j, (c, label) in enumerate(zip(cols, p.get("ticktext", ("0", "1")))):
            yy = y + 20 + 17 * j
            out.append(f'<rect x="{x:.1f}" y="{yy:.1f}" width="12" height="12" fill="{c}" stroke="#999"/>')
            out.append(_text(x + 17, yy + 10, label))
        return out
    lo, hi = float(p.get("zmin") if p.get("zmin") is not None else 0), float(p.get("zmax") if p.get("zmax") is not None else 1)
    stops = colours(np.linspace(lo, hi, 9), p.get("colorscale", "Viridis"), lo, hi)
    gid = "g" + hashlib.md5(f"{title}|{lo}|{hi}|{p.get('colorscale')}".encode()).hexdigest()[:10]
    out.append(f'<defs><linearGradient id="{gid}" x1="0" y1="1" x2="0" y2="0">'
               + "".join(f'<stop offset="{i / 8:.3f}" stop-color="{c}"/>' for i, c in enumerate(stops))
               + "</linearGradient></defs>")
    top, h = y + 20, max(24.0, height - 20)
    out.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="12" height="{h:.1f}" fill="url(#{gid})" stroke="#999"/>')
    out.append(_text(x + 17, top + 10, f"{hi:.3g}"))
    out.append(_text(x + 17, top + h, f"{lo:.3g}"))
    return out


def _cells(z: np.ndarray, fills: list[str], tips: list[str], x0: float, y0: float, cw: float) -> list[str]:
    """``z`` [T, U] as one rect per cell (1 px gaps), each with its tooltip (``fills`` and ``tips``
    in ``z``'s row-major order)."""
    T, U = z.shape
    out = []
    for i in range(U):
        for t in range(T):
            out.append(f'<rect x="{x0 + t * cw + 0.5:.1f}" y="{y0 + i * CELL_H + 0.5:.1f}" width="{cw - 1:.1f}" '
                       f'height="{CELL_H - 1}" fill="{fills[t * U + i]}"><title>{escape(tips[t * U + i])}</title></rect>')
    return out


def _row_axis(x0: float, cw: float, T: int, y: float, title: str) -> list[str]:
    """The x axis under cells of width ``cw`` from ``x0``: row numbers (one every 20 px at least, and
    row 1) and the axis title."""
    step = max(1, int(np.ceil(20 / cw)))
    return [_text(x0 + (s - 0.5) * cw, y + 14, s, "middle", size=11) for s in range(1, T + 1)
            if s == 1 or s % step == 0] + [_text(x0 + T * cw / 2, y + 32, title, "middle")]


def timeline_svg(image: np.ndarray, panels: list[dict], t: int | None = None) -> str:
    """The image (rotated: its row t runs down column t) above one heatmap per panel on one time
    axis, each panel with its title and colour legend; ``t`` (1-based) frames that step."""
    img = np.asarray(image)
    T, W = img.shape[0], img.shape[1]
    cw = column_width(T)
    width = LABEL_W + T * cw + 12 + LEGEND_W
    parts, y = [], 0.0
    parts.append(_text(LABEL_W, y + 15, "image, rotated: row t runs down column t"))
    y += TITLE_H
    img_h = IMAGE_PX * W
    rot = np.swapaxes(img, 0, 1)
    parts.append(f'<image x="{LABEL_W}" y="{y:.1f}" width="{T * cw}" height="{img_h}" preserveAspectRatio="none" '
                 f'style="image-rendering: pixelated" href="{_png_uri(rot)}"><title>the input, rotated</title></image>')
    parts.append(_text(LABEL_W - 6, y + img_h / 2 + 4, "column", "end"))
    regions = [(y, y + img_h)]  # where the step frame goes: the image and each panel's cells, not the titles
    y += img_h + 12
    for p in panels:
        z = np.asarray(p["z"], dtype=float)
        units = [str(u) for u in p["units"]]
        parts.append(_text(LABEL_W, y + 15, p["title"]))
        y += TITLE_H
        cells = [(t_, i) for t_ in range(z.shape[0]) for i in range(z.shape[1])]
        if p.get("binary"):
            cols, names = p.get("colors", MASK_COLORS), p.get("ticktext", ("0", "1"))
            fills = [cols[1] if v > 0.5 else cols[0] for v in z.ravel()]
            tips = [f"row {t_ + 1}, {units[i]}: {names[1] if z[t_, i] > 0.5 else names[0]}" for t_, i in cells]
        else:
            fills = colours(z, p.get("colorscale", "Viridis"), p.get("zmin"), p.get("zmax"))
            tips = [f"row {t_ + 1}, {units[i]}: {z[t_, i]:.3f}" for t_, i in cells]
        parts += _cells(z, fills, tips, LABEL_W, y, cw)
        parts += [_text(LABEL_W - 6, y + i * CELL_H + 13, u, "end") for i, u in enumerate(units)]
        h = CELL_H * len(units)
        regions.append((y, y + h))
        parts += _legend(p, LABEL_W + T * cw + 12, y - TITLE_H + 4, h + TITLE_H - 4)
        y += h + 10
    bottom = y - 10
    parts += _row_axis(LABEL_W, cw, T, bottom, f"{TIMESTEP_AXIS} (1-{T})")
    if t is not None and 1 <= t <= T:
        parts += [f'<rect class="step" x="{LABEL_W + (t - 1) * cw:.1f}" y="{a - 2:.1f}" width="{cw}" height="{b - a + 4:.1f}" '
                  f'fill="none" stroke="#000" stroke-width="2" pointer-events="none"/>' for a, b in regions]
    height = bottom + 40
    return _svg(width, height, "timeline of the trace", parts)


def mask_svg(original: np.ndarray, after: np.ndarray, pinned: np.ndarray, changed: np.ndarray,
             unit_names: list[str], title: str) -> str:
    """The mask after an intervention (x = row, y = LSTM): cells set by the user framed in blue,
    cells that changed downstream crossed; every cell a ``data-cell="t,i"`` rect with its tooltip."""
    after, original = np.asarray(after), np.asarray(original)
    T, n = after.shape
    cw = column_width(T, room=420, widest=15)  # beside the controls: under half the page's width
    names = [str(u) for u in unit_names]
    lw = max(40, 7 * max(len(u) for u in names) + 8)  # the unit names' column
    width = lw + T * cw + 10
    parts = [_text(0, 15, title, extra='font-weight="bold"')]
    y0 = TITLE_H + 4

    def state(m, t, i) -> str:
        return "active" if m[t, i] > 0.5 else "inactive"

    for i in range(n):
        parts.append(_text(lw - 6, y0 + i * CELL_H + 13, names[i], "end"))
        for t in range(T):
            x, y = lw + t * cw, y0 + i * CELL_H
            tip = f"row {t + 1}, {names[i]}: {state(after, t, i)} (was {state(original, t, i)})" + (
                ", set by you" if pinned[t, i] else ", changed downstream" if changed[t, i] else "")
            fill = MASK_COLORS[1] if after[t, i] > 0.5 else MASK_COLORS[0]
            parts.append(f'<rect class="cell" data-cell="{t},{i}" x="{x + 0.5:.1f}" y="{y + 0.5:.1f}" width="{cw - 1}" '
                         f'height="{CELL_H - 1}" fill="{fill}"><title>{escape(tip)}</title></rect>')
            if pinned[t, i]:
                parts.append(f'<rect x="{x + 2:.1f}" y="{y + 2:.1f}" width="{cw - 4}" height="{CELL_H - 4}" fill="none" '
                             f'stroke="#1f4e99" stroke-width="2" pointer-events="none"/>')
            elif changed[t, i]:
                parts.append(f'<path d="M{x + 4:.1f},{y + 4:.1f}L{x + cw - 4:.1f},{y + CELL_H - 4:.1f}M{x + cw - 4:.1f},'
                             f'{y + 4:.1f}L{x + 4:.1f},{y + CELL_H - 4:.1f}" stroke="#111" stroke-width="1.5" '
                             f'pointer-events="none"/>')
    bottom = y0 + n * CELL_H
    parts += _row_axis(lw, cw, T, bottom, "row (timestep)")
    ly = bottom + 44
    parts.append(f'<rect x="{lw}" y="{ly}" width="12" height="12" fill="none" stroke="#1f4e99" stroke-width="2"/>')
    parts.append(_text(lw + 17, ly + 10, "set by you"))
    parts.append(f'<path d="M{lw + 110},{ly}l12,12m0,-12l-12,12" stroke="#111" stroke-width="1.5"/>')
    parts.append(_text(lw + 127, ly + 10, "changed downstream"))
    height = ly + 18
    return _svg(width, height, title, parts)


def _svg(width: float, height: float, label: str, parts: list[str]) -> str:
    """The drawing at its own size, shrinking with a narrower column down to ``SMALLEST`` of it
    (below that the page scrolls it sideways, so no text gets too small to read)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" '
            f'style="min-width: {SMALLEST * width:.0f}px; max-width: {width:.0f}px" role="img" '
            f'aria-label="{escape(label)}">' + "".join(parts) + "</svg>")
