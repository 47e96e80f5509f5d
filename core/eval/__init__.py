"""Evaluation: predict.py (the one inference path), robustness_points.py (clean, noisy, stretched; activity), curves.py
(shipped robustness curves), scorer.py, selection.py (what the attention decides)."""
