"""Digit glyphs from the machine's own fonts, and the geometry that makes them look handmade.

``core.digits.synth`` builds its drawn-like and photo-like digits from these: ``find_fonts``
lists the usable fonts, ``glyph`` renders one digit as a float mask, ``transform_glyph``
rotates, shears, squashes, wobbles and scales it, and ``skeleton_stroke`` redraws it as a
line of a given width along its skeleton.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts")
FONT_SUFFIXES = (".ttf", ".otf")
GLYPH_PX = 160  # font size at which glyphs are rendered before they are transformed


# --------------------------------------------------------------------------- fonts


@lru_cache(maxsize=4)
def find_fonts(dirs: tuple[str, ...] = FONT_DIRS) -> tuple[str, ...]:
    """Font files under ``dirs`` that render all ten digits as distinct glyphs, sorted.

    Fonts that fail to load, lack digits (their "digits" are all the same missing-glyph box)
    or map digits to symbols that are empty are left out. May be empty.
    """
    found = set()
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            continue
        for path in root.glob("**/*"):
            if path.suffix.lower() in FONT_SUFFIXES and path.is_file():
                found.add(str(path))
    return tuple(p for p in sorted(found) if renders_digits(p))


def renders_digits(path: str) -> bool:
    try:
        font = ImageFont.truetype(path, 48)
        glyphs = [_render(font, str(d)) for d in range(10)]
    except Exception:  # noqa: BLE001 - a broken or exotic font is simply not used
        return False
    if any(g is None for g in glyphs):
        return False
    distinct = {g.tobytes() + bytes(g.shape) for g in glyphs}
    return len(distinct) == 10


def _render(font, text: str) -> np.ndarray | None:
    """The text as a float mask in 0..1 cropped to its ink, or None if nothing is drawn."""
    size = int(getattr(font, "size", 48) * 2.5) + 16
    img = Image.new("L", (size, size), 0)
    ImageDraw.Draw(img).text((size // 4, size // 4), text, fill=255, font=font)
    a = np.asarray(img, dtype=np.float32) / 255
    rows = np.flatnonzero(a.max(axis=1) > 0.5)
    cols = np.flatnonzero(a.max(axis=0) > 0.5)
    if len(rows) < 2 or len(cols) < 1:
        return None
    return a[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


@lru_cache(maxsize=256)
def _font(path: str | None, size: int):
    if path is None:  # no usable system font: Pillow's own (scalable from Pillow 10.1 on)
        try:
            return ImageFont.load_default(size=size)
        except TypeError:  # older Pillow: a small bitmap font; glyph() upscales it
            return ImageFont.load_default()
    return ImageFont.truetype(path, size)


def glyph(digit: int, font_path: str | None) -> np.ndarray:
    """The digit as a float mask 0..1, about GLYPH_PX high, cropped to its ink."""
    g = _render(_font(font_path, GLYPH_PX), str(digit))
    if g is None:
        raise RuntimeError(f"the font {font_path or 'default'} does not draw the digit {digit}")
    if g.shape[0] < GLYPH_PX // 2:  # a bitmap fallback font: scale it up
        scale = GLYPH_PX / g.shape[0]
        size = (max(1, round(g.shape[1] * scale)), GLYPH_PX)
        g = np.asarray(Image.fromarray(g).resize(size, Image.Resampling.BILINEAR))
    return g


# --------------------------------------------------------------------------- geometry


def transform_glyph(mask: np.ndarray, rng: np.random.Generator, *, rotate: float, shear: float,
               aspect: tuple[float, float], wobble: float, height: int) -> np.ndarray:
    """Rotate, shear, squash, wobble and scale a glyph mask; float 0..1, cropped to its ink.

    ``height`` is the height of the glyph's box before rotation; ``wobble`` is the amplitude
    of a smooth random displacement, as a fraction of it (hand-drawn lines are not straight).
    """
    from skimage.transform import AffineTransform, warp

    h0, w0 = mask.shape
    sy = height / h0
    sx = sy * rng.uniform(*aspect)
    pad = 0.6 * max(h0 * sy, w0 * sx) + 8
    out_side = int(2 * pad + max(h0 * sy, w0 * sx))
    centre = np.array([w0 / 2, h0 / 2])
    # forward map: glyph (x, y) -> output; warp wants the inverse
    fwd = (AffineTransform(translation=-centre)
           + AffineTransform(scale=(sx, sy), shear=shear, rotation=np.deg2rad(rotate))
           + AffineTransform(translation=(out_side / 2, out_side / 2)))
    coords = np.indices((out_side, out_side), dtype=np.float32)  # [2 (row, col), H, W]
    if wobble > 0:
        coords += _smooth_field(rng, out_side, wobble * height)
    pts = np.stack([coords[1].ravel(), coords[0].ravel()], axis=1)
    src = fwd.inverse(pts)
    out = warp(mask, np.stack([src[:, 1].reshape(out_side, out_side),
                               src[:, 0].reshape(out_side, out_side)]),
               order=1, mode="constant", cval=0.0, preserve_range=True)
    rows = np.flatnonzero(out.max(axis=1) > 0.5)
    cols = np.flatnonzero(out.max(axis=0) > 0.5)
    return out[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].astype(np.float32)


def _smooth_field(rng: np.random.Generator, side: int, amplitude: float) -> np.ndarray:
    """A smooth random displacement field [2, side, side] of about ``amplitude`` pixels."""
    coarse = rng.normal(0, 1, size=(2, 4, 4)).astype(np.float32)
    field = np.stack([np.asarray(Image.fromarray(c).resize((side, side), Image.Resampling.BICUBIC))
                      for c in coarse])
    return field * amplitude


def skeleton_stroke(mask: np.ndarray, width: float, margin: int) -> np.ndarray:
    """The mask's skeleton redrawn with a round brush ``width`` px wide (anti-aliased edge).

    The result has ``margin`` px of extra border on every side, so the brush fits.
    """
    from scipy.ndimage import distance_transform_edt
    from skimage.morphology import skeletonize

    padded = np.pad(mask > 0.5, margin)
    skeleton = skeletonize(padded)
    if not skeleton.any():
        skeleton = padded
    dist = distance_transform_edt(~skeleton)
    return np.clip(width / 2 + 0.5 - dist, 0, 1).astype(np.float32)
