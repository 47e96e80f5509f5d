"""The digit pipeline's ink steps: polarity, background, ink threshold, stroke width.

``core.digits.prepare.prepare_digit`` runs them in this order on a grey float image (0..255):
``ink_is_dark`` decides the polarity, ``subtract_background`` takes away paper, uneven light
and a shadowed edge, ``ink_mask`` tells ink from background (Otsu's threshold, never below
the noise; specks dropped; contrast stretched to 255) and ``normalise_strokes`` redraws
strokes far thicker or thinner than MNIST's at its width.
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
# Strokes that are clearly thicker or thinner than MNIST's are redrawn with a round brush
# this many px wide at 28 x 28. Read back the way MNIST's own strokes were measured (ink area
# at level >= 128 / skeleton length), such strokes are 2.9 px wide; MNIST's median on the
# shipped sample is 2.85 px (10-90 %: 2.0-3.9 px).
STROKE_WIDTH = 2.4
# Strokes whose width is within this factor of the brush's are left as they are: about 90 %
# of MNIST's own digits are.
STROKE_TOLERANCE = 1.5
STROKE_SIDE = 80  # the skeleton is taken with the digit this many px long (4 x DIGIT_BOX)


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
    """
    from scipy.ndimage import median_filter

    small, _ = shrunk(values, POLARITY_SIDE)
    size = max(3, round(POLARITY_SPAN * min(small.shape)) | 1)
    residual = small - median_filter(small, size=size, mode="nearest")
    above = np.clip(residual - POLARITY_NOISE, 0, None).sum()
    below = np.clip(-residual - POLARITY_NOISE, 0, None).sum()
    if max(above, below) > 0 and not np.isclose(above, below):
        return bool(below > above)
    border = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
    return bool(np.median(border) > 127.5)


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
    """
    from scipy.ndimage import binary_dilation, grey_opening
    from skimage.measure import label

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


def normalise_strokes(mask: np.ndarray, ink: np.ndarray) -> np.ndarray:
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
