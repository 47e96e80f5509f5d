"""Turn a drawn or uploaded image into exactly what a model sees.

Two entry points meet the user: ``load_image`` for uploaded bytes and the ``prepare_*``
functions for a PIL image or a numpy array (for example a drawing canvas's RGBA pixels).
Anything a user can hand in either comes out as a model-ready ``uint8`` array or is refused
with an ``InputImageError`` whose message can be shown as is: no traceback, no hang.

Guards against hostile or broken files, in the order ``load_image`` applies them:
* the byte size is capped before Pillow sees anything;
* only a few common formats are tried, which keeps Pillow's rarer decoders out of reach;
* the pixel count is checked from the header, before any pixel is decoded (a tiny PNG can
  declare 100000 x 100000 pixels), and Pillow's own decompression-bomb warning is an error;
* ``load()`` forces the full decode inside the guarded block, so a truncated or corrupt
  file fails here and not later somewhere in the dashboard.

The digit pipeline follows the recipe behind MNIST: bright ink on a black background,
cropped to the ink, scaled so its longer side is 20 px, then placed in a 28 x 28 field so
that its centre of mass sits at the centre.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image, ImageOps

from core.errors import InputImageError

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_PIXELS = 40_000_000  # about a 7300 x 5500 photo; far below what would exhaust memory

# Formats people upload. Restricting Image.open to these keeps Pillow's rarer decoders (and
# their bugs) out of reach; phone JPEGs that are really MPO still open through "JPEG".
ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")

MNIST_SIZE = 28
DIGIT_BOX = 20  # MNIST digits are scaled so the longer side of their ink is 20 px
CENTRE = MNIST_SIZE / 2  # where the centre of mass goes, in pixel-index coordinates
# Ink must stand out from the background by at least this many grey levels; below that the
# "ink" is paper texture or JPEG noise and stretching it would invent a digit.
MIN_CONTRAST = 32
# Pixels brighter than this fraction of the brightest one count as ink when cropping, so
# faint smudges far from the digit do not stretch the crop box.
INK_FRACTION = 0.2
# The grey pipelines end at 28 px, so they first shrink huge photos to this longer side:
# finer detail would only cost time and memory (a 40-megapixel float copy is 160 MB).
WORKING_SIDE = 1024

EMPTY_DIGIT = "The image is empty: draw or upload a digit."
EMPTY_PLAIN = "The image is empty: draw or upload a picture."

Invert = Literal["auto"] | bool


@dataclass(frozen=True)
class PreparedImage:
    """A model-ready image plus what happened on the way, for display.

    ``array`` is uint8, [28, 28] for grey data sets or [size, size, 3] for colour ones.
    ``steps`` holds the intermediate uint8 images the pipeline reached, in order: digit
    "gray", "cropped", "fitted"; plain "gray", "fitted"; colour "rgb", "cropped". An empty
    image stops after "gray".
    """

    array: np.ndarray
    inverted: bool
    warning: str | None
    steps: dict[str, np.ndarray]


# --------------------------------------------------------------------------- loading


def load_image(data: bytes) -> Image.Image:
    """Decode uploaded bytes into a fully loaded, upright RGB or L image, or refuse them."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_image expects bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise InputImageError("The file is empty.")
    if len(data) > MAX_UPLOAD_BYTES:
        raise InputImageError(
            f"The file is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB."
        )

    try:
        # catch_warnings is process-global, not per thread (Streamlit runs sessions in
        # threads); a race can at worst leave this one filter installed, which is harmless.
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as im:
                # Image.open has read only the header so far: refuse before decoding.
                _check_dimensions(*im.size)
                # Multi-frame files (GIF, APNG, WebP) open on their first frame, and load()
                # decodes just that one.
                im.load()
                upright = ImageOps.exif_transpose(im)
    except InputImageError:
        raise
    except Image.UnidentifiedImageError as err:
        raise InputImageError(
            "This file is not an image in a supported format (PNG, JPEG, GIF, BMP or WebP)."
        ) from err
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise InputImageError(
            f"The image has too many pixels; the limit is {MAX_PIXELS / 1e6:.0f} megapixels."
        ) from err
    except Exception as err:
        # Pillow's decoders report damaged data with many exception types (OSError,
        # ValueError, SyntaxError, EOFError, struct.error, ...); to the user they all mean
        # the same thing.
        raise InputImageError(
            "The image file is damaged or incomplete and cannot be read."
        ) from err
    return Image.fromarray(to_array(upright))


def _check_dimensions(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise InputImageError("The image has no pixels.")
    if width * height > MAX_PIXELS:
        raise InputImageError(
            f"The image is {width} x {height} pixels; the limit is "
            f"{MAX_PIXELS / 1e6:.0f} megapixels."
        )


# --------------------------------------------------------------------------- pixels


def to_array(image: Image.Image | np.ndarray) -> np.ndarray:
    """Pixels as uint8, grey [H, W] or RGB [H, W, 3], with any transparency flattened.

    Accepts a PIL image of any mode or a numpy array [H, W], [H, W, 1|2|3|4] that is bool,
    uint8, uint16 (16-bit), another integer type (0..255) or float (0..1, or 0..255 if any
    value exceeds 1).
    """
    if isinstance(image, Image.Image):
        return _pil_pixels(image)
    if isinstance(image, np.ndarray):
        return _array_pixels(image)
    raise TypeError(f"Expected a PIL image or a numpy array, got {type(image).__name__}")


def _pil_pixels(im: Image.Image) -> np.ndarray:
    _check_dimensions(*im.size)
    mode = im.mode
    if mode == "I" or mode.startswith("I;16"):
        # 16-bit grey (a 16-bit PNG opens as I;16). Pillow's convert("L") would clip all
        # above 255 to white instead of scaling, so scale here as uint16. Mode "I" (32-bit)
        # holds whatever its maker put in: 8-bit levels if nothing exceeds 255.
        values = np.asarray(im)
        if mode == "I" and values.max() <= 255:
            return _array_pixels(values)
        return _array_pixels(np.clip(values, 0, 65535).astype(np.uint16))
    if mode == "F":
        return _array_pixels(np.asarray(im))
    grey = mode in ("1", "L", "LA", "La")
    # has_transparency_data also covers palette and colour-key (tRNS) transparency.
    if im.has_transparency_data:
        target = "LA" if grey else "RGBA"
    else:
        target = "L" if grey else "RGB"
    try:
        converted = im.convert(target)
    except (ValueError, OSError) as err:
        raise InputImageError(f"Images in colour mode {mode} are not supported.") from err
    return _array_pixels(np.asarray(converted))


def _array_pixels(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (2, 3, 4)):
        raise InputImageError(
            f"An image must be grey, grey + alpha, RGB or RGBA; got an array of shape {arr.shape}."
        )
    _check_dimensions(arr.shape[1], arr.shape[0])

    if arr.dtype == np.uint8:
        pixels = arr
    elif arr.dtype == np.bool_:
        pixels = arr.astype(np.uint8) * 255
    elif arr.dtype == np.uint16:
        pixels = np.round(arr.astype(np.float32) / 257).astype(np.uint8)
    elif np.issubdtype(arr.dtype, np.integer):
        pixels = np.clip(arr, 0, 255).astype(np.uint8)
    elif np.issubdtype(arr.dtype, np.floating):
        values = arr.astype(np.float32)  # float16 * 255 could overflow
        if not np.isfinite(values).all():
            raise InputImageError("The image contains invalid (NaN or infinite) values.")
        if values.max() <= 1.0:
            values = values * 255
        pixels = np.round(np.clip(values, 0, 255)).astype(np.uint8)
    else:
        raise InputImageError(f"Pixels of type {arr.dtype} are not supported.")

    if pixels.ndim == 3 and pixels.shape[2] in (2, 4):
        return _flatten_alpha(pixels)
    return np.ascontiguousarray(pixels)


def _flatten_alpha(pixels: np.ndarray) -> np.ndarray:
    """Composite grey/colour + alpha onto a plain background.

    The background is white, as for a document, unless the visible content is itself light
    (white strokes on a transparent canvas): then it is black, so the strokes stay visible
    instead of vanishing into white.
    """
    colour = pixels[..., :-1].astype(np.float32)
    alpha = pixels[..., -1:].astype(np.float32) / 255
    coverage = alpha.sum()
    light_content = (
        coverage > 0 and (colour.mean(axis=-1, keepdims=True) * alpha).sum() / coverage > 127.5
    )
    background = 0.0 if light_content else 255.0
    flat = colour * alpha + background * (1 - alpha)
    if flat.shape[2] == 1:
        flat = flat[..., 0]
    return np.round(flat).astype(np.uint8)


def _grey(image: Image.Image | np.ndarray) -> np.ndarray:
    """Grey uint8 [H, W] (ITU-R 601 luma), area-averaged down to at most WORKING_SIDE."""
    grey = Image.fromarray(to_array(image)).convert("L")
    grey.thumbnail((WORKING_SIDE, WORKING_SIDE), Image.Resampling.BOX)  # only ever shrinks
    return np.asarray(grey)


# --------------------------------------------------------------------------- grey pipelines


def prepare_digit(image: Image.Image | np.ndarray, *, invert: Invert = "auto") -> PreparedImage:
    """MNIST-style 28 x 28: bright ink on black, cropped, fitted into 20 x 20, mass-centred.

    ``invert``: "auto" inverts when the background (the border's median) is light; True or
    False forces it. An image without ink gives a blank result and a ``warning``.
    """
    grey = _grey(image)
    ink, inverted = _ink_on_black(grey, invert)
    if ink is None:
        return _blank(grey, inverted, EMPTY_DIGIT)

    cropped = _crop_to_ink(ink)
    fitted = _fit(cropped, DIGIT_BOX)
    # Like MNIST: shift so the centre of mass (not the box centre) lands on the field's centre.
    rows, cols = np.indices(fitted.shape)
    mass = fitted.sum()
    top = round(CENTRE - (rows * fitted).sum() / mass)
    left = round(CENTRE - (cols * fitted).sum() / mass)
    array = _paste(fitted, top, left)
    steps = {"gray": grey, "cropped": _to_uint8(cropped), "fitted": _to_uint8(fitted)}
    return PreparedImage(array=array, inverted=inverted, warning=None, steps=steps)


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


def _crop_to_ink(ink: np.ndarray) -> np.ndarray:
    mask = ink > INK_FRACTION * ink.max()
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    return ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


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
    field = np.zeros((MNIST_SIZE, MNIST_SIZE), dtype=np.float32)
    y0, x0 = max(top, 0), max(left, 0)
    y1 = min(top + image.shape[0], MNIST_SIZE)
    x1 = min(left + image.shape[1], MNIST_SIZE)
    field[y0:y1, x0:x1] = image[y0 - top : y1 - top, x0 - left : x1 - left]
    return _to_uint8(field)


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
) -> PreparedImage:
    """Prepare ``image`` for a data set whose images have ``image_shape``.

    (28, 28): ``mode="digit"`` (MNIST) crops to the ink and mass-centres it; ``mode="plain"``
    (Fashion-MNIST) fits the whole image. (S, S, 3): ``prepare_rgb`` at size S.
    """
    if mode not in ("digit", "plain"):
        raise ValueError(f"mode must be 'digit' or 'plain', got {mode!r}")
    shape = tuple(image_shape)
    if shape == (MNIST_SIZE, MNIST_SIZE):
        return prepare_digit(image) if mode == "digit" else prepare_plain(image)
    if len(shape) == 3 and shape[2] == 3 and shape[0] == shape[1]:
        return prepare_rgb(image, size=shape[0])
    raise ValueError(f"No preprocessing for image shape {shape}")
