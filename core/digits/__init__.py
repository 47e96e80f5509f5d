"""Digits people draw or photograph, turned into model input: load.py (uploaded bytes), ink.py,
prepare.py (image -> what the model sees), glyphs.py and synth.py (generated digits). The
experiments on them live in core.studies.handwriting."""
