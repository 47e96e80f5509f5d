"""The part of every model's config that comes from the data, not from the method."""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn


@dataclass
class SequenceConfig:
    """Every model reads an image as a sequence of rows; the data set fixes these two numbers
    (``build_model(name, input_dim=..., num_classes=...)``), the model's own fields follow."""

    input_dim: int = 28  # D: features per row (image width x channels)
    num_classes: int = 10


class SequenceModel(nn.Module):
    """The base of every model: ``Model(config)`` keeps ``self.config``; ``Model.config_class``
    is the config it takes, named in the class line: ``class RIM(SequenceModel, config=RIMConfig)``."""

    config_class: type = SequenceConfig

    def __init_subclass__(cls, config: type | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if config is not None:
            cls.config_class = config

    def __init__(self, config):
        super().__init__()
        self.config = config
