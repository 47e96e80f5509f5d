"""The start and the end of a run, shared by every caller that trains one and keeps the result:
the training CLI (core.training.cli), the run store's worker (core.runs.worker) and the grid's
cells (core.grid.cells). The same config therefore trains the same, and leaves the same files,
whichever of them runs it.

``load_run_data``: the training and test data of a config, and the config fitted to them (the
small-data validation rule, :func:`fit_validation`), validated.
``finish_run``: save the weights, drop the training states, and say the final status and
message (:class:`FinishedRun`); each caller reports them its own way (a line on stderr, the
run's status.json, the grid's summary).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .config import TrainConfig


def fit_validation(cfg: TrainConfig, n_train: int) -> TrainConfig:
    """``cfg`` with its validation split fitted to ``n_train`` training images: at most a tenth
    of them (at least one) is held out, so a protocol's 5,000 validation images on a small
    data set leave most images for training. Idempotent: a fitted config stays as it is (a
    resumed training state holds the fitted value)."""
    v = cfg.val_images
    if isinstance(v, int) and not isinstance(v, bool) and v > 0 and v > n_train // 10:
        return dataclasses.replace(cfg, val_images=max(1, n_train // 10))
    return cfg


def load_run_data(cfg: TrainConfig, data_dir=None):
    """``(cfg, train_data, test_data, note)``: the data a run trains and tests on, and ``cfg``
    fitted to it (:func:`fit_validation`) and validated against its size (ConfigError
    otherwise); the note says what was held out or changed."""
    from ..data.plan import prepare_training_data

    train_data, test_data, note = prepare_training_data(cfg, data_dir)
    fitted = fit_validation(cfg, len(train_data))
    if fitted.val_images != cfg.val_images:
        said = (f"validation split of {fitted.val_images:,} images (a tenth of the {len(train_data):,} training "
                f"images; {cfg.val_images:,} asked)")
        note = f"{note}; {said}" if note else said
    return fitted.validate(n_train=len(train_data)), train_data, test_data, note


@dataclass
class FinishedRun:
    """What the end of a run left: its final status and message, the weights file (None when
    none was saved) and the metadata stored beside the weights."""

    status: str  # "completed", "stopped" or "diverged" (the TrainResult's)
    message: str
    weights: Path | None
    metadata: dict


def finish_run(cfg: TrainConfig, result, train_data, test_data, note: str, *, stem, state_dir=None,
               extra_meta: dict | None = None, keep_states: bool = False,
               record_diverged: bool = False, message: str | None = None) -> FinishedRun:
    """Save the weights of a finished training (``result``, a TrainResult) as ``<stem>.safetensors``
    + ``<stem>.json`` and drop its training states in ``state_dir``; the final status and message.

    - completed, or stopped after at least one iteration: the weights are saved. A stopped run
      keeps its training states (it can be resumed); a completed one drops them unless
      ``keep_states``.
    - diverged: no weights (they hold NaN); the training states are dropped (resuming would
      diverge again); with ``record_diverged`` the metadata alone is written to ``<stem>.json``
      (a grid counts a diverged cell as a result).
    - stopped before the first iteration: nothing is saved.

    A failed write raises WeightsError and leaves the training states in place.
    ``extra_meta`` is added to the metadata (a run id, a grid variant, ...); ``message``, when
    given, replaces the result's (a caller that knows better why the run stopped).
    """
    from ..fileio import write_json
    from .state import remove_states
    from .weights import run_metadata, save_weights

    stem = Path(stem)
    meta = {**run_metadata(cfg, result, train_data, test_data, note), **(extra_meta or {})}
    done = int(result.metrics.get("iterations_done", 0))
    status, weights = result.status, None
    message = result.message if message is None else message
    if status == "diverged":
        if record_diverged:
            write_json(stem.with_suffix(".json"), meta)
    elif done >= 1:
        weights = save_weights(result.model, meta, stem)
    else:
        message = "stopped before the first iteration; nothing to save"
    if state_dir is not None:
        if status == "diverged" or (status == "completed" and not keep_states):
            remove_states(state_dir)  # nothing left to resume
        elif status == "stopped" and result.state_path is not None:
            message += "; it can be resumed"
    return FinishedRun(status, message, weights, meta)
