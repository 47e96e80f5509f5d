"""Digits people draw or photograph: load.py (uploaded bytes), ink.py, prepare.py (image -> what the
model sees), glyphs.py and synth.py (generated digits), measure.py; ``python -m core.digits``."""
