"""Uploaded bytes and in-memory images to plain uint8 pixels, or a refusal a user can read.

``load_image`` decodes uploaded bytes; ``to_array`` turns a PIL image of any mode or a numpy
array of any common shape and type into grey [H, W] or RGB [H, W, 3] uint8 with transparency
flattened. Anything a user can hand in either comes out that way or is refused with an
``InputImageError`` whose message can be shown as is: no traceback, no hang.
``core.digits.prepare`` builds the model inputs on top of these.

Guards against hostile or broken files, in the order ``load_image`` applies them:
* the byte size is capped before Pillow sees anything;
* only a few common formats are tried, which keeps Pillow's rarer decoders out of reach;
* the pixel count is checked from the header, before any pixel is decoded (a tiny PNG can
  declare 100000 x 100000 pixels): at most ``MAX_PIXELS`` are ever decoded. A larger JPEG (a
  phone photo of 48 megapixels or more) is decoded reduced, by a half, a quarter or an eighth
  (``Image.draft``: the decoder skips the detail, the full image never exists in memory); a
  larger image of another format cannot be reduced while decoding and is refused. Pillow's own
  decompression-bomb limit (twice ``Image.MAX_IMAGE_PIXELS`` declared) refuses the rest;
* ``load()`` forces the full decode inside the guarded block, so a truncated or corrupt
  file fails here and not later somewhere in the dashboard.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, ImageOps, JpegImagePlugin

from ..errors import InputImageError

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # the upload widget's limit (server.maxUploadSize); a 48 MP phone JPEG fits
MAX_PIXELS = 40_000_000  # decoded at most (about a 7300 x 5500 photo); far below what would exhaust memory
JPEG_REDUCTIONS = (2, 4, 8)  # the scales a JPEG decoder can skip to (Image.draft)

# Formats people upload. Restricting Image.open to these keeps Pillow's rarer decoders (and
# their bugs) out of reach; phone JPEGs that are really MPO still open through "JPEG".
ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")


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
            # between MAX_PIXELS and Pillow's hard limit, the bound below decides (a JPEG is read reduced)
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as im:
                # Image.open has read only the header so far: reduce or refuse before decoding.
                _reduce_while_decoding(im)
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
    except Image.DecompressionBombError as err:
        raise InputImageError(
            f"The image has more than {2 * Image.MAX_IMAGE_PIXELS / 1e6:.0f} megapixels, over the limit of what "
            "can be read even reduced: scale it down first."
        ) from err
    except Exception as err:
        # Pillow's decoders report damaged data with many exception types (OSError,
        # ValueError, SyntaxError, EOFError, struct.error, ...); to the user they all mean
        # the same thing.
        raise InputImageError(
            "The image file is damaged or incomplete and cannot be read."
        ) from err
    return Image.fromarray(to_array(upright))


def _reduce_while_decoding(im: Image.Image) -> None:
    """Before any pixel is decoded: a JPEG larger than ``MAX_PIXELS`` is set to decode at the
    smallest reduction that fits (``Image.draft``); any other image larger than that, or a JPEG
    too large even at an eighth, is refused with one line."""
    width, height = im.size
    if width < 1 or height < 1 or width * height <= MAX_PIXELS:
        _check_dimensions(width, height)
        return
    mp = f"{width} x {height} pixels ({width * height / 1e6:.0f} megapixels)"
    if not isinstance(im, JpegImagePlugin.JpegImageFile):
        raise InputImageError(f"The image is {mp}; a {im.format or 'file'} this large cannot be read reduced "
                              f"and the limit is {MAX_PIXELS / 1e6:.0f} megapixels: scale it down or save it as JPEG.")
    scale = next((s for s in JPEG_REDUCTIONS if -(-width // s) * -(-height // s) <= MAX_PIXELS), None)
    if scale is None:
        raise InputImageError(f"The image is {mp}; even read at an eighth of its size it is over the limit of "
                              f"{MAX_PIXELS / 1e6:.0f} megapixels: scale it down first.")
    im.draft(im.mode, (-(-width // scale), -(-height // scale)))
    _check_dimensions(*im.size)  # what the decoder will hold


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
