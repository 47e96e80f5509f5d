"""Training: config.py (TrainConfig, protocols, CLI options), loop.py (train()), weights.py (model
files: safetensors + JSON), state.py (the full training state, to resume bit-identically), cli.py
(``python -m core.train``)."""
