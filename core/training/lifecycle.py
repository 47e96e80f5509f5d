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
import re
from dataclasses import dataclass
from pathlib import Path

from .config import PROTOCOLS, TrainConfig


def fitted_val_images(asked: int, n_train: int) -> int:
    """The validation split a run holds out of ``n_train`` training images when its config asks
    for ``asked``: at most a tenth of them (at least one), so a protocol's 5,000 validation images
    on a small data set leave most images for training (REPRODUCTION.md: "a tenth of the
    training set where that is smaller"). ``asked`` 0 (no split) or not a whole number stays."""
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 and asked > n_train // 10:
        return max(1, n_train // 10)
    return asked


def fit_validation(cfg: TrainConfig, n_train: int) -> TrainConfig:
    """``cfg`` with its validation split fitted to ``n_train`` training images
    (:func:`fitted_val_images`). Idempotent: a fitted config stays as it is (a resumed
    training state holds the fitted value)."""
    v = fitted_val_images(cfg.val_images, n_train)
    return cfg if v == cfg.val_images else dataclasses.replace(cfg, val_images=v)


def protocol_val_images(protocol: str | None, n_train: int | None = None) -> int:
    """The validation split of ``protocol`` (``core.training.config.PROTOCOLS``; the default
    config's where it names none) on ``n_train`` training images (:func:`fitted_val_images`), as
    it asks it when ``n_train`` is not known."""
    asked = (PROTOCOLS.get(str(protocol or "")) or {}).get("val_images", TrainConfig().val_images)
    return asked if n_train is None else fitted_val_images(asked, n_train)


def as_protocol_asks(cfg: TrainConfig, protocol: str | None, n_train: int | None) -> TrainConfig:
    """``cfg`` with a validation split that is ``protocol``'s fitted to ``n_train`` training images
    (:func:`fitted_val_images`: 106 of 1,060 where the protocol asks 5,000) recorded as the protocol
    asks it: the run fits it to the same split at its start (:func:`fit_validation`), and its
    settings read as the protocol's (``core.training.config.protocol_of``), as those of a run of the
    protocol started from the CLI or a grid. Any other config stays as it is."""
    asked = (PROTOCOLS.get(str(protocol or "")) or {}).get("val_images")
    if asked and n_train and cfg.val_images != asked and cfg.val_images == fitted_val_images(asked, n_train):
        return dataclasses.replace(cfg, val_images=asked)
    return cfg


def kept_best_note(iteration: int, val_accuracy: float) -> str:
    """A run's note on the weights it keeps: those of the best validation accuracy (in percent,
    as every accuracy a page shows)."""
    return f"kept the weights of iteration {iteration:,} (validation accuracy {100 * val_accuracy:.1f} %)"


# the same note with the accuracy as a fraction ("validation accuracy 0.2100"), as run records
# written by an earlier format of the note hold it
_FRACTION_NOTE = re.compile(r"(kept the weights of iteration )(\d+)( \(validation accuracy )([01](?:\.\d+)?)\)")


def readable_message(message: str) -> str:
    """A run's message as a page shows it: a kept-weights note with the validation accuracy as a
    fraction reads as :func:`kept_best_note` writes it (in percent); anything else stays."""
    return _FRACTION_NOTE.sub(lambda m: kept_best_note(int(m.group(2)), float(m.group(4))), message or "")


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


def stop_applies(status: str, iteration: int, total: int | None) -> bool:
    """Whether a stop asked for now can still end a run early: a queued run, or a running one
    before its last iteration (the training loop polls for a stop before each iteration; once the
    last one is done, only the final evaluation and the save remain, and the run completes)."""
    if status == "queued":
        return True
    return status == "running" and not (total and iteration >= total)


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
