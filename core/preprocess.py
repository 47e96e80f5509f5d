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
that its centre of mass sits at the centre. Before that it undoes what a drawing or a photo
adds: the polarity (dark ink on paper is inverted), uneven lighting (the background is
estimated and subtracted, so a shadowed edge does not survive as a bar), faint or noisy ink
(Otsu's threshold, specks dropped, contrast stretched to 255) and the pen (strokes far
thicker or thinner than MNIST's are redrawn at its width). ``core.handdigits`` makes
drawn-like and photo-like digits and measures how well the shipped models read them.
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
# Digit pipeline (prepare_digit). Backgrounds are estimated on copies of at most this many
# px (longer side): lighting varies slowly, so finer detail only costs time.
BACKGROUND_SIDE = 256
POLARITY_SIDE = 64
# The background window, as a fraction of the image's longer side: wider than any stroke
# (the opening keeps monotone lighting whatever the window, so wide is safe).
BACKGROUND_SPAN = 0.5
# The polarity's median filter, as a fraction of the shorter side.
POLARITY_SPAN = 0.4
# A border piece whose edge rises by more than this share of its height per pixel (at the
# background's resolution) is ink; a shadow's is softer (about 0.1-0.2 for one fading over
# 4 % of the image). Blurred, JPEG-compressed ink edges rise by about 0.5.
SHARP_EDGE = 0.3
POLARITY_NOISE = 12.0  # grey levels a pixel must stick out by to count for the polarity
NOISE_SIGMAS = 4.0  # the ink threshold is at least this many noise sigmas above the paper
SPECK_FRACTION = 0.03  # ink pieces smaller than this share of the largest one are specks
INK_PERCENTILE = 90  # this percentile of the ink becomes 255 (contrast stretch)
# Strokes that are clearly thicker or thinner than MNIST's are redrawn with a round brush
# this many px wide at 28 x 28. Read back the way MNIST's own strokes were measured (ink area
# at level >= 128 / skeleton length), such strokes are 2.9 px wide; MNIST's median on the
# shipped sample is 2.85 px (10-90 %: 2.0-3.9 px).
STROKE_WIDTH = 2.4
# Strokes whose width is within this factor of the brush's are left as they are: about 90 %
# of MNIST's own digits are.
STROKE_TOLERANCE = 1.5
STROKE_SIDE = 80  # the skeleton is taken with the digit this many px long (4 x DIGIT_BOX)
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

    The steps, following the recipe behind MNIST:

    1. polarity: ``invert="auto"`` inverts when the ink is darker than its surroundings
       (see ``_ink_is_dark``); True or False forces it;
    2. the background (paper, uneven light, a shadowed edge) is estimated and subtracted,
       so the background is 0 everywhere (``_subtract_background``);
    3. ink is told from background by Otsu's threshold (never below the noise), specks are
       dropped, and the ink is stretched so that it reaches 255 (``_ink_mask``);
    4. crop to the ink; strokes much thicker or thinner than MNIST's (about 2.9 px at
       28 x 28) are redrawn along their skeleton at that width, so a thick marker, the
       canvas's brush on a small drawing and a thin pen give alike digits
       (``_normalise_strokes``);
    5. fit into 20 x 20 keeping the aspect ratio, and place so that the centre of mass is at
       the centre of the 28 x 28 field.

    An image without ink gives a blank result and a ``warning``.
    """
    if invert not in ("auto", True, False):
        raise ValueError(f"invert must be 'auto', True or False, got {invert!r}")
    grey = _grey(image)
    values = grey.astype(np.float32)
    inverted = _ink_is_dark(values) if invert == "auto" else bool(invert)
    if inverted:
        values = 255 - values
    ink, mask = _ink_mask(_subtract_background(values, relative=inverted), values)
    if ink is None:
        return _blank(grey, inverted, EMPTY_DIGIT)

    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    cropped = ink[box]
    fitted = _fit(_normalise_strokes(mask[box], cropped), DIGIT_BOX)
    if fitted.max() <= 0.5:  # nothing would survive rounding to uint8
        return _blank(grey, inverted, EMPTY_DIGIT)
    # Like MNIST, whose digits all reach 255: thin strokes lose some of their peak when
    # shrunk to 20 px, so stretch once more.
    fitted = fitted * (255 / fitted.max())
    # Like MNIST: shift so the centre of mass (not the box centre) lands on the field's centre.
    top, left = _mass_offsets(fitted)
    array = _paste(fitted, top, left)
    steps = {"gray": grey, "cropped": _to_uint8(cropped), "fitted": _to_uint8(fitted)}
    return PreparedImage(array=array, inverted=inverted, warning=None, steps=steps)


def _mass_offsets(fitted: np.ndarray) -> tuple[int, int]:
    """Whole-pixel offsets that put the centre of mass at the field's centre (as MNIST).

    Whole pixels keep the ink inside a 20 x 20 box; a sub-pixel shift would smear it into 21.
    """
    rows, cols = np.indices(fitted.shape)
    mass = fitted.sum()
    top = round(CENTRE - (rows * fitted).sum() / mass)
    left = round(CENTRE - (cols * fitted).sum() / mass)
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


# ---- the digit pipeline's steps


def _shrunk(values: np.ndarray, side: int) -> tuple[np.ndarray, int]:
    """Area-averaged copy whose longer side is at most about ``side``, and the factor."""
    factor = max(1, int(np.ceil(max(values.shape) / side)))
    if factor == 1:
        return values, 1
    small = Image.fromarray(values).reduce(factor)  # box average over factor x factor blocks
    return np.asarray(small, dtype=np.float32), factor


def _ink_is_dark(values: np.ndarray) -> bool:
    """Whether the ink is darker than the background (dark on light, to be inverted).

    The background is a large median filter, which keeps gradients and shadowed edges and
    drops strokes whatever their polarity; what sticks out beyond the noise is the ink,
    either below the background (dark ink) or above it (light ink). Only when nothing sticks
    out does the border's median decide (light border: invert), as for a uniform image.
    """
    from scipy.ndimage import median_filter

    small, _ = _shrunk(values, POLARITY_SIDE)
    size = max(3, round(POLARITY_SPAN * min(small.shape)) | 1)
    residual = small - median_filter(small, size=size, mode="nearest")
    above = np.clip(residual - POLARITY_NOISE, 0, None).sum()
    below = np.clip(-residual - POLARITY_NOISE, 0, None).sum()
    if max(above, below) > 0 and not np.isclose(above, below):
        return bool(below > above)
    border = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
    return bool(np.median(border) > 127.5)


def _subtract_background(values: np.ndarray, relative: bool = False) -> np.ndarray:
    """Bright-ink image minus its background (paper, gradients, a shadowed edge): ink >= 0.

    ``relative`` (for inverted images, dark ink on paper): light multiplies what the paper
    and the ink reflect, so in a shadow the ink's contrast is smaller too. There the ink is
    measured relative to the paper's brightness (255 - background once inverted), so that
    one pen gives one ink level across the page.

    The background is a grey opening: the highest surface under the image that a square as
    wide as half the image can reach from below. Strokes are narrower than the square, so
    they are not part of it; lighting is: an opening leaves monotone ramps unchanged, so
    gradients, a vignette and a darker edge (a brighter one once inverted) are subtracted.
    It is computed on an area-averaged copy and scaled back up.

    At the border the image is extended by replication, so that a shadow running into the
    edge stays background instead of being cut there. That would also swallow ink running
    into the edge that is wider than a stroke along it (the bar of a tightly cropped 7): such
    border pieces are told apart by their edge, sharp for ink and soft for a shadow, and
    only the soft ones stay in the background.
    """
    from scipy.ndimage import binary_dilation, grey_opening
    from skimage.measure import label

    small, factor = _shrunk(values, BACKGROUND_SIDE)
    size = max(3, round(BACKGROUND_SPAN * max(small.shape)))
    crop = (slice(size, -size), slice(size, -size))
    replicated = grey_opening(np.pad(small, size, mode="edge"), size=(size, size))[crop]
    # The same with the image framed by its darkest level: nothing runs into the border.
    framed = grey_opening(np.pad(small, size, mode="constant", constant_values=small.min()),
                          size=(size, size))[crop]
    background = replicated
    border = replicated - framed  # what only replication made background
    pieces = label(border > MIN_CONTRAST / 2, connectivity=2)
    if pieces.max() > 0:
        padded = np.pad(replicated, 1, mode="edge")  # central differences, any size
        slope = np.hypot(padded[2:, 1:-1] - padded[:-2, 1:-1],
                         padded[1:-1, 2:] - padded[1:-1, :-2]) / 2
        for i in range(1, pieces.max() + 1):
            piece = pieces == i
            height = float(border[piece].max())
            near = binary_dilation(piece, iterations=2)
            if float(slope[near].max()) > SHARP_EDGE * height:  # a step: ink, not light
                background = np.where(near, framed, background)
    if factor > 1:
        h, w = values.shape
        background = np.asarray(
            Image.fromarray(background.astype(np.float32)).resize((w, h), Image.Resampling.BILINEAR)
        )
    ink = values - np.minimum(background, values)
    if relative:
        paper = np.maximum(255 - background, MIN_CONTRAST)  # the paper's brightness
        ink = np.minimum(ink * (255 / paper), 255)
    return ink


def _ink_mask(flat: np.ndarray, values: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Ink stretched to 0..255 with the background at 0, and the mask of the ink pixels.

    ``flat`` is the flattened image, ``values`` the image before flattening (bright ink).
    The threshold is Otsu's, raised above the background noise if need be; connected
    pieces much smaller than the digit's largest are specks (dust, JPEG noise) and dropped.
    ``(None, None)`` if there is no ink that stands out by ``MIN_CONTRAST`` grey levels,
    both from the flattened background and from the image's typical (median) level: gaps
    between dark strokes on white are "brighter than their surroundings" too, but they are
    not brighter than the paper.
    """
    from skimage.filters import threshold_otsu
    from skimage.measure import label

    if float(flat.max()) - float(flat.min()) < MIN_CONTRAST:
        return None, None
    floor = float(np.median(flat))
    noise = 1.4826 * float(np.median(np.abs(flat - floor)))
    threshold = max(float(threshold_otsu(flat)), floor + NOISE_SIGMAS * noise)
    mask = flat > threshold
    if not mask.any():
        return None, None
    pieces = label(mask, connectivity=2)
    sizes = np.bincount(pieces.ravel())
    sizes[0] = 0
    keep = sizes >= max(SPECK_FRACTION * sizes.max(), 1)
    mask = keep[pieces]
    level = float(np.percentile(flat[mask], INK_PERCENTILE))
    raw_level = float(np.percentile(values[mask], INK_PERCENTILE))
    if level - floor < MIN_CONTRAST or raw_level - float(np.median(values)) < MIN_CONTRAST:
        return None, None
    low = floor + 2 * noise  # background noise stays at 0
    ink = np.clip((flat - low) * (255 / max(level - low, 1e-6)), 0, 255)
    # Nothing away from the kept ink: a ring one pixel wide keeps the strokes' soft edges.
    near = np.zeros_like(mask)
    near[:-1] |= mask[1:]
    near[1:] |= mask[:-1]
    near[:, :-1] |= mask[:, 1:]
    near[:, 1:] |= mask[:, :-1]
    ink[~(mask | near)] = 0
    return ink, mask


def _normalise_strokes(mask: np.ndarray, ink: np.ndarray) -> np.ndarray:
    """The cropped digit, its strokes redrawn at MNIST's width if they are far off; 0..255.

    The mask is scaled to ``STROKE_SIDE`` px and thinned to its skeleton; its own stroke
    width is its area over the skeleton's length. Within ``STROKE_TOLERANCE`` of the brush
    the digit is returned as it is (``ink``); otherwise the skeleton is drawn with a round
    brush (anti-aliased edge) whose width is chosen so that, once the drawing is fitted into
    the 20 px box, the strokes are ``STROKE_WIDTH`` px wide.
    """
    from scipy.ndimage import distance_transform_edt
    from skimage.morphology import skeletonize

    h, w = mask.shape
    scale = STROKE_SIDE / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if scale < 1:  # shrinking: keep lines thinner than a pixel of the smaller grid
        small = Image.fromarray(mask.astype(np.float32)).resize(size, Image.Resampling.BOX)
        shape = np.asarray(small) >= 0.3
    else:
        big = Image.fromarray(ink.astype(np.float32)).resize(size, Image.Resampling.BILINEAR)
        shape = np.asarray(big) > 127.5
        if not shape.any():
            shape = np.asarray(big) > 0
    margin = STROKE_SIDE // 2
    skeleton = skeletonize(np.pad(shape, margin))
    if not skeleton.any():
        return ink
    rows = np.flatnonzero(skeleton.any(axis=1))
    cols = np.flatnonzero(skeleton.any(axis=0))
    extent = max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1
    # (extent + width) is fitted to DIGIT_BOX; the width should become STROKE_WIDTH there
    width = max(1.0, STROKE_WIDTH * extent / (DIGIT_BOX - STROKE_WIDTH))
    # Strokes already about as wide as MNIST's (as most MNIST digits themselves) keep their
    # own shape and shading; only clearly thicker or thinner ones are redrawn.
    own = shape.sum() / skeleton.sum()
    if 1 / STROKE_TOLERANCE <= own / width <= STROKE_TOLERANCE:
        return ink
    redrawn = np.clip(width / 2 + 0.5 - distance_transform_edt(~skeleton), 0, 1) * 255
    drawn = redrawn > 0
    r = np.flatnonzero(drawn.any(axis=1))
    c = np.flatnonzero(drawn.any(axis=0))
    return redrawn[r[0] : r[-1] + 1, c[0] : c[-1] + 1]


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
