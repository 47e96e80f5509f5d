"""Digits like people draw and photograph them, made from the machine's own fonts.

MNIST models meet two kinds of digit on the pages: one drawn with the mouse on the drawing
canvas (thick, round, white strokes on black, an RGBA 280 x 280 array) and one photographed
on paper and uploaded (dark ink on light paper, uneven light, JPEG). This module makes both
kinds from nothing but the TrueType/OpenType fonts installed on the machine, without a data
set or the network, so the whole way from such an image to a prediction can be measured:

* ``generate(style, n, seed)`` gives ``n`` images of one style and their labels 0-9,
  deterministic per seed (on one machine: the images depend on the fonts it has);
* ``python -m core.handdigits make --out assets/digits --n 100`` writes the small fixed set
  that is shipped in ``assets/digits/`` (see its README), so results compare across machines;
* ``python -m core.handdigits measure --models pretrained`` prints, for every shipped MNIST
  model, the share of each set it recognises after ``core.preprocess`` as the pages apply
  it (``--json PATH`` also writes the numbers).

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

import argparse
import io
import json
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

STYLES = ("photo", "canvas")
CANVAS_SIDE = 280  # the pages draw on a 280 x 280 canvas
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts")
FONT_SUFFIXES = (".ttf", ".otf")
GLYPH_PX = 160  # font size at which glyphs are rendered before they are transformed
PHOTO_SIDES = (200, 300)  # photo height and width are drawn from this range
JPEG_QUALITY = (40, 90)
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "assets" / "digits"
STYLE_IDS = {"photo": 1, "canvas": 2}


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
    return tuple(p for p in sorted(found) if _renders_digits(p))


def _renders_digits(path: str) -> bool:
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
        except TypeError:  # older Pillow: a small bitmap font; _glyph upscales it
            return ImageFont.load_default()
    return ImageFont.truetype(path, size)


def _glyph(digit: int, font_path: str | None) -> np.ndarray:
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


def _transform(mask: np.ndarray, rng: np.random.Generator, *, rotate: float, shear: float,
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


def _skeleton_stroke(mask: np.ndarray, width: float, margin: int) -> np.ndarray:
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
    glyph = _glyph(digit, _pick_font(rng, sans=0.75))
    width = float(np.clip(rng.normal(18, 5), 8, 32))  # the pages' brush is 18 px
    height = int(rng.integers(110, 231))
    shape = _transform(glyph, rng, rotate=rng.uniform(-12, 12), shear=rng.uniform(-0.25, 0.25),
                       aspect=(0.75, 1.25), wobble=rng.uniform(0.0, 0.03), height=height)
    margin = int(np.ceil(width / 2)) + 2
    stroke = _skeleton_stroke(shape, width, margin)
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
    glyph = _glyph(digit, _pick_font(rng, sans=0.5))
    height_px, width_px = (int(rng.integers(PHOTO_SIDES[0], PHOTO_SIDES[1] + 1)) for _ in range(2))
    short = min(height_px, width_px)
    digit_h = int(short * rng.uniform(0.3, 0.6))
    shape = _transform(glyph, rng, rotate=rng.uniform(-20, 20), shear=rng.uniform(-0.2, 0.2),
                       aspect=(0.8, 1.2), wobble=rng.uniform(0.0, 0.02), height=digit_h)
    if rng.random() < 0.5:  # a pen line along the glyph's skeleton rather than the filled glyph
        pen = max(1.5, digit_h * rng.uniform(0.04, 0.12))
        margin = int(np.ceil(pen / 2)) + 2
        shape = _skeleton_stroke(shape, pen, margin)
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
                                "`python -m core.handdigits make --out {folder}`).")
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


# --------------------------------------------------------------------------- measuring


def page_input(style: str, image: np.ndarray, file: bytes | None = None):
    """``PreparedImage`` exactly as the pages make it for an MNIST model.

    canvas: the Mechanisms page hands the canvas's RGBA array to ``prepare_for_dataset``;
    photo: an upload's bytes go through ``load_image`` and then ``prepare_for_dataset``
    (``pages.common.prepare_upload``). A photo without its file is sent as a PNG.
    """
    from core.data import DATASETS
    from core.preprocess import load_image, prepare_for_dataset

    shape = DATASETS["mnist"].image_shape
    if style == "canvas":
        return prepare_for_dataset(image, shape, mode="digit")
    if file is None:
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, "PNG")
        file = buf.getvalue()
    return prepare_for_dataset(load_image(file), shape, mode="digit")


def prepared_inputs(sets: dict[str, DigitSet]) -> dict[str, np.ndarray]:
    """The 28 x 28 model inputs of every set, ``{style: uint8 [n, 28, 28]}``."""
    out = {}
    for style, s in sets.items():
        files = s.files or [None] * len(s.images)
        out[style] = np.stack([page_input(style, im, f).array for im, f in zip(s.images, files)])
    return out


def _mnist_sample():
    path = Path(__file__).resolve().parent.parent / "assets" / "samples" / "mnist_sample.npz"
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as z:
        return z["x"], z["y"].astype(np.int64)


def measure(entries, sets: dict[str, DigitSet], *, reference: bool = True) -> list[dict]:
    """For each model entry, the share of every set it recognises; one dict per model.

    With ``reference`` also the shipped 1,000-image MNIST sample as is ("mnist") and after
    ``prepare_digit`` ("mnist_prep"), which shows what preprocessing costs on real MNIST.
    """
    from core.catalog import load_entry
    from core.evaluate import predict_proba
    from core.preprocess import prepare_digit

    inputs = prepared_inputs(sets)
    labels = {style: s.labels for style, s in sets.items()}
    sample = _mnist_sample() if reference else None
    if sample is not None:
        inputs["mnist"], labels["mnist"] = sample
        inputs["mnist_prep"] = np.stack([prepare_digit(x).array for x in sample[0]])
        labels["mnist_prep"] = sample[1]
    rows = []
    for entry in entries:
        row = {"model": entry.model, "key": entry.key, "protocol": entry.protocol or "",
               "label": entry.display}
        try:
            model, _ = load_entry(entry)
        except Exception as exc:  # noqa: BLE001 - report, measure the others
            row["error"] = str(exc)
            rows.append(row)
            continue
        for name, x in inputs.items():
            pred = predict_proba(model, x).argmax(axis=1)
            row[name] = float((pred == labels[name]).mean())
        rows.append(row)
    return rows


def _entries(which: str):
    from core import catalog

    if which == "pretrained":
        return catalog.pretrained_entries("mnist")
    if which == "all":
        return catalog.list_entries("mnist")
    raise ValueError(f"--models must be 'pretrained' or 'all', got {which!r}")


def format_table(rows: list[dict], counts: dict[str, int]) -> str:
    cols = [c for c in ("photo", "canvas", "mnist", "mnist_prep") if any(c in r for r in rows)]
    head = {"photo": f"photo ({counts.get('photo', 0)})", "canvas": f"canvas ({counts.get('canvas', 0)})",
            "mnist": "MNIST sample", "mnist_prep": "MNIST sample, preprocessed"}
    names = [f"{r['model']}" + (f" [{r['protocol']}]" if r.get("protocol") else "") for r in rows]
    width = max([len("model")] + [len(n) for n in names])
    lines = ["model".ljust(width) + "  " + "  ".join(head[c].rjust(max(len(head[c]), 6)) for c in cols)]
    for name, r in zip(names, rows):
        if "error" in r:
            lines.append(name.ljust(width) + "  " + r["error"])
            continue
        lines.append(name.ljust(width) + "  " + "  ".join(
            f"{100 * r[c]:.1f}%".rjust(max(len(head[c]), 6)) for c in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.handdigits", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make", help="write the fixed set of photo-like and canvas-like digits")
    make.add_argument("--out", type=Path, default=DEFAULT_DIR)
    make.add_argument("--n", type=int, default=100, help="digits per style")
    make.add_argument("--seed", type=int, default=0)
    meas = sub.add_parser("measure", help="share of the digits each MNIST model recognises")
    meas.add_argument("--models", default="pretrained", help="'pretrained' (shipped) or 'all' (with runs)")
    meas.add_argument("--data", type=Path, default=DEFAULT_DIR, help="folder of the fixed set")
    meas.add_argument("--generate", type=int, metavar="N", default=0,
                      help="measure on N freshly generated digits per style instead of the fixed set")
    meas.add_argument("--seed", type=int, default=0, help="seed for --generate")
    meas.add_argument("--no-reference", action="store_true",
                      help="leave out the shipped MNIST sample (as is and preprocessed)")
    meas.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    if args.command == "make":
        info = make_fixed_set(args.out, args.n, args.seed)
        size = sum(f.stat().st_size for f in Path(args.out).rglob("*") if f.is_file())
        print(f"wrote {args.n} photo-like and {args.n} canvas-like digits to {args.out} "
              f"({size / 1024:.0f} KiB, fonts: {', '.join(info['fonts'])})")
        return 0

    start = time.perf_counter()
    try:
        sets = generated_set(args.generate, args.seed) if args.generate else load_fixed_set(args.data)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    entries = _entries(args.models)
    if not entries:
        print("No MNIST models found.", file=sys.stderr)
        return 2
    rows = measure(entries, sets, reference=not args.no_reference)
    counts = {k: len(v.labels) for k, v in sets.items()}
    print(format_table(rows, counts))
    print(f"({'generated, seed ' + str(args.seed) if args.generate else args.data}; "
          f"{time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"source": "generated" if args.generate else str(args.data),
                                         "seed": args.seed, "counts": counts, "models": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
