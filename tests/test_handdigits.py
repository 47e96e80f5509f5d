"""Tests for core.digits (synth) and core.studies.handwriting (measure, the CLI): drawn-like and photo-like digits, the shipped set, measuring.

Nothing here needs the network or a data set: the digits come from the machine's fonts (or
Pillow's own font when it has none) and the shipped fixed set in assets/digits.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from scipy.ndimage import median_filter

from core.digits import glyphs, synth
from core.digits.glyphs import renders_digits
from core.digits.synth import generate, load_fixed_set
from core.studies.handwriting import __main__ as digits_cli
from core.studies.handwriting.measure import page_input
from tests.digit_helpers import centre_of_mass, ink_box


@pytest.mark.parametrize("style", synth.STYLES)
def test_generate_is_deterministic_per_seed(style):
    images, labels = generate(style, 6, seed=3)
    again, labels_again = generate(style, 6, seed=3)
    other, _ = generate(style, 6, seed=4)
    assert np.array_equal(labels, labels_again)
    assert all(np.array_equal(a, b) for a, b in zip(images, again))
    assert not all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(images, other))


def test_labels_are_balanced_ints():
    _, labels = generate("canvas", 20, seed=0)
    assert labels.dtype == np.int64 and labels.shape == (20,)
    assert np.array_equal(np.bincount(labels, minlength=10), np.full(10, 2))
    assert generate("photo", 0, seed=0)[1].shape == (0,)
    with pytest.raises(ValueError):
        generate("sketch", 3, seed=0)
    with pytest.raises(ValueError):
        generate("photo", -1, seed=0)


def test_canvas_digits_are_like_the_drawing_canvas():
    images, _ = generate("canvas", 10, seed=1)
    for rgba in images:
        assert rgba.shape == (280, 280, 4) and rgba.dtype == np.uint8
        alpha, rgb = rgba[..., 3], rgba[..., :3]
        assert (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()  # white
        if alpha.min() == 255:  # opaque: white strokes on the black background colour
            stroke = rgb[..., 0]
        else:  # transparent background: white where drawn, alpha is the coverage
            assert (rgb[alpha == 0] == 0).all() and (rgb[alpha > 0] == 255).all()
            stroke = alpha
        assert stroke[0].max() == stroke[-1].max() == stroke[:, 0].max() == stroke[:, -1].max() == 0
        drawn = stroke > 127
        assert 0.01 < drawn.mean() < 0.4  # thick strokes, not a filled blob
        h, w = ink_box(drawn)
        assert 60 <= max(h, w) <= 276
        assert set(np.unique(stroke)) - {0, 255}, "stroke edges are anti-aliased"


def test_photo_digits_are_dark_ink_on_light_paper():
    images, _ = generate("photo", 10, seed=2)
    for rgb in images:
        assert rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8
        assert 200 <= rgb.shape[0] <= 300 and 200 <= rgb.shape[1] <= 300
        grey = rgb.mean(axis=2)[::2, ::2]
        assert np.median(grey) > 80
        # ink: much darker than the paper around it (the light is uneven)
        ink = grey < median_filter(grey, size=31, mode="nearest") - 40
        assert 0.002 < ink.mean() < 0.3
        h, w = ink_box(ink)
        assert h < 0.85 * grey.shape[0] and w < 0.85 * grey.shape[1]  # not filling the frame


def test_photo_is_exactly_its_jpeg():
    rgb, data = synth.photo_digit(5, np.random.default_rng(0), return_jpeg=True)
    assert data[:2] == b"\xff\xd8"  # a JPEG
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "JPEG"
        assert np.array_equal(np.asarray(im.convert("RGB")), rgb)


def test_without_system_fonts_pillows_own_font_is_used(monkeypatch):
    monkeypatch.setattr(synth, "find_fonts", lambda dirs=glyphs.FONT_DIRS: ())
    for style in synth.STYLES:
        images, labels = generate(style, 3, seed=0)
        assert len(images) == 3 and labels.shape == (3,)


def test_found_fonts_draw_ten_distinct_digits():
    fonts = glyphs.find_fonts()
    assert list(fonts) == sorted(fonts)
    for path in fonts[:3]:
        assert renders_digits(path)
    assert not renders_digits("/nonexistent/font.ttf")


@pytest.mark.parametrize("style", synth.STYLES)
def test_prepared_digits_are_centred_by_mass_in_a_20_box(style):
    images, _ = generate(style, 10, seed=5)
    for image in images:
        prepared = page_input(style, image)
        a = prepared.array
        assert a.shape == (28, 28) and a.dtype == np.uint8 and prepared.warning is None
        assert a.max() == 255
        h, w = ink_box(a)
        assert max(h, w) <= 20 and max(h, w) >= 19
        cy, cx = centre_of_mass(a)
        assert abs(cy - 14) <= 1 and abs(cx - 14) <= 1
        assert prepared.inverted is (style == "photo")


def test_shipped_fixed_set_loads_with_ten_classes():
    sets = load_fixed_set()
    assert set(sets) == {"photo", "canvas"}
    for style, s in sets.items():
        assert s.style == style
        assert len(s.images) == len(s.labels) == 100
        assert s.labels.dtype == np.int64
        assert np.array_equal(np.bincount(s.labels, minlength=10), np.full(10, 10))
    assert all(im.shape == (280, 280, 4) and im.dtype == np.uint8 for im in sets["canvas"].images)
    assert all(im.ndim == 3 and im.shape[2] == 3 for im in sets["photo"].images)
    assert len(sets["photo"].files) == 100 and sets["photo"].files[0][:2] == b"\xff\xd8"
    index = json.loads((synth.DEFAULT_DIR / "index.json").read_text())
    assert index["photo_labels"] == sets["photo"].labels.tolist()
    assert index["canvas_labels"] == sets["canvas"].labels.tolist()
    size = sum(f.stat().st_size for f in synth.DEFAULT_DIR.rglob("*") if f.is_file())
    assert size < 2 * 2**20


def test_make_writes_a_set_that_loads_back(tmp_path):
    assert digits_cli.main(["make", "--out", str(tmp_path), "--n", "10", "--seed", "7"]) == 0
    sets = load_fixed_set(tmp_path)
    photos, photo_labels = generate("photo", 10, seed=7)
    assert np.array_equal(sets["photo"].labels, photo_labels)
    assert all(np.array_equal(a, b) for a, b in zip(sets["photo"].images, photos))
    canvas, canvas_labels = generate("canvas", 10, seed=7)
    assert np.array_equal(sets["canvas"].labels, canvas_labels)
    assert all(np.array_equal(a, b) for a, b in zip(sets["canvas"].images, canvas))
    with pytest.raises(FileNotFoundError):
        load_fixed_set(tmp_path / "missing")


def test_measure_prints_a_table_and_writes_json(tmp_path, monkeypatch, capsys):
    from core import catalog

    entries = catalog.pretrained_entries("mnist")
    if not entries:
        pytest.skip("no shipped MNIST model")
    monkeypatch.setattr(digits_cli, "_entries", lambda which: entries[:1])
    out = tmp_path / "m.json"
    assert digits_cli.main(["measure", "--generate", "10", "--no-reference", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert entries[0].model in printed and "photo (10)" in printed and "canvas (10)" in printed
    result = json.loads(out.read_text())
    assert result["counts"] == {"photo": 10, "canvas": 10}
    (row,) = result["models"]
    assert row["key"] == entries[0].key and row["protocol"] == entries[0].protocol
    assert 0.0 <= row["photo"] <= 1.0 and 0.0 <= row["canvas"] <= 1.0


def test_measure_takes_models_by_path_and_names_their_augmentation(tmp_path, capsys):
    import shutil

    from core import catalog

    entries = [e for e in catalog.pretrained_entries("mnist") if e.protocol == "converged"]
    if not entries:
        pytest.skip("no shipped converged MNIST model")
    src = entries[0].stem
    stem = tmp_path / "mine"
    shutil.copy(src.with_suffix(".safetensors"), stem.with_suffix(".safetensors"))
    meta = json.loads(src.with_suffix(".json").read_text())
    meta.pop("protocol", None)  # as python -m core.train writes it: the protocol follows from the settings
    meta["train_config"]["augment"] = "affine"
    stem.with_suffix(".json").write_text(json.dumps(meta))
    out = tmp_path / "m.json"
    assert digits_cli.main(["measure", "--models", "none", "--weights", str(stem.with_suffix(".json")), "--generate", "10",
                    "--no-reference", "--json", str(out)]) == 0
    assert f"{entries[0].model} [converged, augment affine]" in capsys.readouterr().out
    (row,) = json.loads(out.read_text())["models"]
    assert row["key"] == f"file:{stem}" and "error" not in row and 0.0 <= row["photo"] <= 1.0
    assert digits_cli.main(["measure", "--models", "none", "--checkpoint", str(tmp_path / "missing"), "--generate", "2"]) == 2
    assert "not a readable model" in capsys.readouterr().err
    assert digits_cli.main(["measure", "--models", "none", "--generate", "2"]) == 2  # nothing to measure
