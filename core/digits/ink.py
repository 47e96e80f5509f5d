"""The digit pipeline's ink steps: polarity, background, ink threshold, stroke width.

``core.digits.prepare.prepare_digit`` runs them in this order on a grey float image (0..255):
``ink_is_dark`` decides the polarity, ``subtract_background`` takes away paper, uneven light
and a shadowed edge, ``ink_mask`` tells ink from background (Otsu's threshold, never below
the noise; specks dropped; contrast stretched to 255) and ``normalise_strokes`` brings
strokes thicker or thinner than MNIST's (beyond a tolerance) to its width: eroded or redrawn.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

DIGIT_BOX = 20  # MNIST digits are scaled so the longer side of their ink is 20 px
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
# Strokes more than STROKE_TOLERANCE times thicker or thinner than this (px at 28 x 28) are
# eroded or redrawn to it. Read back the way MNIST's own strokes are measured (ink area
# at level >= 128 / skeleton length), the redrawn strokes of 3,000 MNIST training digits sent
# through prepare_digit are 3.1 px wide (median); MNIST's own median is 2.9 px (10-90 %:
# 2.0-3.9 px). Strokes whose width is within STROKE_TOLERANCE of the brush's are left as they
# are (41 % of those 3,000 digits). Both are the best of ten settings on the even halves of
# the two external handwriting sets (a width of 2.4 px with tolerance 1.5 redraws 17.5 % of
# the digits, reading back at 3.4 px): docs/handwriting.md, "Stroke width".
STROKE_WIDTH = 2.2
STROKE_TOLERANCE = 1.2
STROKE_SIDE = 80  # the skeleton is taken with the digit this many px long (4 x DIGIT_BOX)
# Paper is "plain" (a clean scan, a drawing, an enlarged small image: nothing to take away)
# when at least this share of the pixels on the paper side of Otsu's threshold lie within
# PLAIN_LEVELS grey levels of the most common level. Photographed paper (noise, uneven
# light, JPEG) reaches at most about 0.34 on the shipped photo-like digits; clean scans of
# Semeion and optdigits enlarged to 112 px and MNIST digits reach 0.6-0.99.
PLAIN_SHARE = 0.5
PLAIN_LEVELS = 2


def shrunk(values: np.ndarray, side: int) -> tuple[np.ndarray, int]:
    """Area-averaged copy whose longer side is at most about ``side``, and the factor."""
    factor = max(1, int(np.ceil(max(values.shape) / side)))
    if factor == 1:
        return values, 1
    small = Image.fromarray(values).reduce(factor)  # box average over factor x factor blocks
    return np.asarray(small, dtype=np.float32), factor


def ink_is_dark(values: np.ndarray) -> bool:
    """Whether the ink is darker than the background (dark on light, to be inverted).

    The background is a large median filter, which keeps gradients and shadowed edges and
    drops strokes whatever their polarity; what sticks out beyond the noise is the ink,
    either below the background (dark ink) or above it (light ink). Only when nothing sticks
    out does the border's median decide (light border: invert), as for a uniform image.
    Plain paper (``plain_paper``: a clean scan, a drawing) decides first: the ink is on its
    other side. A thick digit filling its picture defeats the median filter (half of every
    window is ink), not this.
    """
    from scipy.ndimage import median_filter

    paper = plain_paper(values)
    if paper is not None:  # plain paper: the ink is what is not paper
        return bool(paper > float(values.mean()))
    small, _ = shrunk(values, POLARITY_SIDE)
    size = max(3, round(POLARITY_SPAN * min(small.shape)) | 1)
    residual = small - median_filter(small, size=size, mode="nearest")
    above = np.clip(residual - POLARITY_NOISE, 0, None).sum()
    below = np.clip(-residual - POLARITY_NOISE, 0, None).sum()
    if max(above, below) > 0 and not np.isclose(above, below):
        return bool(below > above)
    border = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
    return bool(np.median(border) > 127.5)


def plain_paper(values: np.ndarray) -> float | None:
    """The paper's level when the paper is plain (see ``PLAIN_SHARE``), else None.

    The paper is the side of Otsu's threshold that the border's median is on (a digit that
    fills its picture can cover more of it than the paper does, but rarely its border), and
    its level the most common one there.
    """
    from skimage.filters import threshold_otsu

    levels = np.clip(np.round(values), 0, 255).astype(np.int64)
    if levels.min() == levels.max():
        return float(levels.flat[0])
    threshold = float(threshold_otsu(values))
    border = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
    bright = float(np.median(border)) > threshold
    paper = levels[values > threshold] if bright else levels[values <= threshold]
    if paper.size == 0:
        return None
    counts = np.bincount(paper, minlength=256)
    mode = int(counts.argmax())
    near = counts[max(0, mode - PLAIN_LEVELS) : mode + PLAIN_LEVELS + 1].sum()
    return float(mode) if near >= PLAIN_SHARE * paper.size else None


def subtract_background(values: np.ndarray, relative: bool = False) -> np.ndarray:
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

    Plain paper (``plain_paper``: a clean scan, a drawing) has no light to take away: its
    level is subtracted as it is. Estimating a background there could only eat ink: a digit
    that fills its picture, as in a scanned form, runs into every edge with soft (enlarged)
    edges and would be taken for a shadow.
    """
    from scipy.ndimage import binary_dilation, grey_opening
    from skimage.measure import label

    level = plain_paper(values)
    if level is not None:
        return _ink_above(values, np.float32(level), relative)
    small, factor = shrunk(values, BACKGROUND_SIDE)
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
    return _ink_above(values, background, relative)


def _ink_above(values: np.ndarray, background, relative: bool) -> np.ndarray:
    ink = values - np.minimum(background, values)
    if relative:
        paper = np.maximum(255 - background, MIN_CONTRAST)  # the paper's brightness
        ink = np.minimum(ink * (255 / paper), 255)
    return ink


def ink_mask(flat: np.ndarray, values: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Ink stretched to 0..255 with the background at 0, and the mask of the ink pixels.

    ``flat`` is the flattened image, ``values`` the image before flattening (bright ink).
    The threshold is Otsu's, raised above the background noise if need be; connected
    pieces much smaller than the digit's largest are specks (dust, JPEG noise) and dropped.
    ``(None, None)`` if there is no ink that stands out by ``MIN_CONTRAST`` grey levels,
    both from the flattened background and from the image's typical level (the median, or
    the plain paper's level): gaps between dark strokes on white are "brighter than their
    surroundings" too, but they are not brighter than the paper.
    """
    from skimage.filters import threshold_otsu
    from skimage.measure import label

    if float(flat.max()) - float(flat.min()) < MIN_CONTRAST:
        return None, None
    otsu = float(threshold_otsu(flat))
    # The background's level and noise: the median's when most of the picture is paper; the
    # paper's own when that is plain (a thick digit that fills its picture covers more than
    # half of it, and the median would be ink).
    paper = plain_paper(values)
    below = flat if paper is None else flat[flat <= otsu]
    floor = float(np.median(below))
    noise = 1.4826 * float(np.median(np.abs(below - floor)))
    threshold = max(otsu, floor + NOISE_SIGMAS * noise)
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
    typical = float(np.median(values)) if paper is None else paper
    if level - floor < MIN_CONTRAST or raw_level - typical < MIN_CONTRAST:
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


def normalise_strokes(mask: np.ndarray, ink: np.ndarray) -> np.ndarray:
    """The cropped digit, its strokes brought to MNIST's width where they are off by more than
    ``STROKE_TOLERANCE``; 0..255.

    The mask is scaled to ``STROKE_SIDE`` px and thinned to its skeleton; its own stroke
    width is its area over the skeleton's length. Within ``STROKE_TOLERANCE`` of the brush
    the digit is returned as it is (``ink``); otherwise it is redrawn so that, once fitted
    into the 20 px box, the strokes are ``STROKE_WIDTH`` px wide: thicker strokes are eroded
    (anti-aliased edge) down to that width, thinner ones drawn along the skeleton with a round
    brush of that width.
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
    # Strokes within the tolerance of the brush (41 % of MNIST's own digits) keep their own
    # shape and shading; the others are eroded or redrawn.
    own = shape.sum() / skeleton.sum()
    if 1 / STROKE_TOLERANCE <= own / width <= STROKE_TOLERANCE:
        return ink
    # Too thick: eroded (soft edge) down to the brush's width. The skeleton of a fat stroke
    # has spurs into every corner of its outline (a blob-like 1 of a scanned form becomes a
    # 4 or an 8), an erosion keeps the outline's shape. Too thin, or nothing left: redrawn.
    redrawn = None
    if own > width:
        padded = np.pad(shape, margin)
        inside = distance_transform_edt(padded)
        # the strokes' half-width: the distance to the outline along the skeleton (its median,
        # robust to the spurs, which run into the corners where that distance is small). Never
        # negative (an outline that is mostly thin parts: nothing to erode), and only the shape
        # itself can be ink: a soft edge must not spill onto the paper around it.
        depth = max(0.0, float(np.median(inside[skeleton])) - width / 2)
        eroded = np.where(padded, np.clip(inside - depth + 0.5, 0, 1), 0.0) * 255
        redrawn = eroded if (eroded > 127.5).any() else None
    if redrawn is None:
        redrawn = np.clip(width / 2 + 0.5 - distance_transform_edt(~skeleton), 0, 1) * 255
    drawn = redrawn > 0
    r = np.flatnonzero(drawn.any(axis=1))
    c = np.flatnonzero(drawn.any(axis=0))
    return redrawn[r[0] : r[-1] + 1, c[0] : c[-1] + 1]
