"""Evaluation: predict.py (the one inference path), points.py (clean, noisy, stretched), curves.py
(shipped robustness curves), scorer.py, selection.py (what the attention decides)."""
