"""Digits like people draw and photograph them, made from the machine's own fonts.

MNIST models meet two kinds of digit on the pages: one drawn with the mouse on the drawing
canvas (thick, round, white strokes on black, an RGBA 280 x 280 array) and one photographed
on paper and uploaded (dark ink on light paper, uneven light, JPEG). This module makes both
kinds from nothing but the TrueType/OpenType fonts installed on the machine, without a data
set or the network, so the whole way from such an image to a prediction can be measured:

* ``generate(style, n, seed)`` gives ``n`` images of one style and their labels 0-9,
  deterministic per seed (on one machine: the images depend on the fonts it has);
* ``python -m core.studies.handwriting make --out assets/digits --n 100`` writes the small fixed set
  that is shipped in ``assets/digits/`` (see its README), so results compare across machines;
* ``python -m core.studies.handwriting measure --models pretrained`` prints, for every shipped MNIST
  model, the share of each set it recognises after ``core.digits.prepare`` as the pages apply
  it (``--json PATH`` also writes the numbers).

The glyphs and their handmade geometry come from ``core.digits.glyphs``, the measuring from
``core.studies.handwriting.measure``, the command line from ``core/studies/handwriting/__main__.py``; this module makes
the two styles and the fixed set.

Styles:

``canvas``
    ``uint8 [280, 280, 4]`` RGBA, like ``streamlit-drawable-canvas`` returns it: the glyph of
    a font is skeletonised and the skeleton redrawn with a round brush of random width
    (anti-aliased edge), at a random size, position and slight rotation, with a slight
    wobble. Most images are opaque (white strokes on the black canvas background, alpha
    255 everywhere); some have a transparent background (white strokes whose alpha is the
    stroke coverage), as older versions of the canvas return.
``photo``
    ``uint8 [H, W, 3]`` RGB with H, W of 200-300 px: dark ink (a filled glyph or a pen
    stroke along its skeleton) on paper of a random tone, lit unevenly (a gradient, a
    vignette, often one clearly darker edge), off-centre, rotated, slightly blurred, with
    sensor noise, then saved and re-read as a JPEG of quality 40-90. The digit does not
    fill the frame.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from .glyphs import find_fonts, glyph, skeleton_stroke, transform_glyph

STYLES = ("photo", "canvas")
CANVAS_SIDE = 280  # the pages draw on a 280 x 280 canvas
PHOTO_SIDES = (200, 300)  # photo height and width are drawn from this range
JPEG_QUALITY = (40, 90)
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "assets" / "digits"
STYLE_IDS = {"photo": 1, "canvas": 2}


# --------------------------------------------------------------------------- styles


def _pick_font(rng: np.random.Generator, sans: float = 0.0) -> str | None:
    """A random usable font; with probability ``sans`` one without serifs if there is one.

    People draw digits without serifs, so the drawn styles prefer sans fonts (told by name).
    """
    fonts = find_fonts()
    plain = [f for f in fonts if not _has_serifs(f)]
    if plain and rng.random() < sans:
        fonts = tuple(plain)
    return fonts[int(rng.integers(len(fonts)))] if fonts else None


def _has_serifs(path: str) -> bool:
    """Serif, slab (monospace) or maths fonts, guessed from the file name."""
    name = Path(path).name.lower()
    if any(w in name for w in ("mono", "math", "courier", "typewriter")):
        return True
    return ("serif" in name and "sans" not in name) or "times" in name


def canvas_digit(digit: int, rng: np.random.Generator) -> np.ndarray:
    """One digit as drawn with the mouse on the pages' canvas: RGBA uint8 [280, 280, 4]."""
    mask = glyph(digit, _pick_font(rng, sans=0.75))
    width = float(np.clip(rng.normal(18, 5), 8, 32))  # the pages' brush is 18 px
    height = int(rng.integers(110, 231))
    shape = transform_glyph(mask, rng, rotate=rng.uniform(-12, 12), shear=rng.uniform(-0.25, 0.25),
                       aspect=(0.75, 1.25), wobble=rng.uniform(0.0, 0.03), height=height)
    margin = int(np.ceil(width / 2)) + 2
    stroke = skeleton_stroke(shape, width, margin)
    limit = CANVAS_SIDE - 4
    if max(stroke.shape) > limit:  # keep the whole drawing on the canvas
        scale = limit / max(stroke.shape)
        size = (max(1, int(stroke.shape[1] * scale)), max(1, int(stroke.shape[0] * scale)))
        stroke = np.asarray(Image.fromarray(stroke).resize(size, Image.Resampling.BILINEAR))
    h, w = stroke.shape
    top = int(rng.integers(2, CANVAS_SIDE - h - 1)) if CANVAS_SIDE - h > 3 else 0
    left = int(rng.integers(2, CANVAS_SIDE - w - 1)) if CANVAS_SIDE - w > 3 else 0
    ink = np.zeros((CANVAS_SIDE, CANVAS_SIDE), dtype=np.float32)
    ink[top : top + h, left : left + w] = stroke
    level = np.round(ink * 255).astype(np.uint8)
    rgba = np.zeros((CANVAS_SIDE, CANVAS_SIDE, 4), dtype=np.uint8)
    if rng.random() < 0.7:  # opaque: white strokes on the black background colour
        rgba[..., :3] = level[..., None]
        rgba[..., 3] = 255
    else:  # transparent background: white strokes, alpha is the coverage
        rgba[..., :3] = np.where(level > 0, 255, 0)[..., None]
        rgba[..., 3] = level
    return rgba


def photo_digit(digit: int, rng: np.random.Generator, *, return_jpeg: bool = False):
    """One digit written on paper and photographed: RGB uint8 [H, W, 3] decoded from a JPEG.

    With ``return_jpeg`` also the JPEG bytes, which decode to exactly that array.
    """
    mask = glyph(digit, _pick_font(rng, sans=0.5))
    height_px, width_px = (int(rng.integers(PHOTO_SIDES[0], PHOTO_SIDES[1] + 1)) for _ in range(2))
    short = min(height_px, width_px)
    digit_h = int(short * rng.uniform(0.3, 0.6))
    shape = transform_glyph(mask, rng, rotate=rng.uniform(-20, 20), shear=rng.uniform(-0.2, 0.2),
                       aspect=(0.8, 1.2), wobble=rng.uniform(0.0, 0.02), height=digit_h)
    if rng.random() < 0.5:  # a pen line along the glyph's skeleton rather than the filled glyph
        pen = max(1.5, digit_h * rng.uniform(0.04, 0.12))
        margin = int(np.ceil(pen / 2)) + 2
        shape = skeleton_stroke(shape, pen, margin)
    shape = shape[: height_px - 4, : width_px - 4]
    h, w = shape.shape
    # off-centre: anywhere that keeps the digit in the frame
    top = int(rng.integers(2, height_px - h - 1)) if height_px - h > 3 else 0
    left = int(rng.integers(2, width_px - w - 1)) if width_px - w > 3 else 0
    coverage = np.zeros((height_px, width_px), dtype=np.float32)
    coverage[top : top + h, left : left + w] = shape

    paper = rng.uniform(165, 245) + rng.uniform(-12, 12, size=3)  # white to grey, a tint
    if rng.random() < 0.3:  # ballpoint blue
        ink = np.array([rng.uniform(10, 50), rng.uniform(20, 60), rng.uniform(80, 140)])
    else:  # black or grey (pencil)
        ink = np.full(3, rng.uniform(10, 100)) + rng.uniform(-5, 5, size=3)
    a = coverage[..., None]
    img = paper * (1 - a) + ink * a
    img = img * _lighting(rng, height_px, width_px)[..., None]
    pil = Image.fromarray(np.round(np.clip(img, 0, 255)).astype(np.uint8))
    pil = pil.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.6)))
    noisy = np.asarray(pil, dtype=np.float32) + rng.normal(0, rng.uniform(2, 8),
                                                            size=(height_px, width_px, 3))
    pil = Image.fromarray(np.round(np.clip(noisy, 0, 255)).astype(np.uint8))
    buf = io.BytesIO()
    pil.save(buf, "JPEG", quality=int(rng.integers(JPEG_QUALITY[0], JPEG_QUALITY[1] + 1)))
    data = buf.getvalue()
    with Image.open(io.BytesIO(data)) as im:
        rgb = np.asarray(im.convert("RGB")).copy()
    return (rgb, data) if return_jpeg else rgb


def _lighting(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Illumination factor [H, W] in (0, 1]: a gradient, a vignette, often a darker edge."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    y, x = y / (height - 1), x / (width - 1)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (x - 0.5) * np.cos(angle) + (y - 0.5) * np.sin(angle)
    ramp = (ramp - ramp.min()) / max(float(ramp.max() - ramp.min()), 1e-6)  # 0..1 across
    light = 1 - rng.uniform(0.1, 0.45) * ramp
    r2 = (x - rng.uniform(0.3, 0.7)) ** 2 + (y - rng.uniform(0.3, 0.7)) ** 2
    light *= 1 - rng.uniform(0, 0.35) * r2 / r2.max()
    if rng.random() < 0.6:  # one edge in shadow (a hand, the phone, a fold)
        edge = int(rng.integers(4))
        dist = (x, 1 - x, y, 1 - y)[edge]
        light *= 1 - rng.uniform(0.25, 0.6) * np.exp(-dist / rng.uniform(0.04, 0.15))
    return light


def render(style: str, digit: int, rng: np.random.Generator) -> np.ndarray:
    if style == "canvas":
        return canvas_digit(digit, rng)
    if style == "photo":
        return photo_digit(digit, rng)
    raise ValueError(f"style must be one of {', '.join(STYLES)}, got {style!r}")


def _labels(n: int, seed: int, style: str) -> np.ndarray:
    """0..9 as evenly as ``n`` allows, in an order fixed by the seed."""
    rng = np.random.default_rng([seed, STYLE_IDS[style], 0])
    return rng.permutation(np.arange(n) % 10).astype(np.int64)


def _image_rng(seed: int, style: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, STYLE_IDS[style], 1, index])


def generate(style: str, n: int, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """``n`` digits of ``style`` ("photo" or "canvas") and their labels (int64 0..9).

    Deterministic per seed on one machine (the images depend on its fonts). Classes are
    balanced as far as ``n`` allows. Canvas images are uint8 [280, 280, 4]; photos are
    uint8 [H, W, 3] with H and W between 200 and 300.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    labels = _labels(int(n), seed, style)
    images = [render(style, int(d), _image_rng(seed, style, i)) for i, d in enumerate(labels)]
    return images, labels


# --------------------------------------------------------------------------- the fixed set


@dataclass(frozen=True)
class DigitSet:
    """One style of the fixed set: the images, their labels, and for photos the JPEG bytes."""

    style: str
    images: list[np.ndarray]
    labels: np.ndarray
    files: list[bytes] | None = None  # photo: the JPEG files as a user would upload them


def make_fixed_set(out: Path, n: int = 100, seed: int = 0) -> dict:
    """Write ``n`` photo-like and ``n`` canvas-like digits to ``out``; return a summary.

    Photos go to ``out/photo/NNNN_d<label>.jpg`` (the JPEG files themselves, as uploaded);
    canvas drawings to ``out/canvas.npz`` (``images`` uint8 [n, 280, 280, 4], ``labels``).
    """
    out = Path(out)
    photo_dir = out / "photo"
    photo_dir.mkdir(parents=True, exist_ok=True)
    for old in photo_dir.glob("*.jpg"):
        old.unlink()
    labels = _labels(n, seed, "photo")
    for i, d in enumerate(labels):
        _, data = photo_digit(int(d), _image_rng(seed, "photo", i), return_jpeg=True)
        (photo_dir / f"{i:04d}_d{int(d)}.jpg").write_bytes(data)
    images, canvas_labels = generate("canvas", n, seed)
    np.savez_compressed(out / "canvas.npz", images=np.stack(images), labels=canvas_labels)
    fonts = find_fonts()
    info = {"n": n, "seed": seed, "fonts": [Path(f).name for f in fonts] or ["Pillow default"],
            "photo_labels": labels.tolist(), "canvas_labels": canvas_labels.tolist()}
    (out / "index.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def load_fixed_set(folder: Path = DEFAULT_DIR) -> dict[str, DigitSet]:
    """The shipped fixed set: ``{"photo": DigitSet, "canvas": DigitSet}``."""
    folder = Path(folder)
    files = sorted((folder / "photo").glob("*.jpg"))
    if not files or not (folder / "canvas.npz").is_file():
        raise FileNotFoundError(f"No fixed digit set in {folder} (make one with "
                                "`python -m core.studies.handwriting make --out {folder}`).")
    photos, photo_labels, raw = [], [], []
    for f in files:
        data = f.read_bytes()
        with Image.open(io.BytesIO(data)) as im:
            photos.append(np.asarray(im.convert("RGB")).copy())
        raw.append(data)
        photo_labels.append(int(f.stem.rsplit("_d", 1)[1]))
    with np.load(folder / "canvas.npz", allow_pickle=False) as z:
        canvas_images, canvas_labels = z["images"], z["labels"].astype(np.int64)
    return {
        "photo": DigitSet("photo", photos, np.array(photo_labels, dtype=np.int64), raw),
        "canvas": DigitSet("canvas", list(canvas_images), canvas_labels),
    }


def generated_set(n: int, seed: int) -> dict[str, DigitSet]:
    out = {}
    for style in STYLES:
        images, labels = generate(style, n, seed)
        out[style] = DigitSet(style, images, labels)
    return out
