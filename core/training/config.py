"""Training settings: ``TrainConfig``, the named protocols, seed lists and the CLI options
(the table of derived seeds is core.seeds).

``TrainConfig.validate`` is the one validation of a training run's settings, for every
caller (CLI, run store, pages, reproduction grids): each out-of-range setting is named, one
per line, in a single ConfigError. Given the number of training images it also checks what
depends on them (batch size, validation split).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..data.datasets import DATASETS
from ..errors import ConfigError
from ..models.registry import config_fields, list_models, make_config
from .state import stored_names

MAX_ITERATIONS = 1_000_000
MAX_EVAL_SAMPLES = 100_000  # larger than any test split here
MAX_NOISE_DRAWS = 100  # each draw is one pass over the test set
OPTIMIZERS = ("sgd", "adam")
DEVICES = ("auto", "cpu", "cuda")
CLASS_WEIGHTINGS = ("auto", "none", "balanced")


def resolve_device(name: str):
    """The torch device for a config's ``device``; nothing here ever needs a GPU."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("Device cuda was asked for, but torch sees no GPU on this machine; use cpu or auto.")
    return torch.device(name)


SCHEDULES = ("none", "cosine", "step")
# training-image augmentation: "affine" = a small random affine per training image (rotation,
# translation, scale, shear; core.data.transforms.AFFINE_RANGES), drawn from the run's own seeded
# generator; validation and test images are never augmented
# "scan" = what real scans vary in (slant, elastic distortion, stroke width, binarisation;
# core.data.transforms.SCAN_RANGES), the protocol "converged-aug"
AUGMENTS = ("none", "affine", "scan")


# Named protocols: the paper's, and one that trains to convergence. "converged" was chosen by
# measurement (REPRODUCTION.md, "Converged protocol"): Adam with a cosine decay, weights of
# the best validation accuracy kept, the validation split carved from the training data
# (never the test set), early stopping when validation stops improving.
PROTOCOLS: dict[str, dict] = {
    "paper": dict(optimizer="sgd", lr=0.1, momentum=0.0, weight_decay=0.0, schedule="none", iterations=1000,
                  batch_size=100, val_images=0, patience=0),
    "converged": dict(optimizer="adam", lr=2e-3, momentum=0.0, weight_decay=0.0, schedule="cosine",
                      iterations=4000, batch_size=100, val_images=5000, patience=6, eval_every=250,
                      grad_clip=1.0),
}
# "converged-aug": the converged protocol with the "scan" augmentation of the training images
# (MNIST models that read other people's handwriting, docs/handwriting.md); its models are a protocol of
# their own, never mixed with the converged ones in a comparison.
PROTOCOLS["converged-aug"] = {**PROTOCOLS["converged"], "augment": "scan"}
# "converged-12k": the converged protocol with three times the budget (the cosine decay spans
# the 12,000 iterations); it tests whether 4,000 iterations are enough (results/budget)
PROTOCOLS["converged-12k"] = {**PROTOCOLS["converged"], "iterations": 12000}
# "converged-24k": six times the budget, for the data sets whose runs are still improving at
# 12,000 iterations by the convergence criterion (core.report.convergence; core.grid.long)
PROTOCOLS["converged-24k"] = {**PROTOCOLS["converged"], "iterations": 24000}

def protocol_help() -> str:
    """Each named protocol in a few words, for the command lines' ``--protocol`` help: the key
    "converged" is the short budget (4,000 iterations), not a claim that its runs converged."""
    def one(name: str, p: dict) -> str:
        opt = "SGD" if p["optimizer"] == "sgd" else "Adam"
        sched = f", {p['schedule']}" if p.get("schedule", "none") != "none" else ""
        aug = f", {p['augment']} augmentation" if p.get("augment", "none") != "none" else ""
        return f"{name}: {opt} {p['lr']:g}{sched}, {p['iterations']:,} iterations{aug}"
    return "; ".join(one(n, p) for n, p in PROTOCOLS.items())


# the settings that tell the protocols apart (how often the test accuracy is logged does not)
_PROTOCOL_KEYS = sorted(({k for p in PROTOCOLS.values() for k in p} | {"grad_clip"}) - {"eval_every"})


def protocol_of(train_config) -> str:
    """The protocol a run's settings follow: ``"paper"``, ``"converged"``, or ``"custom"`` when
    any setting that tells them apart (optimiser, learning rate, schedule, iterations, batch,
    validation, clipping, ...) differs from both; ``""`` without settings."""
    if not isinstance(train_config, dict) or not train_config:
        return ""
    base = {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.name in _PROTOCOL_KEYS}
    for name, settings in PROTOCOLS.items():
        want = {**base, **settings}
        if all(_same(train_config.get(k, base.get(k)), want.get(k)) for k in _PROTOCOL_KEYS):
            return name
    return "custom"


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    return a == b


def _number(v) -> bool:  # a real number (bool is not one here)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _finite(v) -> bool:
    return _number(v) and math.isfinite(v)


@dataclass
class TrainConfig:
    dataset: str = "mnist"
    model: str = "rim"
    seed: int = 0
    iterations: int = 1000
    batch_size: int = 100
    lr: float = 0.1
    momentum: float = 0.0  # SGD only
    optimizer: str = "sgd"  # "sgd" (the paper's) or "adam" (torch.optim.Adam)
    weight_decay: float = 0.0
    schedule: str = "none"  # learning rate over iterations: "none", "cosine" (to 0 at the end), "step"
    step_every: int = 1000  # "step": multiply the learning rate by step_gamma every this many iterations
    step_gamma: float = 0.1
    val_images: int = 0  # hold out this many training images (fixed, seeded) for validation; 0 = none
    patience: int = 0  # with validation: stop after this many evaluations without a better one; 0 = never
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    eval_every: int = 100  # periodic test accuracy every this many iterations
    eval_samples: int = 1000  # size of the fixed test subset used for periodic accuracy
    class_weighting: str = "auto"  # "none", "balanced", or "auto" (balanced if classes are unbalanced)
    holdout_sample: bool = True  # MNIST: leave out train images 0..9,999 (the bundled sample)
    noise_var: float = 0.01  # Gaussian noise variance for the final noisy test
    noise_draws: int = 3  # noise draws averaged in the final noisy test
    threads: int | None = None  # torch threads; None = OMP_NUM_THREADS if set, else cores, at most 2 per run
    state_every: int = 200  # training state (to resume from) every this many iterations; 0 = not by count
    state_every_s: float = 60.0  # ... and at least every this many seconds; 0 = not by time
    model_overrides: dict = field(default_factory=dict)
    device: str = "auto"  # "auto" (CUDA when torch sees a GPU, else CPU), "cpu" or "cuda"
    data_source: str = "auto"  # "auto" (data folder, torchvision, ...) or "sample" (a labelled demo)
    augment: str = "none"  # training images only: "none", "affine" (small random affine) or "scan"

    def validate(self, n_train: int | None = None) -> TrainConfig:
        """Raise one ConfigError naming every out-of-range setting (one per line): each field
        against its own range (``FIELD_CHECKS``), then the checks across fields and against the
        number of training images (:func:`_cross_field_problems`)."""
        names = {"datasets": ", ".join(DATASETS), "models": ", ".join(list_models())}
        problems = [message.format(v=getattr(self, name), **names)
                    for name, ok, message in FIELD_CHECKS if not ok(getattr(self, name))]
        problems += _cross_field_problems(self, n_train)
        if problems:
            raise ConfigError("\n".join(dict.fromkeys(problems)))
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_protocol(cls, protocol: str, **kw) -> TrainConfig:
        """A config with a named protocol's settings (``PROTOCOLS``), then ``kw`` on top."""
        if protocol not in PROTOCOLS:
            raise ConfigError(f"Unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}.")
        return cls(**{**PROTOCOLS[protocol], **kw})

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        d = stored_names(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"Unknown training setting(s): {', '.join(unknown)}")
        return cls(**d)


# Each field against its own range: (field, check, message); a message may name the value
# ({v}) and the choices ({datasets}, {models}). The checks across fields follow below.
FIELD_CHECKS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("dataset", lambda v: v in DATASETS, "Unknown data set {v!r}; choose one of {datasets}."),
    ("model", lambda v: v in list_models(), "Unknown model {v!r}; choose one of {models}."),
    ("seed", lambda v: _whole(v) and v >= 0, "Seed must be a whole number >= 0."),
    ("iterations", lambda v: _whole(v) and 1 <= v <= MAX_ITERATIONS,
     f"Iterations must be between 1 and {MAX_ITERATIONS:,}."),
    ("batch_size", lambda v: _whole(v) and v >= 1, "Batch size must be at least 1."),
    ("lr", lambda v: _finite(v) and 0 < v <= 10, "Learning rate must be a number in (0, 10]."),
    ("momentum", lambda v: _finite(v) and 0 <= v < 1, "Momentum must be in [0, 1)."),
    ("optimizer", lambda v: v in OPTIMIZERS, f"Optimizer must be one of {', '.join(OPTIMIZERS)}, got {{v!r}}."),
    ("weight_decay", lambda v: _finite(v) and 0 <= v < 1, "Weight decay must be in [0, 1)."),
    ("schedule", lambda v: v in SCHEDULES,
     f"Learning-rate schedule must be one of {', '.join(SCHEDULES)}, got {{v!r}}."),
    ("augment", lambda v: v in AUGMENTS, f"Augmentation must be one of {', '.join(AUGMENTS)}, got {{v!r}}."),
    ("step_every", lambda v: _whole(v) and v >= 1, "Step schedule: step every must be at least 1 iteration."),
    ("step_gamma", lambda v: _finite(v) and 0 < v <= 1, "Step schedule: the factor must be in (0, 1]."),
    ("val_images", lambda v: _whole(v) and v >= 0, "Validation images must be a whole number >= 0."),
    ("patience", lambda v: _whole(v) and v >= 0, "Patience must be a whole number >= 0."),
    ("grad_clip", lambda v: v is None or (_finite(v) and v > 0), "Gradient clipping must be a positive number (or off)."),
    ("eval_every", lambda v: _whole(v) and v >= 1, "Evaluate-every must be at least 1 iteration."),
    ("eval_samples", lambda v: _whole(v) and 1 <= v <= MAX_EVAL_SAMPLES,
     f"Evaluation samples (the live test subset) must be between 1 and {MAX_EVAL_SAMPLES:,}."),
    ("class_weighting", lambda v: v in CLASS_WEIGHTINGS,
     "Class weighting must be 'none', 'balanced' or 'auto'."),
    ("noise_var", lambda v: _finite(v) and 0 <= v <= 1, "Noise variance must be in [0, 1]."),
    ("noise_draws", lambda v: _whole(v) and 0 <= v <= MAX_NOISE_DRAWS,
     f"Noise draws must be between 0 and {MAX_NOISE_DRAWS}."),
    ("data_source", lambda v: v in ("auto", "sample"), "Data source must be 'auto' or 'sample', got {v!r}."),
    ("device", lambda v: v in DEVICES, f"Device must be one of {', '.join(DEVICES)}, got {{v!r}}."),
    ("threads", lambda v: v is None or (_whole(v) and v >= 1), "Threads must be at least 1."),
    ("state_every", lambda v: _whole(v) and v >= 0,
     "Training state every (iterations) must be a whole number >= 0 (0 = not by count)."),
    ("state_every_s", lambda v: _finite(v) and v >= 0,
     "Training state every (seconds) must be a number >= 0 (0 = not by time)."),
    ("model_overrides", lambda v: isinstance(v, dict), "Model overrides must be a mapping of config fields."),
)


def _cross_field_problems(cfg: TrainConfig, n_train: int | None) -> list[str]:
    """What a setting means together with another one, or with ``n_train`` training images:
    batch and validation split against the data, momentum and patience against what they need,
    the model's settings built as its config, a GPU asked for."""
    bad: list[str] = []
    batch_ok, val_ok = _whole(cfg.batch_size), _whole(cfg.val_images) and cfg.val_images >= 0
    if n_train is not None and batch_ok and cfg.batch_size > n_train:
        bad.append(f"Batch size {cfg.batch_size} is larger than the training set ({n_train} images).")
    if cfg.optimizer != "sgd" and cfg.momentum:
        bad.append("Momentum applies to SGD only (Adam has its own moment estimates); set it to 0.")
    if n_train is not None and val_ok and cfg.val_images:
        if cfg.val_images >= n_train:
            bad.append(f"Validation images ({cfg.val_images:,}) must be fewer than the training images ({n_train:,}).")
        elif batch_ok and cfg.batch_size > n_train - cfg.val_images:
            bad.append(f"Batch size {cfg.batch_size} is larger than the training set left after validation "
                       f"({n_train - cfg.val_images} images).")
    if cfg.patience and val_ok and not cfg.val_images:
        bad.append("Early stopping (patience) needs validation images.")
    fixed = sorted({"input_dim", "num_classes"} & set(cfg.model_overrides))
    if fixed:
        bad.append(f"Model setting(s) {', '.join(fixed)} follow from the data set and cannot be overridden.")
    if cfg.model in list_models() and isinstance(cfg.model_overrides, dict) and not fixed:
        info = DATASETS.get(cfg.dataset)
        shape = {} if info is None else dict(input_dim=info.input_dim, num_classes=len(info.classes))
        try:  # unknown, mistyped, negative or inconsistent model settings (built as the model's config)
            make_config(cfg.model, **shape, **cfg.model_overrides)
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
            bad.append(str(exc).strip("'\""))
    if cfg.device in DEVICES:
        try:  # cuda without a GPU: said before a run is queued, not when it starts
            resolve_device(cfg.device)
        except ConfigError as exc:
            bad.append(str(exc))
    return bad


# the model settings the Train form offers (RIM's choice of active LSTMs, the LSTMs' forget bias);
# a model gets those its config has, where they differ from its defaults
FORM_MODEL_SETTINGS = ("forget_bias", "selection", "k_active", "alpha")


def model_overrides(model: str, settings: dict) -> dict:
    """The ``settings`` (``FORM_MODEL_SETTINGS``) that ``model`` has, where they differ from its defaults."""
    fields = config_fields(model)
    return {k: v for k, v in settings.items() if k in FORM_MODEL_SETTINGS and k in fields and fields[k] != v}


def config_from_form(form: dict, model: str, seed: int) -> TrainConfig:
    """One run's config from the Train form's values: ``form`` holds TrainConfig fields by name
    (numbers as the widgets give them) and ``clip_on`` (clip at ``grad_clip`` or not), ``demo``
    (train on the bundled sample) and the model settings ``FORM_MODEL_SETTINGS``. Momentum counts
    for SGD only, patience only with a validation split. Not validated: see :func:`configs_from_form`."""
    val_images = int(form["val_images"])
    return TrainConfig(
        dataset=form["dataset"], model=model, seed=int(seed), iterations=int(form["iterations"]),
        batch_size=int(form["batch_size"]), lr=float(form["lr"]),
        momentum=float(form["momentum"]) if form["optimizer"] == "sgd" else 0.0, optimizer=form["optimizer"],
        weight_decay=float(form["weight_decay"]), schedule=form["schedule"], step_every=int(form["step_every"]),
        step_gamma=float(form["step_gamma"]), val_images=val_images,
        patience=int(form["patience"]) if val_images else 0,
        grad_clip=float(form["grad_clip"]) if form.get("clip_on") else None,
        eval_every=int(form["eval_every"]), eval_samples=int(form["eval_samples"]),
        class_weighting=form["class_weighting"], holdout_sample=bool(form["holdout_sample"]),
        noise_var=float(form["noise_var"]), noise_draws=int(form["noise_draws"]), device=form["device"],
        data_source="sample" if form.get("demo") else "auto", augment=form["augment"],
        model_overrides=model_overrides(model, {
            "forget_bias": float(form["forget_bias"]), "selection": form["selection"],
            "k_active": int(form["k_active"]), "alpha": float(form["alpha"])}))


def configs_from_form(form: dict, models: list[str], seeds: list[int],
                      n_train: int | None = None) -> tuple[list[TrainConfig], list[str]]:
    """One validated config per model and seed (:func:`config_from_form`), and every problem,
    each once; with any problem, no config."""
    configs, problems = [], []
    for m in models:
        for s in seeds:
            cfg = config_from_form(form, m, s)
            try:
                configs.append(cfg.validate(n_train=n_train))
            except ConfigError as exc:
                problems.extend(str(exc).splitlines())
    problems = list(dict.fromkeys(problems))
    return ([] if problems else configs), problems


def parse_seeds(text: str, limit: int = 20) -> list[int]:
    """``"0"``, ``"0,1,2"``, ``"0 1 2"`` or ``"0-4"`` -> distinct seeds; ConfigError otherwise."""
    seeds: list[int] = []
    for part in re.split(r"[,\s;]+", str(text).strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,9})(?:-(\d{1,9}))?", part)
        if not m:
            raise ConfigError(f"Seeds must be whole numbers >= 0 such as '0', '0,1,2' or '0-4'; got {part!r}.")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"Seed range {part!r} runs backwards.")
        if hi - lo + 1 > limit:
            raise ConfigError(f"At most {limit} seeds at once.")
        for s in range(lo, hi + 1):
            if s not in seeds:
                seeds.append(s)
    if not seeds:
        raise ConfigError("Give at least one seed, e.g. 0 or 0,1,2.")
    if len(seeds) > limit:
        raise ConfigError(f"At most {limit} seeds at once.")
    return seeds


# ---------------------------------------------------------------------------------------
def _deprecated(new: str, const=None) -> type[argparse.Action]:
    """An argparse action for an old option name: stores like ``new`` (``const`` for a flag) and
    warns that the name is deprecated. The options say *state* for what resumes a run, *weights*
    for what it leaves."""

    class Deprecated(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            import warnings

            warnings.warn(f"{option_string} is deprecated; use {new}", FutureWarning, stacklevel=2)
            setattr(namespace, self.dest, const if const is not None else values)

    return Deprecated


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = argparse.ArgumentParser(
        prog="python -m core.train",
        description="Train one model on one data set with the paper protocol (SGD lr 0.1, "
                    "batch 100, 1,000 iterations) and save its weights (safetensors + JSON). Options given "
                    "here always win over --protocol's settings.")
    p.add_argument("--dataset", default=d.dataset, choices=list(DATASETS), help="data set (default %(default)s)")
    p.add_argument("--model", default=d.model, choices=list_models(), help="model (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed for weights and batch order (default %(default)s)")
    p.add_argument("--iterations", type=int, default=None, help=f"training iterations (default {d.iterations})")
    p.add_argument("--batch-size", type=int, default=None, help=f"batch size (default {d.batch_size})")
    p.add_argument("--lr", type=float, default=None, help=f"SGD learning rate (default {d.lr})")
    p.add_argument("--momentum", type=float, default=None, help=f"SGD momentum (default {d.momentum}, the paper's plain SGD)")
    p.add_argument("--protocol", choices=list(PROTOCOLS), default=None,
                   help=f"start from a named protocol's settings ({protocol_help()}); explicit options win")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help=f"optimizer (default {d.optimizer})")
    p.add_argument("--weight-decay", type=float, default=None, help=f"weight decay (default {d.weight_decay})")
    p.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help=f"learning-rate schedule over the iterations (default {d.schedule})")
    p.add_argument("--augment", choices=AUGMENTS, default=None,
                   help="training images only: affine = a small random rotation (about 10 degrees), shift "
                        "(about 2 px), scale (0.9-1.1) and shear per image, seeded; validation and test images "
                        "are never changed; scan = what real scans vary in: a wider slant and size, elastic "
                        f"distortion, stroke width, binarisation (protocol converged-aug) (default {d.augment})")
    p.add_argument("--step-every", type=int, default=None, help=f"step schedule: iterations per step (default {d.step_every})")
    p.add_argument("--step-gamma", type=float, default=None, help=f"step schedule: factor per step (default {d.step_gamma})")
    p.add_argument("--val-images", type=int, default=None,
                   help=f"training images held out for validation; the best-validation weights are kept (default {d.val_images})")
    p.add_argument("--patience", type=int, default=None,
                   help="early stop after this many evaluations without a better validation accuracy (0 = off)")
    p.add_argument("--grad-clip", type=float, default=None, help="clip the global gradient norm to this value (default: off)")
    p.add_argument("--eval-every", type=int, default=None, help=f"test accuracy on a fixed subset every N iterations (default {d.eval_every})")
    p.add_argument("--eval-samples", type=int, default=None, help=f"size of that test subset (default {d.eval_samples})")
    p.add_argument("--class-weighting", default=None, choices=list(CLASS_WEIGHTINGS),
                   help=f"class-weighted loss; auto = balanced when the classes are unbalanced (default {d.class_weighting})")
    p.add_argument("--no-holdout-sample", action="store_true",
                   help="MNIST: also train on images 0..9,999 (by default they are held out because the bundled sample comes from them)")
    p.add_argument("--noise-var", type=float, default=None, help=f"Gaussian noise variance of the final noisy test (default {d.noise_var})")
    p.add_argument("--noise-draws", type=int, default=None, help=f"noise draws averaged in the final noisy test (default {d.noise_draws})")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: OMP_NUM_THREADS if set, else cores, at most 2)")
    p.add_argument("--device", choices=DEVICES, default=None,
                   help=f"auto = CUDA when torch sees a GPU, else CPU (default {d.device})")
    p.add_argument("--state-every", dest="state_every", type=int, default=None,
                   help=f"training state (to resume from) every N iterations; 0 = not by count (default {d.state_every})")
    p.add_argument("--state-every-s", dest="state_every_s", type=float, default=None,
                   help=f"... and at least every S seconds; 0 = not by time (default {d.state_every_s})")
    p.add_argument("--checkpoint-every", dest="state_every", type=int, action=_deprecated("--state-every"),
                   help=argparse.SUPPRESS)
    p.add_argument("--checkpoint-every-s", dest="state_every_s", type=float,
                   action=_deprecated("--state-every-s"), help=argparse.SUPPRESS)
    p.add_argument("--resume", default=None, metavar="OUT",
                   help="continue an interrupted run: its --out stem or its training-state folder (<out>.ckpt); its settings, "
                        "data folder and output path come from the state (--threads, --quiet and --out still apply)")
    p.add_argument("--keep-states", dest="keep_states", action="store_true",
                   help="keep the training-state folder after the run completed (default: removed)")
    p.add_argument("--keep-checkpoints", dest="keep_states", nargs=0, action=_deprecated("--keep-states", True),
                   help=argparse.SUPPRESS)
    p.add_argument("--data-dir", default=None, help="folder with <dataset>/{train,test}.npz (default: $RIMSCOPE_DATA_DIR or ./data)")
    p.add_argument("--out", default=None, help="path stem of the saved weights (default runs/<dataset>_<model>_s<seed>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, e.g. --set k_active=3 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


_CLI_FIELDS = ("device", "iterations", "batch_size", "lr", "momentum", "optimizer", "weight_decay", "schedule", "step_every",
               "step_gamma", "val_images", "patience", "grad_clip", "eval_every", "eval_samples", "class_weighting",
               "noise_var", "noise_draws", "threads", "state_every", "state_every_s", "augment")


def config_from_args(args) -> TrainConfig:
    """The TrainConfig of parsed CLI arguments: a protocol's settings, then every option given."""
    base = dict(PROTOCOLS[args.protocol]) if args.protocol else {}
    for f in _CLI_FIELDS:  # every option given wins over the protocol, whatever its value
        if getattr(args, f) is not None:
            base[f] = getattr(args, f)
    return TrainConfig(dataset=args.dataset, model=args.model, seed=args.seed,
                       holdout_sample=not args.no_holdout_sample, model_overrides=parse_overrides(args.set),
                       **base).validate()


def parse_overrides(items: list[str]) -> dict:
    """``["k_active=3"]`` -> ``{"k_active": 3}`` (values read as JSON where they parse, else text)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out

