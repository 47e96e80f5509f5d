"""Model registry: every model is built by name from one set of keyword arguments.

``build_model(name, input_dim=D, num_classes=C, **overrides)`` returns an ``nn.Module`` whose
``forward(x [B,T,D], return_trace=False)`` gives logits ``[B,C]`` or ``(logits, trace)``.
Every trace has ``"activity"`` ``[B,T,U]`` (a per-unit view the pages draw for any model)
plus the model's own tensors; ``model.unit_names`` labels the U axis.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch.nn as nn

from .entnet import EntNet
from .indrnn import IndRNN
from .parallel_lstm import ParallelLSTM
from .rim import RIM
from .rmc import RMC


@dataclass(frozen=True)
class TraceSchema:
    """What a model's trace holds and how the pages draw it (no page branches on a model name).

    ``activity`` (``[T, U]`` per image) is in every trace; the other keys name optional
    tensors: a selection mask ``[T, U]`` (1 = the unit is active), the head-averaged
    input-attention weight on the real row ``[T, U]``, that weight per head ``[T, U, heads]``
    and the communication attention ``[T, U, U]`` (row = reader). None: the model has no such
    panel.
    """

    activity_label: str  # what the "activity" trace means for this model
    activity_binary: bool = False  # activity is a 0/1 mask: range 0..1, its averages are shares
    mask: str | None = None
    input_attention: str | None = None
    input_heads: str | None = None
    comm_attention: str | None = None
    step_note: str = ""  # what one step does, in words (shown beside the step on the Mechanisms page)

    @property
    def mean_label(self) -> str:
        """Short colour-bar title of an average of the activity."""
        return "share active" if self.activity_binary else "mean"

    @property
    def mean_what(self) -> str:
        """What an average of the activity is, in words."""
        return "fraction of rows active" if self.activity_binary else f"mean {self.activity_label}"

    @property
    def value_range(self) -> tuple[float | None, float | None]:
        """The fixed colour range of the activity and its averages (None: fitted to the values)."""
        return (0.0, 1.0) if self.activity_binary else (None, None)

    def has(self, trace: dict, panel: str) -> bool:
        """Whether ``trace`` holds the tensor of ``panel`` ("mask", "input_attention", ...)."""
        key = getattr(self, panel)
        return key is not None and key in trace

    def get(self, trace: dict, panel: str):
        """The tensor of ``panel`` in ``trace``, or None."""
        return trace[getattr(self, panel)] if self.has(trace, panel) else None


@dataclass(frozen=True)
class ModelSpec:
    name: str
    title: str
    cls: type
    description: str
    trace: TraceSchema
    init: str = ""  # its initialisation, in words (shown beside the parameter count)
    forget_gate: bool = False  # has LSTM-style forget gates (their bias: config forget_bias)
    selects_units: bool = False  # its trace mask is a real choice of units (core.eval.selection applies)
    is_method: bool = False  # the paper's method: drawn highlighted, the pages' default model

    @property
    def activity_label(self) -> str:
        return self.trace.activity_label


_REGISTRY: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        ModelSpec("rim", "RIM (paper's method)", RIM,
                  "6 LSTMs x 32 units; input attention activates 4 per row; active ones read 1/10 from the others",
                  TraceSchema("active (1) / inactive (0)", activity_binary=True, mask="active",
                              input_attention="input_attention", input_heads="input_attention_heads",
                              comm_attention="comm_attention",
                              step_note="An active LSTM runs its own LSTM cell on the row and then adds 1/10 of "
                                        "what it reads from the others (attention on the left); an inactive one "
                                        "keeps its state unchanged."),
                  "LSTM weights U(±1/√H), LSTM biases 0, forget bias 1; query bias U(±0.5)",
                  forget_gate=True, selects_units=True, is_method=True),
        ModelSpec("parallel_lstm", "Parallel LSTMs", ParallelLSTM,
                  "4 independent LSTMs x 32 units, all active, no communication",
                  TraceSchema("hidden-state norm"), "LSTM weights U(±1/√H), LSTM biases 0, forget bias 1",
                  forget_gate=True),
        ModelSpec("entnet", "EntNet", EntNet,
                  "Recurrent entity network: gated memory slots with keys", TraceSchema("write gate"),
                  "nn.Linear defaults; keys N(0, 1/d); no forget gate (slots are renormalised)"),
        ModelSpec("rmc", "RMC", RMC,
                  "Relational memory core: memory slots updated by multi-head attention",
                  TraceSchema("mean input gate"),
                  "nn.Linear defaults; gate biases 0, forget bias 1, input bias 0; memory starts at I",
                  forget_gate=True),
        ModelSpec("indrnn", "IndRNN", IndRNN,
                  "Independently recurrent network: element-wise recurrence, 2 layers",
                  TraceSchema("fraction of units firing"),
                  "nn.Linear defaults; recurrent weights U(0, 1); no gates"),
    ]
}


# the paper's method: the pages' default model and the line drawn highlighted
DEFAULT_MODEL = next(s.name for s in _REGISTRY.values() if s.is_method)


def is_method(name: str) -> bool:
    """Whether ``name`` is the paper's method (False for unknown names, e.g. an upload's)."""
    spec = _REGISTRY.get(name)
    return bool(spec and spec.is_method)


def trace_schema(name: str) -> TraceSchema:
    """The trace schema of ``name``; an unknown model has only its ``activity``."""
    spec = _REGISTRY.get(name)
    return spec.trace if spec else TraceSchema("activity")


# integer settings are sizes or counts: at least 1, except these
_MIN_INT = {"mlp_layers": 0}


def list_models() -> list[str]:
    return list(_REGISTRY)


def get_spec(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"Unknown model {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def config_fields(name: str) -> dict[str, object]:
    """The config fields of a model with their defaults."""
    cfg_cls = get_spec(name).cls.config_class
    return {f.name: f.default for f in dataclasses.fields(cfg_cls)}


def make_config(name: str, **kwargs):
    """Build a model's config, refusing unknown or mistyped fields with a clear message."""
    fields = config_fields(name)
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise ValueError(f"Unknown setting(s) for {name}: {', '.join(unknown)}")
    clean = {}
    for key, value in kwargs.items():
        default = fields[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = True
        if not ok:
            raise ValueError(f"Setting {key} of {name} must be {type(default).__name__}, got {value!r}")
        if isinstance(default, int) and not isinstance(default, bool) and value < _MIN_INT.get(key, 1):
            raise ValueError(f"Setting {key} of {name} must be at least {_MIN_INT.get(key, 1)}, got {value!r}")
        if isinstance(default, float) and not math.isfinite(value):
            raise ValueError(f"Setting {key} of {name} must be a finite number, got {value!r}")
        clean[key] = value
    return get_spec(name).cls.config_class(**clean)


def build_model(name: str, input_dim: int = 28, num_classes: int = 10, **overrides) -> nn.Module:
    """Build model ``name`` for rows of ``input_dim`` features and ``num_classes`` classes."""
    cfg = make_config(name, input_dim=input_dim, num_classes=num_classes, **overrides)
    model = get_spec(name).cls(cfg)
    model.model_name = name
    return model


def model_config_dict(model: nn.Module) -> dict:
    """The config a model was built with, as plain JSON-able values."""
    return dataclasses.asdict(model.config)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_counts(input_dim: int = 28, num_classes: int = 10) -> dict[str, int]:
    return {n: count_parameters(build_model(n, input_dim, num_classes)) for n in _REGISTRY}


__all__ = ["build_model", "list_models", "get_spec", "count_parameters", "parameter_counts",
           "make_config", "config_fields", "model_config_dict", "ModelSpec", "TraceSchema", "DEFAULT_MODEL",
           "is_method", "trace_schema"]
