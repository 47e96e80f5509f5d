"""Turn a drawn or uploaded image into exactly what a model sees.

Two entry points meet the user: ``load_image`` for uploaded bytes and the ``prepare_*``
functions for a PIL image or a numpy array (for example a drawing canvas's RGBA pixels).
Anything a user can hand in either comes out as a model-ready ``uint8`` array or is refused
with an ``InputImageError`` whose message can be shown as is: no traceback, no hang.

Three modules share the work:
* ``core.digits.load``: uploaded bytes and in-memory images to plain uint8 pixels, with the
  guards against hostile or broken files (``load_image``, ``to_array``, the size limits);
* ``core.digits.ink``: the digit pipeline's ink steps (polarity, background, ink threshold,
  stroke width) and their settings;
* this module: the model inputs (``prepare_digit``, ``prepare_plain``, ``prepare_rgb``,
  ``prepare_for_dataset``): fitting, centring and the 28 x 28 field.

The digit pipeline follows the recipe behind MNIST: bright ink on a black background,
cropped to the ink, scaled so its longer side is 20 px, then placed in a 28 x 28 field so
that its centre of mass sits at the centre. Before that it undoes what a drawing or a photo
adds: the polarity (dark ink on paper is inverted), uneven lighting (the background is
estimated and subtracted, so a shadowed edge does not survive as a bar), faint or noisy ink
(Otsu's threshold, specks dropped, contrast stretched to 255), the pen (strokes far
thicker or thinner than MNIST's are eroded or redrawn to its width) and a form reader's stretching (a
digit filling a square picture on all four sides is narrowed to MNIST's typical width). ``core.digits.synth`` makes
drawn-like and photo-like digits and measures how well the shipped models read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image

from .ink import (
    DIGIT_BOX,
    MIN_CONTRAST,
    ink_is_dark,
    ink_mask,
    normalise_strokes,
    subtract_background,
)
from .load import to_array

MNIST_SIZE = 28
CENTRE = MNIST_SIZE / 2  # where the centre of mass goes, in pixel-index coordinates
DRAWN_EDGE_KEEP = 2  # a drawing: black pixels kept between its ink and every edge (``edge_keep``)
# The grey pipelines end at 28 px, so they first shrink huge photos to this longer side:
# finer detail would only cost time and memory (a 40-megapixel float copy is 160 MB).
WORKING_SIDE = 1024

# A digit whose ink touches all four edges of a square picture was stretched to fill its box,
# as Semeion's 16 x 16 digits and other form readers' are: its own width is lost (a "1" comes
# as wide as a "0"). Such a box is narrowed to MNIST's typical width before fitting: the
# median ink width / height of MNIST's 60,000 training digits (threshold 128) is 0.75.
STRETCHED_ASPECT = 0.75
SQUARE_TOLERANCE = 0.05  # a picture is square when its sides differ by at most this share
EDGE_MARGIN = 0.02  # ink within this share of the side from an edge touches it (at least 1 px)
NARROWED_NOTE = ("the ink fills the square picture on all four sides, so it was read as a digit stretched to "
                 f"fill its box (its own width is unknown) and narrowed to MNIST's usual {STRETCHED_ASPECT:g} "
                 "of its height")

EMPTY_DIGIT = "The image is empty: draw or upload a digit."
EMPTY_PLAIN = "The image is empty: draw or upload a picture."

Invert = Literal["auto"] | bool


@dataclass(frozen=True)
class PreparedImage:
    """A model-ready image plus what happened on the way, for display.

    ``array`` is uint8, [28, 28] for grey data sets or [size, size, 3] for colour ones.
    ``steps`` holds the intermediate uint8 images the pipeline reached, in order: digit
    "gray", "cropped", ("narrowed",) "fitted"; plain "gray", "fitted"; colour "rgb", "cropped".
    An empty image stops after "gray". ``notes`` says in words what the pipeline did beyond
    the usual steps (a stretched digit narrowed).
    """

    array: np.ndarray
    inverted: bool
    warning: str | None
    steps: dict[str, np.ndarray]
    notes: tuple[str, ...] = ()


def _grey(image: Image.Image | np.ndarray) -> np.ndarray:
    """Grey uint8 [H, W] (ITU-R 601 luma), area-averaged down to at most WORKING_SIDE."""
    grey = Image.fromarray(to_array(image)).convert("L")
    grey.thumbnail((WORKING_SIDE, WORKING_SIDE), Image.Resampling.BOX)  # only ever shrinks
    return np.asarray(grey)


# --------------------------------------------------------------------------- grey pipelines


def prepare_digit(image: Image.Image | np.ndarray, *, invert: Invert = "auto", edge_keep: int = 0) -> PreparedImage:
    """MNIST-style 28 x 28: bright ink on black, cropped, fitted into 20 x 20, mass-centred.

    The steps, following the recipe behind MNIST:

    1. polarity: ``invert="auto"`` inverts when the ink is darker than its surroundings
       (see ``core.digits.ink.ink_is_dark``); True or False forces it;
    2. the background (paper, uneven light, a shadowed edge) is estimated and subtracted,
       so the background is 0 everywhere (``subtract_background``);
    3. ink is told from background by Otsu's threshold (never below the noise), specks are
       dropped, and the ink is stretched so that it reaches 255 (``ink_mask``);
    4. crop to the ink; strokes more than ``STROKE_TOLERANCE`` times thicker or thinner than
       the target width (``STROKE_WIDTH`` at 28 x 28) are brought to it, thick ones eroded, thin
       ones redrawn along their skeleton, so a thick marker, the canvas's brush on a small
       drawing and a thin pen give alike digits (``normalise_strokes``);
    5. a digit stretched to fill a square picture (its ink touches all four edges) is
       narrowed to MNIST's typical width, ``STRETCHED_ASPECT`` of its height (``_unstretch``);
    6. fit into 20 x 20 keeping the aspect ratio, and place so that the centre of mass is at
       the centre of the 28 x 28 field, as far as the ink keeps ``edge_keep`` black pixels from
       every edge (0, MNIST's recipe: uploads and the studies; ``DRAWN_EDGE_KEEP`` for a
       drawing, whose 7 would otherwise stand on the bottom edge of what the model sees).

    An image without ink gives a blank result and a ``warning``.
    """
    if invert not in ("auto", True, False):
        raise ValueError(f"invert must be 'auto', True or False, got {invert!r}")
    grey = _grey(image)
    values = grey.astype(np.float32)
    inverted = ink_is_dark(values) if invert == "auto" else bool(invert)
    if inverted:
        values = 255 - values
    ink, mask = ink_mask(subtract_background(values, relative=inverted), values)
    if ink is None:
        return _blank(grey, inverted, EMPTY_DIGIT)

    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    cropped, crop_mask = ink[box], mask[box]
    steps = {"gray": grey, "cropped": _to_uint8(cropped)}
    notes: tuple[str, ...] = ()
    if _stretched(mask.shape, rows, cols):
        cropped, crop_mask = _unstretch(cropped, crop_mask)
        steps["narrowed"] = _to_uint8(cropped)
        notes = (NARROWED_NOTE,)
    fitted = _fit(normalise_strokes(crop_mask, cropped), DIGIT_BOX)
    if fitted.max() <= 0.5:  # nothing would survive rounding to uint8
        return _blank(grey, inverted, EMPTY_DIGIT)
    # Like MNIST, whose digits all reach 255: thin strokes lose some of their peak when
    # shrunk to 20 px, so stretch once more.
    fitted = fitted * (255 / fitted.max())
    # Like MNIST: shift so the centre of mass (not the box centre) lands on the field's centre.
    top, left = _mass_offsets(fitted, edge_keep)
    array = _paste(fitted, top, left)
    steps["fitted"] = _to_uint8(fitted)
    return PreparedImage(array=array, inverted=inverted, warning=None, steps=steps, notes=notes)


def _stretched(shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray) -> bool:
    """Whether the ink (its ``rows`` and ``cols``) touches all four edges of a square picture."""
    height, width = shape
    if abs(height - width) > SQUARE_TOLERANCE * max(height, width):
        return False
    margin = max(1, round(EDGE_MARGIN * max(height, width)))
    return bool(rows[0] < margin and rows[-1] >= height - margin and cols[0] < margin and cols[-1] >= width - margin)


def _unstretch(cropped: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cropped ink and its mask narrowed to ``STRETCHED_ASPECT`` of their height (the crop of
    a ``_stretched`` digit is the whole, nearly square picture, so this always narrows it)."""
    height = cropped.shape[0]
    new_width = max(1, round(STRETCHED_ASPECT * height))
    ink = Image.fromarray(cropped.astype(np.float32)).resize((new_width, height), Image.Resampling.BILINEAR)
    shape = Image.fromarray(mask.astype(np.float32)).resize((new_width, height), Image.Resampling.BILINEAR)
    return np.clip(np.asarray(ink), 0, 255), np.asarray(shape) >= 0.5


def _mass_offsets(fitted: np.ndarray, edge_keep: int = 0) -> tuple[int, int]:
    """Whole-pixel offsets that put the centre of mass at the field's centre (as MNIST), as far
    as the ink keeps ``edge_keep`` black pixels from every edge (a 7's mass is high up: centred,
    its foot can touch the bottom edge).

    Whole pixels keep the ink inside a 20 x 20 box; a sub-pixel shift would smear it into 21.
    """
    rows, cols = np.indices(fitted.shape)
    mass = fitted.sum()
    top = round(CENTRE - (rows * fitted).sum() / mass)
    left = round(CENTRE - (cols * fitted).sum() / mass)
    height, width = fitted.shape
    top = min(max(top, edge_keep), MNIST_SIZE - edge_keep - height) if edge_keep else top
    left = min(max(left, edge_keep), MNIST_SIZE - edge_keep - width) if edge_keep else left
    return top, left


def prepare_plain(image: Image.Image | np.ndarray, *, invert: Invert = "auto") -> PreparedImage:
    """Fashion-MNIST-style 28 x 28: bright object on black, the whole image fitted and centred.

    Unlike ``prepare_digit`` nothing is cropped: the object keeps its size within the frame.
    """
    grey = _grey(image)
    ink, inverted = _ink_on_black(grey, invert)
    if ink is None:
        return _blank(grey, inverted, EMPTY_PLAIN)

    fitted = _fit(ink, MNIST_SIZE)
    top = (MNIST_SIZE - fitted.shape[0]) // 2
    left = (MNIST_SIZE - fitted.shape[1]) // 2
    array = _paste(fitted, top, left)
    return PreparedImage(
        array=array,
        inverted=inverted,
        warning=None,
        steps={"gray": grey, "fitted": _to_uint8(fitted)},
    )


def _ink_on_black(grey: np.ndarray, invert: Invert) -> tuple[np.ndarray | None, bool]:
    """Float image with the background at 0 and the brightest ink at 255 (None if no ink).

    MNIST backgrounds are exactly 0, so the background level (the border's median, robust to
    ink touching the edge) is subtracted and the rest stretched, which also evens out a
    photographed page's grey paper and faint pencil.
    """
    if invert not in ("auto", True, False):
        raise ValueError(f"invert must be 'auto', True or False, got {invert!r}")
    values = grey.astype(np.float32)
    border = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
    inverted = bool(np.median(border) > 127.5) if invert == "auto" else bool(invert)
    if inverted:
        values = 255 - values
        border = 255 - border
    background = float(np.median(border))
    contrast = float(values.max()) - background
    if contrast < MIN_CONTRAST:
        return None, inverted
    return np.clip((values - background) * (255 / contrast), 0, 255), inverted


def _fit(image: np.ndarray, box: int) -> np.ndarray:
    """Resize so the longer side is ``box``, keeping the aspect ratio (anti-aliased)."""
    height, width = image.shape
    scale = box / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    # Pillow widens the filter when shrinking, so this is anti-aliased. Bilinear rather than
    # Lanczos: its weights are never negative, so no ringing halo appears around the strokes
    # on the black background (MNIST has none). Mode "F" keeps the float precision.
    resized = Image.fromarray(image.astype(np.float32)).resize(size, Image.Resampling.BILINEAR)
    return np.clip(np.asarray(resized), 0, 255)


def _paste(image: np.ndarray, top: int, left: int) -> np.ndarray:
    """Place ``image`` with its top-left corner at (top, left) on a black 28 x 28 field.

    Whatever falls outside the field is cut off. The offsets always overlap the field: the
    image is at most 28 px and, for mass-centring, its centre of mass lies inside it.
    """
    return _to_uint8(_paste_float(image, top, left))


def _paste_float(image: np.ndarray, top: int, left: int) -> np.ndarray:
    field = np.zeros((MNIST_SIZE, MNIST_SIZE), dtype=np.float32)
    y0, x0 = max(top, 0), max(left, 0)
    y1 = min(top + image.shape[0], MNIST_SIZE)
    x1 = min(left + image.shape[1], MNIST_SIZE)
    if y1 > y0 and x1 > x0:
        field[y0:y1, x0:x1] = image[y0 - top : y1 - top, x0 - left : x1 - left]
    return field


def _blank(grey: np.ndarray, inverted: bool, warning: str) -> PreparedImage:
    blank = np.zeros((MNIST_SIZE, MNIST_SIZE), dtype=np.uint8)
    return PreparedImage(array=blank, inverted=inverted, warning=warning, steps={"gray": grey})


def _to_uint8(image: np.ndarray) -> np.ndarray:
    return np.round(np.clip(image, 0, 255)).astype(np.uint8)


# --------------------------------------------------------------------------- colour


def prepare_rgb(image: Image.Image | np.ndarray, size: int = 32) -> PreparedImage:
    """CIFAR-10 / Animals-10 style: RGB, centre-cropped to a square, resized to size x size."""
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    pixels = to_array(image)
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[..., None], 3, axis=2)
    height, width = pixels.shape[:2]
    side = min(height, width)
    top, left = (height - side) // 2, (width - side) // 2
    square = pixels[top : top + side, left : left + side]
    resized = Image.fromarray(square).resize((size, size), Image.Resampling.LANCZOS)
    return PreparedImage(
        array=np.asarray(resized).copy(),
        inverted=False,
        warning=None,
        steps={"rgb": pixels, "cropped": square},
    )


# --------------------------------------------------------------------------- dispatch


def prepare_for_dataset(
    image: Image.Image | np.ndarray,
    image_shape: tuple[int, ...],
    *,
    mode: Literal["digit", "plain"] = "digit",
    edge_keep: int = 0,
) -> PreparedImage:
    """Prepare ``image`` for a data set whose images have ``image_shape``.

    (28, 28): ``mode="digit"`` (MNIST) crops to the ink and mass-centres it; ``mode="plain"``
    (Fashion-MNIST) fits the whole image. (S, S, 3): ``prepare_rgb`` at size S. ``edge_keep``:
    see :func:`prepare_digit`.
    """
    if mode not in ("digit", "plain"):
        raise ValueError(f"mode must be 'digit' or 'plain', got {mode!r}")
    shape = tuple(image_shape)
    if shape == (MNIST_SIZE, MNIST_SIZE):
        return prepare_digit(image, edge_keep=edge_keep) if mode == "digit" else prepare_plain(image)
    if len(shape) == 3 and shape[2] == 3 and shape[0] == shape[1]:
        return prepare_rgb(image, size=shape[0])
    raise ValueError(f"No preprocessing for image shape {shape}")
