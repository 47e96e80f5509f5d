"""The Robustness page's error table (core.report.frames.error_change_frames): the change is the
difference of the two errors shown beside it, on the same images."""

from __future__ import annotations

from core.report.frames import ErrorAt, error_change_frames


def test_the_change_is_the_difference_of_the_errors_shown_on_the_same_images():
    # the paper protocol's RIM as the issue saw it: 19.0 % noisy, 15.36 % clean on the subset, 12.39 % full set
    rows = [ErrorAt("RIM", 0.1904, 0.16, 0.22, 500, 0.1536, 0.1239), ErrorAt("IndRNN", 0.2, 0.17, 0.23, 500, 0.2, None)]
    shown, numbers = error_change_frames(rows, "test images", "Gaussian variance 0.01")
    assert list(shown.columns) == ["model", "test error on 500 test images", "clean, same 500 test images",
                                   "change vs clean", "95% interval", "clean, full test set"]
    rim = shown.iloc[0]
    assert (rim["test error on 500 test images"], rim["clean, same 500 test images"]) == ("19.0%", "15.4%")
    assert rim["change vs clean"] == "+3.6 points"  # 19.0 - 15.4, as shown (not 3.68 rounded to 3.7)
    assert rim["clean, full test set"] == "12.39%"
    assert shown.iloc[1]["change vs clean"] == "±0.0 points" and shown.iloc[1]["clean, full test set"] == "–"
    assert numbers.iloc[0]["clean error (%)"] == 15.36 and numbers.iloc[0]["test error (%)"] == 19.04


def test_the_stretch_table_names_its_reference():
    shown, numbers = error_change_frames([ErrorAt("RIM", 0.3, 0.2, 0.4, 100, 0.1)], "sample images", "stretch ×2",
                                         versus="unstretched")
    assert "unstretched, same 100 sample images" in shown.columns and shown.iloc[0]["change vs unstretched"] == "+20.0 points"
    assert "unstretched error (%)" in numbers.columns
