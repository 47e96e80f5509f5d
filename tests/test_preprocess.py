"""Tests for core.digits.prepare: well-formed digits, hostile or odd files, and fuzzing.

Every image is generated here with PIL/numpy; nothing touches the network.
"""

from __future__ import annotations

import io
import struct
import time
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageFilter

from core.digits.load import MAX_UPLOAD_BYTES, load_image, to_array
from core.digits.prepare import EMPTY_DIGIT, PreparedImage, prepare_digit, prepare_for_dataset, prepare_rgb
from core.errors import InputImageError
from tests.digit_helpers import centre_of_mass, ink_box

HANG_GUARD_S = 5.0  # generous: catches hangs, not slowness

# --------------------------------------------------------------------------- helpers


def seven(size: int = 200, ink: int = 0, paper: int = 255, mode: str = "L") -> Image.Image:
    """A thick, asymmetric "7" drawn with PIL."""
    img = Image.new(mode, (size, size), paper)
    draw = ImageDraw.Draw(img)
    s = size / 200
    draw.line(
        [(50 * s, 45 * s), (150 * s, 45 * s), (85 * s, 165 * s)], fill=ink, width=round(18 * s)
    )
    return img


def encode(img: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kwargs)
    return buf.getvalue()




def assert_mnist_like(result: PreparedImage) -> None:
    a = result.array
    assert a.shape == (28, 28) and a.dtype == np.uint8
    assert result.warning is None
    assert a.max() >= 200, "ink should be bright"
    # Background is 0. (Mass-centring may legitimately push a top-heavy 7 to the edge, as in
    # MNIST, so check the corners and the bulk rather than every border pixel.)
    assert a[:3, :3].max() == a[:3, -3:].max() == a[-3:, :3].max() == a[-3:, -3:].max() == 0
    assert (a == 0).mean() > 0.5
    height, width = ink_box(a)
    assert height <= 20 and width <= 20
    cy, cx = centre_of_mass(a)
    assert abs(cy - 14) <= 1 and abs(cx - 14) <= 1


def assert_blank(result: PreparedImage) -> None:
    assert result.array.shape == (28, 28) and result.array.dtype == np.uint8
    assert result.array.max() == 0
    assert result.warning == EMPTY_DIGIT


# --------------------------------------------------------------------------- well-formed


def test_well_formed_digit_becomes_mnist_like():
    result = prepare_digit(seven())
    assert_mnist_like(result)
    assert result.inverted
    assert set(result.steps) == {"gray", "cropped", "fitted"}
    assert max(result.steps["fitted"].shape) == 20


def test_uploaded_png_matches_in_memory_image():
    from_bytes = prepare_digit(load_image(encode(seven())))
    assert np.array_equal(from_bytes.array, prepare_digit(seven()).array)


@pytest.mark.parametrize(
    ("ink", "paper", "inverted"),
    [(0, 255, True), (255, 0, False), (30, 200, True), (220, 60, False)],
)
def test_inverts_only_light_backgrounds(ink, paper, inverted):
    result = prepare_digit(seven(ink=ink, paper=paper))
    assert result.inverted is inverted
    assert_mnist_like(result)
    # Polarity and contrast are normalised away: same digit, same output (up to rounding).
    reference = prepare_digit(seven()).array.astype(int)
    assert np.abs(result.array.astype(int) - reference).max() <= 2


def test_invert_can_be_forced():
    assert prepare_digit(seven(ink=255, paper=0), invert=True).warning == EMPTY_DIGIT
    assert not prepare_digit(seven(), invert=True).warning
    with pytest.raises(ValueError):
        prepare_digit(seven(), invert="yes")


def test_canvas_rgba_black_strokes_on_transparent():
    strokes = np.asarray(seven(ink=255, paper=0))  # the stroke mask
    rgba = np.zeros((200, 200, 4), dtype=np.uint8)  # transparent black
    rgba[..., 3] = strokes  # opaque black strokes
    result = prepare_digit(rgba)
    assert_mnist_like(result)
    assert result.inverted


def test_canvas_rgba_white_strokes():
    strokes = np.asarray(seven(ink=255, paper=0))
    on_black = np.zeros((200, 200, 4), dtype=np.uint8)
    on_black[..., :3] = strokes[..., None]
    on_black[..., 3] = 255  # opaque black canvas
    on_transparent = on_black.copy()
    on_transparent[..., 3] = strokes  # white strokes, transparent elsewhere
    for rgba in (on_black, on_transparent):
        result = prepare_digit(rgba)
        assert_mnist_like(result)
        assert not result.inverted


def test_large_photo_gives_the_same_digit():
    big = prepare_digit(seven(size=3000))
    assert max(big.steps["gray"].shape) <= 1024  # shrunk before the float work
    assert_mnist_like(big)
    reference = prepare_digit(seven()).array.astype(int)
    assert np.abs(big.array.astype(int) - reference).mean() < 8


def test_float_and_rgb_arrays():
    grey = np.asarray(seven()).astype(np.float64) / 255
    rgb = np.repeat(grey[..., None], 3, axis=2)
    for arr in (grey, rgb, (rgb * 255).astype(np.uint8)):
        assert_mnist_like(prepare_digit(arr))


@pytest.mark.parametrize("value", [0, 255, 128])
def test_uniform_images_are_empty_not_errors(value):
    assert_blank(prepare_digit(np.full((50, 40), value, dtype=np.uint8)))
    assert_blank(prepare_digit(np.zeros((50, 40, 4), dtype=np.uint8)))  # fully transparent


def test_plain_mode_keeps_the_whole_frame():
    img = Image.new("L", (200, 200), 255)
    ImageDraw.Draw(img).rectangle([80, 80, 119, 119], fill=0)  # 40 px square, centred
    plain = prepare_for_dataset(img, (28, 28), mode="plain")
    digit = prepare_for_dataset(img, (28, 28), mode="digit")
    assert plain.array.shape == (28, 28) and plain.array.dtype == np.uint8 and plain.inverted
    assert max(ink_box(plain.array > 127)) <= 7  # 40/200 of 28 px, not blown up
    assert max(ink_box(digit.array > 127)) >= 19  # the digit pipeline crops to the ink
    with pytest.raises(ValueError):
        prepare_for_dataset(img, (28, 28), mode="fancy")


def test_prepare_rgb_centre_crops_and_resizes():
    wide = np.zeros((32, 96, 3), dtype=np.uint8)
    wide[:, :32] = wide[:, 64:] = (255, 0, 0)
    wide[:, 32:64] = (0, 0, 255)  # only the centre square is blue
    result = prepare_for_dataset(wide, (32, 32, 3))
    assert result.array.shape == (32, 32, 3) and result.array.dtype == np.uint8
    assert (result.array[..., 2] >= 250).all() and (result.array[..., 0] <= 5).all()
    assert prepare_rgb(np.zeros((5, 70), dtype=np.uint8), size=32).array.shape == (32, 32, 3)
    with pytest.raises(ValueError):
        prepare_for_dataset(wide, (64, 32, 3))


# --------------------------------------------------------------------------- bad or odd files


def png_with_declared_size(width: int, height: int) -> bytes:
    """A valid 8x8 PNG whose IHDR is patched to claim width x height (CRC fixed up)."""
    data = bytearray(encode(Image.new("L", (8, 8), 255)))
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def animated(fmt: str) -> bytes:
    frames = [seven().convert("RGB"), Image.new("RGB", (200, 200), "black")]
    return encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)


def png_16bit() -> bytes:
    arr = np.full((60, 60), 65535, dtype=np.uint16)
    arr[10:50, 25:35] = 0  # a "1" in black ink
    arr[0, 0] = 32896  # mid grey: 32896 / 257 = 128
    img = Image.fromarray(arr)
    assert img.mode == "I;16"
    return encode(img)


def palette_png_with_transparency() -> bytes:
    img = Image.new("P", (100, 100), 0)
    img.putpalette([255, 0, 0] + [0, 0, 0] * 255)  # index 0 red but transparent, 1 black
    ImageDraw.Draw(img).rectangle([40, 20, 60, 80], fill=1)
    return encode(img, transparency=0)


def rgba_png(ink: tuple[int, int, int]) -> bytes:
    img = Image.new("RGBA", (100, 100), (0, 0, 0, 0))
    ImageDraw.Draw(img).rectangle([40, 20, 60, 80], fill=(*ink, 255))
    return encode(img)


def cmyk_jpeg() -> bytes:
    img = Image.new("CMYK", (100, 100), (0, 0, 0, 0))  # white paper
    ImageDraw.Draw(img).rectangle([40, 20, 60, 80], fill=(0, 0, 0, 255))  # black ink
    return encode(img, "JPEG", quality=95)


def exif_rotated_jpeg() -> bytes:
    """Stored 60 wide x 30 high with the dark mark on the left; orientation 6 = rotate 90 CW."""
    img = Image.new("L", (60, 30), 255)
    img.paste(0, (0, 0, 20, 30))
    exif = Image.Exif()
    exif[0x0112] = 6
    return encode(img, "JPEG", exif=exif.tobytes(), quality=95)


BAD_INPUTS: dict[str, tuple[bytes, str]] = {
    # name: (bytes, "refuse" | "accept" | "empty")
    "zero bytes": (b"", "refuse"),
    "text, not an image": (b"hello, this is definitely not a picture\n" * 10, "refuse"),
    "oversize bytes": (b"\x89PNG" + b"\0" * MAX_UPLOAD_BYTES, "refuse"),
    "truncated PNG": (encode(seven())[:300], "refuse"),
    "truncated JPEG": (encode(seven(), "JPEG")[:400], "refuse"),
    "JPEG header then garbage": (b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4, "refuse"),
    "PNG declaring 100000x100000": (png_with_declared_size(100_000, 100_000), "refuse"),
    "PNG declaring 7000x7000": (png_with_declared_size(7000, 7000), "refuse"),
    "PNG declaring 0x5": (png_with_declared_size(0, 5), "refuse"),
    "animated GIF": (animated("GIF"), "accept"),
    "animated PNG": (animated("PNG"), "accept"),
    "16-bit PNG": (png_16bit(), "accept"),
    "palette PNG with transparency": (palette_png_with_transparency(), "accept"),
    "RGBA black ink on transparent": (rgba_png((0, 0, 0)), "accept"),
    "RGBA white ink on transparent": (rgba_png((255, 255, 255)), "accept"),
    "CMYK JPEG": (cmyk_jpeg(), "accept"),
    "EXIF-rotated JPEG": (exif_rotated_jpeg(), "accept"),
    "1-bit BMP": (encode(seven().convert("1"), "BMP"), "accept"),
    "1x1 pixel": (encode(Image.new("L", (1, 1), 0)), "empty"),
    "all white": (encode(Image.new("RGB", (64, 64), "white")), "empty"),
    "all black": (encode(Image.new("RGB", (64, 64), "black")), "empty"),
}


def test_bad_inputs_never_crash_or_hang():
    crashes, wrong, slow = [], [], []
    for name, (data, expected) in BAD_INPUTS.items():
        start = time.perf_counter()
        try:
            result = prepare_digit(load_image(data))
            outcome = "empty" if result.warning else "accept"
            assert result.array.shape == (28, 28) and result.array.dtype == np.uint8
        except InputImageError as err:
            outcome = "refuse"
            assert str(err), "a refusal needs a message for the user"
        except Exception as err:  # noqa: BLE001 - counting crashes is the point
            crashes.append(f"{name}: {type(err).__name__}: {err}")
            continue
        finally:
            elapsed = time.perf_counter() - start
            if elapsed > HANG_GUARD_S:
                slow.append(f"{name}: {elapsed:.1f} s")
        if outcome != expected:
            wrong.append(f"{name}: expected {expected}, got {outcome}")
    print(f"{len(BAD_INPUTS)} bad inputs tried, {len(crashes)} crashes")
    assert crashes == []
    assert slow == []
    assert wrong == []


def test_huge_declared_size_is_refused_from_the_header():
    start = time.perf_counter()
    with pytest.raises(InputImageError, match="limit"):
        load_image(png_with_declared_size(100_000, 100_000))
    assert time.perf_counter() - start < 1.0  # decoding 10^10 pixels would take far longer


def test_animated_files_use_the_first_frame():
    for fmt in ("GIF", "PNG"):
        with Image.open(io.BytesIO(animated(fmt))) as im:
            assert im.is_animated
        result = prepare_digit(load_image(animated(fmt)))
        assert result.inverted and result.warning is None  # the 7 on white, not the black frame


def test_16bit_png_is_scaled_not_clipped():
    img = load_image(png_16bit())
    assert img.mode == "L"
    a = to_array(img)
    assert a[0, 0] == 128 and a[1, 1] == 255 and a[30, 30] == 0


def test_transparency_is_flattened_so_ink_stays_visible():
    assert to_array(load_image(rgba_png((0, 0, 0))))[0, 0].tolist() == [255, 255, 255]
    assert to_array(load_image(rgba_png((255, 255, 255))))[0, 0].tolist() == [0, 0, 0]
    palette = to_array(load_image(palette_png_with_transparency()))
    assert palette[0, 0].tolist() == [255, 255, 255] and palette[50, 50].tolist() == [0, 0, 0]


def test_cmyk_jpeg_becomes_rgb():
    img = load_image(cmyk_jpeg())
    assert img.mode == "RGB"
    a = to_array(img)
    assert a[5, 5].min() > 240 and a[50, 50].max() < 15


def test_exif_orientation_is_applied():
    img = load_image(exif_rotated_jpeg())
    assert img.size == (30, 60)  # now taller than wide
    a = to_array(img).astype(float)
    assert a[:15].mean() < 30 and a[25:].mean() > 225  # the left mark turned to the top


# --------------------------------------------------------------------------- fuzzing


@st.composite
def random_images(draw) -> np.ndarray:
    height = draw(st.integers(1, 300))
    width = draw(st.integers(1, 300))
    channels = draw(st.sampled_from([None, 3, 4]))
    shape = (height, width) if channels is None else (height, width, channels)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # A constant background with a random share of random pixels: from empty, through a
    # few specks, to pure noise.
    image = np.full(shape, draw(st.floats(0, 1)))
    density = draw(st.sampled_from([0.0, 0.001, 0.05, 0.5, 1.0]))
    mask = rng.random((height, width)) < density
    image[mask] = rng.random(image[mask].shape)
    if draw(st.booleans()):
        return np.round(image * 255).astype(np.uint8)
    return image


@settings(max_examples=60, deadline=None)
@given(random_images())
def test_fuzz_prepare_digit_arrays(image):
    result = prepare_digit(image)  # a well-formed array must never be refused
    assert result.array.shape == (28, 28) and result.array.dtype == np.uint8
    assert (result.warning is not None) == (result.array.max() == 0)


VALID_FILES = [encode(seven(60)), encode(seven(60), "JPEG"), encode(seven(60).convert("P"), "GIF")]


@st.composite
def random_bytes(draw) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=2000))
    # A real file with some bytes overwritten and perhaps cut short: reaches the decoders.
    data = bytearray(draw(st.sampled_from(VALID_FILES)))
    for _ in range(draw(st.integers(0, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data[: draw(st.integers(0, len(data)))])


@settings(max_examples=60, deadline=None)
@given(random_bytes())
def test_fuzz_load_image_bytes(data):
    try:
        img = load_image(data)
    except InputImageError:
        return
    assert img.mode in ("L", "RGB")
    result = prepare_digit(img)
    assert result.array.shape == (28, 28) and result.array.dtype == np.uint8


# --------------------------------------------------------------------------- photos and drawings
# Digits as people photograph and draw them: uneven light, noise, JPEG, any pen. Each test
# here fails on the preprocessing before the background was flattened and strokes normalised.


def three(size: int = 200, ink: int = 0, paper: int = 255, width: float = 14) -> Image.Image:
    """A "3" of two arcs drawn with PIL (``width`` in px at size 200)."""
    img = Image.new("L", (size, size), paper)
    draw = ImageDraw.Draw(img)
    s = size / 200
    draw.arc([70 * s, 30 * s, 135 * s, 100 * s], start=190, end=90, fill=ink, width=round(width * s))
    draw.arc([65 * s, 95 * s, 140 * s, 175 * s], start=270, end=165, fill=ink, width=round(width * s))
    return img


def photographed(img: Image.Image, edge: str = "left", shadow: float = 0.55, seed: int = 0,
                 light: bool = True) -> Image.Image:
    """``img`` as a phone would see it: a gradient, one much darker edge, blur, noise, JPEG."""
    a = np.asarray(img, dtype=np.float32)
    h, w = a.shape
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = y / (h - 1), x / (w - 1)
    dist = {"left": x, "right": 1 - x, "top": y, "bottom": 1 - y}[edge]
    light = (1 - 0.3 * x * y) * (1 - shadow * np.exp(-dist / 0.08)) if light else 1.0
    lit = Image.fromarray(np.round(a * light).astype(np.uint8)).filter(ImageFilter.GaussianBlur(1.0))
    noisy = np.asarray(lit, dtype=np.float32) + np.random.default_rng(seed).normal(0, 4, a.shape)
    data = encode(Image.fromarray(np.clip(np.round(noisy), 0, 255).astype(np.uint8)), "JPEG", quality=60)
    return load_image(data)


def stroke_width(a: np.ndarray) -> float:
    """Mean stroke width in px: ink area (level >= 128) over the skeleton's length."""
    from skimage.morphology import skeletonize

    mask = a >= 128
    return mask.sum() / max(skeletonize(mask).sum(), 1)


def outside_box(a: np.ndarray, reference: np.ndarray, margin: int = 1) -> np.ndarray:
    """The pixels of ``a`` outside the bounding box of ``reference``'s ink, grown by ``margin``."""
    rows = np.flatnonzero((reference > 0).any(axis=1))
    cols = np.flatnonzero((reference > 0).any(axis=0))
    keep = np.ones(a.shape, dtype=bool)
    keep[max(rows[0] - margin, 0) : rows[-1] + margin + 1, max(cols[0] - margin, 0) : cols[-1] + margin + 1] = False
    return a[keep]


@pytest.mark.parametrize("edge", ["left", "top", "right"])
def test_uneven_lighting_leaves_a_flat_background(edge):
    clean = prepare_digit(three(ink=40, paper=210)).array
    result = prepare_digit(photographed(three(ink=40, paper=210), edge=edge))
    assert_mnist_like(result)
    assert result.inverted
    # The darker edge must not survive as a bar: everything outside the digit is black ...
    assert outside_box(result.array, clean).max() <= 10
    # ... and the digit is the same as without the light and the camera.
    assert np.abs(result.array.astype(int) - clean.astype(int)).mean() < 10


def test_blank_paper_with_a_shadowed_edge_is_empty():
    result = prepare_digit(photographed(Image.new("L", (200, 200), 210), shadow=0.6))
    assert_blank(result)


def test_photographed_ink_is_stretched_to_full_contrast():
    # faint pencil on grey paper, in shadow on one side
    result = prepare_digit(photographed(three(ink=120, paper=180), shadow=0.3))
    assert_mnist_like(result)
    assert result.array.max() == 255


def test_dark_on_light_and_light_on_dark_give_the_same_digit():
    # polarity and contrast (noise, blur and JPEG too) but no lighting: the negative of a
    # lit page is not a lit blackboard
    photo = np.asarray(photographed(three(ink=30, paper=220), shadow=0.0, light=False))
    dark_on_light = prepare_digit(photo)
    light_on_dark = prepare_digit(255 - photo)
    assert dark_on_light.inverted and not light_on_dark.inverted
    assert_mnist_like(dark_on_light)
    assert_mnist_like(light_on_dark)
    diff = np.abs(dark_on_light.array.astype(int) - light_on_dark.array.astype(int))
    assert diff.mean() < 4


@pytest.mark.parametrize("width", [4, 9, 40, 60])
def test_stroke_width_becomes_mnist_like(width):
    # a thin pen, a pencil, a marker and the canvas's brush on a small drawing
    result = prepare_digit(three(size=280, ink=255, paper=0, width=width))
    assert_mnist_like(result)
    assert 2.0 <= stroke_width(result.array) <= 3.9  # MNIST's 10-90 % range


def test_specks_far_from_the_digit_do_not_move_it():
    clean = three(ink=20, paper=230)
    dusty = clean.copy()
    draw = ImageDraw.Draw(dusty)
    for x, y in [(8, 10), (185, 12), (15, 180), (190, 190), (100, 193)]:
        draw.ellipse([x, y, x + 3, y + 3], fill=20)
    reference = prepare_digit(clean).array.astype(int)
    result = prepare_digit(dusty)
    assert_mnist_like(result)
    assert np.abs(result.array.astype(int) - reference).max() <= 2


def test_tightly_cropped_digit_keeps_ink_that_touches_the_border():
    # a 7 whose bar runs along the whole top edge: ink, not a shadow, so it must stay
    img = Image.new("L", (120, 160), 255)
    draw = ImageDraw.Draw(img)
    draw.rectangle([0, 0, 119, 25], fill=20)
    draw.line([(110, 20), (45, 159)], fill=20, width=26)
    result = prepare_digit(img.filter(ImageFilter.GaussianBlur(1)))
    assert_mnist_like(result)
    rows = np.flatnonzero((result.array > 127).any(axis=1))
    bar = result.array[rows[0] : rows[0] + 2]
    assert (bar > 127).sum(axis=1).max() >= 12  # the bar spans most of the 20 px box


def test_photo_of_a_large_page_is_fast():
    page = photographed(three(size=1600, ink=40, paper=210))
    start = time.perf_counter()
    assert_mnist_like(prepare_digit(page))
    assert time.perf_counter() - start < HANG_GUARD_S


def test_eroding_thick_strokes_never_spills_ink_onto_the_paper():
    # A digit with a big filled loop and thin strokes: far thicker than MNIST's on average (its
    # area over its skeleton), but thin along most of its skeleton, so the erosion depth that
    # median gives is below zero. Eroding by it once turned every paper pixel into ink (a white
    # square, 4 of Semeion's digits); only the digit's own pixels may be ink, none eroded away.
    from core.digits.ink import normalise_strokes

    yy, xx = np.mgrid[:80, :80]
    digit = np.hypot(yy - 28, xx - 30) <= 26  # the filled loop
    digit[20:80, 54:56] = True  # a long thin tail
    digit[78:80, 10:56] = True  # a thin foot
    out = normalise_strokes(digit, digit * 255.0)
    rows, cols = np.flatnonzero(digit.any(axis=1)), np.flatnonzero(digit.any(axis=0))
    own = digit[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    assert out.shape == own.shape  # cropped to the digit, not to a square of paper
    assert ((out > 0) == own).all()
    whole = prepare_digit(np.where(digit, 0, 255).astype(np.uint8))
    assert whole.warning is None and (whole.array > 0).mean() < 0.5  # a digit, not a white field


def _photo_of_a_seven(width: int, height: int, fmt: str) -> bytes:
    """A phone-sized photo of a 7: dark ink on white paper."""
    img = Image.new("L", (width, height), 235)
    ImageDraw.Draw(img).line([(width * 0.35, height * 0.25), (width * 0.65, height * 0.25), (width * 0.45, height * 0.75)],
                             fill=20, width=width // 25)
    return encode(img, fmt, **({"quality": 85} if fmt == "JPEG" else {}))


def test_a_48_megapixel_phone_jpeg_is_read_reduced_and_used():
    """Over MAX_PIXELS declared, a JPEG is decoded at a half (Image.draft), never in full, and reads as a digit."""
    from core.digits.load import MAX_PIXELS

    data = _photo_of_a_seven(8000, 6000, "JPEG")
    start = time.perf_counter()
    img = load_image(data)
    assert img.size == (4000, 3000) and img.size[0] * img.size[1] <= MAX_PIXELS
    result = prepare_digit(img)
    assert result.warning is None and result.array.shape == (28, 28) and result.array.max() > 200
    assert time.perf_counter() - start < HANG_GUARD_S


def test_a_large_image_that_cannot_be_read_reduced_is_refused_in_one_line():
    with pytest.raises(InputImageError) as err:
        load_image(_photo_of_a_seven(8000, 6000, "PNG"))
    assert str(err.value) == ("The image is 8000 x 6000 pixels (48 megapixels); a PNG this large cannot be read reduced "
                              "and the limit is 40 megapixels: scale it down or save it as JPEG.")


def _drawn_seven() -> Image.Image:
    """White on black, as the canvas draws it (a 280 px field, stroke 18): its mass is high up."""
    drawn = Image.new("L", (280, 280), 0)
    ImageDraw.Draw(drawn).line([(60, 50), (220, 50), (120, 250)], fill=255, width=18)
    return drawn


def test_a_drawing_keeps_black_rows_under_a_sevens_foot():
    """Centred by its mass alone, a drawn 7 stands on the bottom edge of the 28 x 28 input; a
    drawing keeps DRAWN_EDGE_KEEP black pixels at every edge, an upload follows MNIST's recipe."""
    from core.digits.prepare import DRAWN_EDGE_KEEP, prepare_for_dataset

    mnist = prepare_digit(_drawn_seven()).array
    assert np.flatnonzero(mnist.any(axis=1))[-1] >= 26  # MNIST's recipe: the foot at the edge
    drawn = prepare_for_dataset(np.asarray(_drawn_seven()), (28, 28), edge_keep=DRAWN_EDGE_KEEP).array
    rows, cols = np.flatnonzero(drawn.any(axis=1)), np.flatnonzero(drawn.any(axis=0))
    assert rows[0] >= DRAWN_EDGE_KEEP and rows[-1] <= 27 - DRAWN_EDGE_KEEP
    assert cols[0] >= DRAWN_EDGE_KEEP and cols[-1] <= 27 - DRAWN_EDGE_KEEP
    assert drawn.max() == 255 and np.array_equal(np.sort(drawn.ravel()), np.sort(mnist.ravel()))  # only moved
