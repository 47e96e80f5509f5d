"""How the MNIST models read handwriting from outside MNIST: measure.py (the generated digits of
core.digits.synth), external.py (other people's handwriting), ``python -m core.studies.handwriting``."""
