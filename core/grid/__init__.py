"""The reproduction grid: cells.py (one cell, shared by the engines), local.py (process pool),
ray.py (Ray), export.py (pretrained/), cli.py (``python -m core.reproduce``)."""
