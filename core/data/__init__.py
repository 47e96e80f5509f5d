"""Data sets (datasets.py: registry, sources, training-data plan) and what turns images into rows
(transforms.py: rows, noise, stretch, augmentation)."""
