"""Optimiser choice, learning-rate schedules, the validation split and early stopping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.data.datasets import LoadedData
from core.errors import ConfigError
from core.models import registry
from core.training import cli, config, loop, weights
from core.training.config import PROTOCOLS, TrainConfig
from core.training.loop import make_optimizer, split_validation, train
from core.training.weights import load_weights

TINY = {"hidden_size": 8, "num_units": 3}


def rows_data(n: int, seed: int) -> LoadedData:
    """Class = which row is bright: learnable in a few dozen steps."""
    r = np.random.default_rng(seed)
    y = r.integers(0, 10, n).astype(np.int64)
    x = (r.random((n, 28, 28)) * 40).astype(np.uint8)
    x[np.arange(n), y * 2 + 4, :] = 255
    return LoadedData(x, y, [str(i) for i in range(10)], "synthetic", np.arange(n))


def write_rows_npz(data_dir, n_train: int, n_test: int) -> None:
    """``rows_data`` as a Fashion-MNIST npz folder (train seed 0, test seed 1) for the CLI."""
    d = data_dir / "fashion_mnist"
    d.mkdir(parents=True)
    for split, n, seed in (("train", n_train, 0), ("test", n_test, 1)):
        ld = rows_data(n, seed)
        np.savez(d / f"{split}.npz", x=ld.images, y=ld.labels, classes=np.array(ld.classes))


def cfg(**kw) -> TrainConfig:
    base = dict(dataset="fashion_mnist", model="parallel_lstm", iterations=6, batch_size=10, eval_every=2,
                eval_samples=20, noise_draws=0, threads=1, model_overrides=dict(TINY))
    base.update(kw)
    return TrainConfig(**base)


def test_optimizer_choice_builds_torch_optimizers():
    params = [torch.nn.Parameter(torch.zeros(3))]
    opt, sched = make_optimizer(cfg(optimizer="adam", lr=1e-3, weight_decay=0.01), params)
    assert isinstance(opt, torch.optim.Adam) and opt.defaults["weight_decay"] == 0.01 and sched is None
    opt, sched = make_optimizer(cfg(momentum=0.9), params)
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["momentum"] == 0.9


def test_cosine_and_step_schedules_follow_the_iterations():
    p = [torch.nn.Parameter(torch.zeros(1))]
    opt, sched = make_optimizer(cfg(lr=1.0, schedule="cosine", iterations=10), p)
    lrs = []
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[4] == pytest.approx(0.5 * (1 + np.cos(np.pi * 5 / 10))) and lrs[-1] == pytest.approx(0.0)
    opt, sched = make_optimizer(cfg(lr=1.0, schedule="step", step_every=3, step_gamma=0.5), p)
    lrs = []
    for _ in range(7):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == pytest.approx([1, 1, 0.5, 0.5, 0.5, 0.25, 0.25])


def test_adam_trains_and_is_recorded_in_the_metadata():
    tr, te = rows_data(200, 0), rows_data(40, 1)
    sgd = train(cfg(iterations=30, lr=0.1), tr, te)
    adam = train(cfg(iterations=30, optimizer="adam", lr=0.01, schedule="cosine"), tr, te)
    assert adam.history["loss"] != sgd.history["loss"]  # the choice reaches the loop
    assert np.mean(adam.history["loss"][-10:]) < np.mean(adam.history["loss"][:5])
    meta = weights.run_metadata(cfg(optimizer="adam", schedule="cosine"), adam, tr, te)
    assert meta["train_config"]["optimizer"] == "adam" and meta["train_config"]["schedule"] == "cosine"


def test_validation_split_is_fixed_disjoint_and_from_training_data():
    c = cfg(val_images=30)
    a_tr, a_va = split_validation(c, 200)
    b_tr, b_va = split_validation(c, 200)
    assert np.array_equal(a_va, b_va) and len(a_va) == 30 and len(a_tr) == 170
    assert not set(a_tr) & set(a_va) and set(a_tr) | set(a_va) == set(range(200))


def test_early_stopping_keeps_the_best_validation_weights():
    tr, te = rows_data(200, 0), rows_data(40, 1)
    # a learning rate that is far too high: validation gets worse, the run stops early
    r = train(cfg(iterations=200, optimizer="adam", lr=0.3, val_images=50, patience=2, eval_every=5), tr, te)
    assert r.status == "completed" and "early stop" in r.message and "kept the weights" in r.message
    assert r.metrics["iterations_done"] < 200
    evals = r.evals
    best = int(np.argmax(evals["val_acc"]))
    assert r.metrics["best_iteration"] == evals["iteration"][best]
    assert r.metrics["val_accuracy"] == pytest.approx(max(evals["val_acc"]))
    # the stopped run waited exactly `patience` evaluations after its best one... or reached the end
    assert len(evals["val_acc"]) - 1 - best == 2
    # and the model returned is the best one: its validation accuracy is the best recorded
    from core.eval.predict import evaluate
    _, va = split_validation(cfg(val_images=50), 200)
    assert evaluate(r.model, tr.images[va], tr.labels[va], 10).accuracy == pytest.approx(max(evals["val_acc"]))


@pytest.mark.parametrize("settings, words", [
    (dict(optimizer="rmsprop"), "Optimizer must be one of sgd, adam"),
    (dict(optimizer="adam", momentum=0.9), "Momentum applies to SGD only"),
    (dict(schedule="linear"), "schedule must be one of none, cosine, step"),
    (dict(weight_decay=-1.0), "Weight decay"),
    (dict(step_gamma=0.0), "factor must be in (0, 1]"),
    (dict(patience=3), "needs validation images"),
    (dict(val_images=-1), "Validation images"),
])
def test_bad_optimizer_settings_are_refused(settings, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        cfg(**settings).validate()


def test_validation_must_leave_training_images():
    with pytest.raises(ConfigError, match="must be fewer than the training images"):
        cfg(val_images=50).validate(n_train=50)


def test_protocols():
    c = TrainConfig.from_protocol("converged", dataset="mnist", model="rim")
    assert c.optimizer == "adam" and c.val_images > 0 and c.patience > 0 and c.validate()
    p = TrainConfig.from_protocol("paper")
    assert (p.optimizer, p.lr, p.batch_size, p.iterations) == ("sgd", 0.1, 100, 1000)
    assert set(PROTOCOLS) == {"paper", "converged", "converged-aug", "converged-12k", "converged-24k"}
    assert PROTOCOLS["converged-24k"] == {**PROTOCOLS["converged"], "iterations": 24000}
    # converged-12k is converged with three times the iterations, nothing else
    assert PROTOCOLS["converged-12k"] == {**PROTOCOLS["converged"], "iterations": 12000}
    # converged-aug is converged plus the scan augmentation, nothing else
    assert PROTOCOLS["converged-aug"] == {**PROTOCOLS["converged"], "augment": "scan"}
    with pytest.raises(ConfigError, match="Unknown protocol"):
        TrainConfig.from_protocol("fast")


def test_cli_protocol_and_explicit_options(tmp_path, capsys):
    # 200 training images: the typed 10 validation images are within the small-data rule's tenth
    # (core.training.lifecycle.fit_validation), so what is checked is the option against the protocol
    write_rows_npz(tmp_path / "data", 200, 20)
    out = tmp_path / "run"
    args = ["--dataset", "fashion_mnist", "--model", "parallel_lstm", "--protocol", "converged", "--iterations", "4",
            "--batch-size", "10", "--val-images", "10", "--eval-every", "2", "--eval-samples", "10",
            "--noise-draws", "0", "--threads", "1", "--quiet", "--data-dir", str(tmp_path / "data"),
            "--out", str(out), "--set", "hidden_size=8"]
    assert cli.main(args) == 0
    _, meta = load_weights(out)
    tc = meta["train_config"]
    assert tc["optimizer"] == "adam" and tc["schedule"] == "cosine" and tc["lr"] == PROTOCOLS["converged"]["lr"]
    assert tc["iterations"] == 4 and tc["val_images"] == 10  # typed options win over the protocol
    assert "val_acc" in meta["evals"] and meta["metrics"]["val_n"] == 10


# --------------------------------------------------------------------------- explicit options win

# a protocol that sets every CLI option away from TrainConfig's default (the old parser default),
# so each option given at that default is seen to win over it (the optimizer test: Adam, no momentum)
ODD = dict(optimizer="sgd", lr=0.05, momentum=0.5, weight_decay=0.01, schedule="step", step_every=7, step_gamma=0.5,
           iterations=77, batch_size=7, val_images=50, patience=3, eval_every=11, eval_samples=33,
           class_weighting="balanced", noise_var=0.05, noise_draws=2, device="cpu", state_every=9,
           state_every_s=5.0, augment="affine", grad_clip=2.5, threads=2)
OPTIONS = {"optimizer": "--optimizer", "lr": "--lr", "momentum": "--momentum", "weight_decay": "--weight-decay",
           "schedule": "--schedule", "step_every": "--step-every", "step_gamma": "--step-gamma",
           "iterations": "--iterations", "batch_size": "--batch-size", "val_images": "--val-images",
           "patience": "--patience", "eval_every": "--eval-every", "eval_samples": "--eval-samples",
           "class_weighting": "--class-weighting", "noise_var": "--noise-var", "noise_draws": "--noise-draws",
           "device": "--device", "state_every": "--state-every", "state_every_s": "--state-every-s",
           "augment": "--augment"}


def _cli_config(*argv):
    return config.config_from_args(config.build_parser().parse_args(list(argv)))


def test_every_protocol_setting_has_a_cli_option_under_test():
    assert set(OPTIONS) | {"grad_clip", "threads"} == set(config._CLI_FIELDS) == set(ODD)
    for settings in PROTOCOLS.values():  # whatever a real protocol sets can be given on the command line
        assert set(settings) <= set(config._CLI_FIELDS)


@pytest.mark.parametrize("field", sorted(OPTIONS))
def test_an_option_given_at_its_old_default_wins_over_the_protocol(field, monkeypatch):
    """Every option given on the command line wins over the protocol, even at the parser's default:
    ``--protocol converged --lr 0.1`` trains with lr 0.1, not the protocol's."""
    odd = {**ODD, "optimizer": "adam", "momentum": 0.0} if field == "optimizer" else ODD
    monkeypatch.setitem(PROTOCOLS, "odd", odd)
    default = getattr(TrainConfig(), field)
    assert default != odd[field]
    assert getattr(_cli_config("--protocol", "odd"), field) == odd[field]  # not given: the protocol's
    off = ["--patience", "0"] if field == "val_images" else []  # no validation split: no early stopping
    assert getattr(_cli_config("--protocol", "odd", OPTIONS[field], str(default), *off), field) == default
    needs = ["--val-images", "50"] if field == "patience" else []  # early stopping needs a validation split
    assert getattr(_cli_config(OPTIONS[field], str(odd[field]), *needs), field) == odd[field]  # no protocol


@pytest.mark.parametrize("field,flag,value", [("grad_clip", "--grad-clip", 1.0), ("threads", "--threads", 1)])
def test_options_without_a_default_win_over_the_protocol(field, flag, value, monkeypatch):
    monkeypatch.setitem(PROTOCOLS, "odd", ODD)
    assert getattr(_cli_config("--protocol", "odd", flag, str(value)), field) == value
    assert getattr(_cli_config("--protocol", "odd"), field) == ODD[field]


def test_converged_with_the_papers_sgd_settings_trains_with_them():
    c = _cli_config("--protocol", "converged", "--lr", "0.1", "--optimizer", "sgd", "--schedule", "none",
                    "--batch-size", "100", "--iterations", "1000")
    assert (c.lr, c.optimizer, c.schedule, c.batch_size, c.iterations) == (0.1, "sgd", "none", 100, 1000)
    assert c.val_images == PROTOCOLS["converged"]["val_images"]  # what was not given stays the protocol's
    assert _cli_config("--protocol", "converged").lr == PROTOCOLS["converged"]["lr"]


def test_configs_and_statuses_stored_under_the_old_names_still_load():
    """Records, training states and status files written before "checkpoint" became "state" load."""
    from types import SimpleNamespace

    from core.runs.schema import RunStatus
    from core.training.state import config_mismatch

    old = {**TrainConfig().to_dict(), "checkpoint_every": 7, "checkpoint_every_s": 9.0}
    del old["state_every"], old["state_every_s"]
    c = TrainConfig.from_dict(old)
    assert (c.state_every, c.state_every_s) == (7, 9.0)
    assert config_mismatch(SimpleNamespace(train_config=old), TrainConfig(lr=0.1).to_dict()) == []
    assert config_mismatch(SimpleNamespace(train_config=old), TrainConfig(lr=0.2).to_dict()) == ["lr"]
    st = RunStatus.from_dict({"status": "running", "checkpoint": {"iteration": 4, "ok": True}})
    assert st.state == {"iteration": 4, "ok": True}


def test_old_option_spellings_still_parse():
    with pytest.warns(FutureWarning, match="--checkpoint-every is deprecated; use --state-every"):
        c = _cli_config("--checkpoint-every", "3", "--checkpoint-every-s", "1.5")
    assert (c.state_every, c.state_every_s) == (3, 1.5)
    with pytest.warns(FutureWarning, match="--keep-checkpoints is deprecated; use --keep-states"):
        assert config.build_parser().parse_args(["--keep-checkpoints"]).keep_states


# --------------------------------------------------------------------------- augmentation

_BUILD_MODEL = registry.build_model

def recorded_inputs(monkeypatch) -> list:
    """Every input the built model sees, with whether it was in training mode (a forward pre-hook)."""
    seen = []
    real = _BUILD_MODEL

    def build(*a, **kw):
        m = real(*a, **kw)
        m.register_forward_pre_hook(lambda mod, args: seen.append((mod.training, args[0].detach().clone())))
        return m

    monkeypatch.setattr(loop, "build_model", build)
    return seen


def test_augment_setting_is_validated_cli_reachable_and_recorded(tmp_path):
    with pytest.raises(ConfigError, match="Augmentation must be one of none, affine, scan, got 'flip'"):
        cfg(augment="flip").validate()
    assert TrainConfig().augment == "none" and TrainConfig.from_protocol("converged", augment="affine").augment == "affine"
    args = config.build_parser().parse_args(["--protocol", "converged", "--augment", "affine"])
    c = config.config_from_args(args)
    assert c.augment == "affine" and c.optimizer == "adam" and c.schedule == "cosine"
    assert config.config_from_args(config.build_parser().parse_args(["--protocol", "converged"])).augment == "none"
    with pytest.raises(SystemExit):
        config.build_parser().parse_args(["--augment", "flip"])
    write_rows_npz(tmp_path / "data", 40, 20)
    out = tmp_path / "run"
    assert cli.main(["--dataset", "fashion_mnist", "--model", "parallel_lstm", "--iterations", "3", "--batch-size", "10",
                   "--eval-every", "3", "--eval-samples", "10", "--noise-draws", "0", "--threads", "1", "--quiet",
                   "--augment", "affine", "--data-dir", str(tmp_path / "data"), "--out", str(out),
                   "--set", "hidden_size=8"]) == 0
    _, meta = load_weights(out)
    assert meta["train_config"]["augment"] == "affine"


def test_augment_affine_is_torchvision_affine_per_image_within_the_ranges():
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as TF

    from core.data.transforms import AFFINE_RANGES, affine_augment, draw_affine_params

    p = draw_affine_params(2000, torch.Generator().manual_seed(0))
    for j, k in enumerate(("angle", "translate", "translate", "scale", "shear")):
        lo, hi = AFFINE_RANGES[k]
        assert lo <= p[:, j].min() < lo + 0.05 * (hi - lo) and hi - 0.05 * (hi - lo) < p[:, j].max() <= hi
    assert torch.equal(p, draw_affine_params(2000, torch.Generator().manual_seed(0)))
    for shape in ((6, 28, 28), (3, 20, 32, 3)):  # grey and colour, square and not
        x = rows_data(6, 0).images[: shape[0]] if len(shape) == 3 else \
            np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
        params = draw_affine_params(shape[0], torch.Generator().manual_seed(1))
        out = affine_augment(x, params)
        assert out.shape == shape and out.dtype == torch.float32 and 0 <= out.min() and out.max() <= 1
        chw = torch.from_numpy(x).float().div(255)
        chw = chw.unsqueeze(1) if len(shape) == 3 else chw.permute(0, 3, 1, 2)
        for i, (angle, tx, ty, scale, shear) in enumerate(params.tolist()):
            ref = TF.affine(chw[i], angle=angle, translate=[tx, ty], scale=scale, shear=[shear, 0.0],
                            interpolation=InterpolationMode.BILINEAR)
            got = out[i].unsqueeze(0) if len(shape) == 3 else out[i].permute(2, 0, 1)
            assert torch.allclose(got, ref, atol=1e-5)
            assert not torch.allclose(got, chw[i], atol=1e-3)  # each image really moved


def test_augment_none_is_the_unaugmented_run(monkeypatch):
    """augment="none" (the default) never touches the augmentation code and trains on the images as
    they are: the same run as a config without the setting, and its training states carry no extra state."""
    tr, te = rows_data(60, 0), rows_data(20, 1)
    ref = train(cfg(val_images=10), tr, te)

    def boom(*a, **kw):
        raise AssertionError("augmentation used by augment='none'")

    monkeypatch.setattr(loop, "affine_augment", boom)
    monkeypatch.setattr(loop, "draw_affine_params", boom)
    seen = recorded_inputs(monkeypatch)
    res = train(cfg(val_images=10, augment="none"), tr, te)
    sa, sb = ref.model.state_dict(), res.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa) and ref.history == res.history and ref.evals == res.evals
    from core.data.transforms import to_sequence

    tr_idx, _ = split_validation(cfg(val_images=10), 60)
    rows = {r.numpy().tobytes() for r in to_sequence(tr.images[tr_idx])}
    batches = [x for training, x in seen if training]
    assert len(batches) == 6 and all(r.numpy().tobytes() in rows for b in batches for r in b)


def test_augment_affine_changes_the_training_batches_only(monkeypatch):
    from core.data.transforms import to_sequence

    tr, te = rows_data(60, 0), rows_data(20, 1)
    seen_none = recorded_inputs(monkeypatch)
    plain = train(cfg(val_images=10, noise_draws=1), tr, te)
    seen_aug = recorded_inputs(monkeypatch)
    aug = train(cfg(val_images=10, noise_draws=1, augment="affine"), tr, te)
    train_none = [x for training, x in seen_none if training]
    train_aug = [x for training, x in seen_aug if training]
    assert len(train_aug) == len(train_none) == 6
    rows = {r.numpy().tobytes() for r in to_sequence(tr.images)}
    for a, b in zip(train_aug, train_none):
        assert a.shape == b.shape and 0 <= a.min() and a.max() <= 1
        assert not any(r.numpy().tobytes() in rows for r in a)  # no training image is shown as it is
        assert (a - b).abs().mean() > 0.01
    # validation, periodic test subset, final and noisy test: the very same inputs, untouched
    eval_none = [x for training, x in seen_none if not training]
    eval_aug = [x for training, x in seen_aug if not training]
    assert len(eval_aug) == len(eval_none) > 0 and all(torch.equal(a, b) for a, b in zip(eval_aug, eval_none))
    assert any(torch.equal(x, to_sequence(te.images)) for x in eval_aug)  # the full test set as it is
    _, va_idx = split_validation(cfg(val_images=10), 60)
    assert any(torch.equal(x, to_sequence(tr.images[va_idx])) for x in eval_aug)
    pa, pb = plain.model.state_dict(), aug.model.state_dict()
    assert not all(torch.equal(pa[k], pb[k]) for k in pa)


def test_augment_scan_draws_from_the_generator_and_varies_what_scans_vary():
    from core.data.transforms import SCAN_CHANCES, draw_scan_params, scan_augment

    x = rows_data(64, 0).images[:64]
    p = draw_scan_params(64, torch.Generator().manual_seed(3))
    q = draw_scan_params(64, torch.Generator().manual_seed(3))
    assert all(torch.equal(p[k], q[k]) for k in p)  # the generator alone decides
    out = scan_augment(x, p)
    assert out.shape == x.shape and out.dtype == torch.float32 and 0 <= out.min() and out.max() <= 1
    assert torch.equal(out, scan_augment(x, q))
    base = torch.from_numpy(x).float() / 255
    assert all(not torch.allclose(out[i], base[i], atol=1e-3) for i in range(64))  # every image moved
    coins = p["coins"]
    binarised = coins[:, 3] < SCAN_CHANCES["binarise"]
    assert binarised.any() and not binarised.all()
    assert all(set(out[i].unique().tolist()) <= {0.0, 1.0} for i in np.flatnonzero(binarised.numpy()))
    # thickening (a grey dilation): more ink than the same image without it
    thick = (coins[:, 1] < SCAN_CHANCES["thicken"]) & ~binarised
    plain = {**p, "coins": torch.where(torch.arange(5) == 1, torch.ones_like(coins), coins)}
    plain["coins"][:, 2] = 1.0  # neither thicken nor thin
    unthick = scan_augment(x, plain)
    assert thick.any() and all(out[i].sum() > unthick[i].sum() for i in np.flatnonzero(thick.numpy()))
    # a different generator state, a different batch
    assert not torch.equal(out, scan_augment(x, draw_scan_params(64, torch.Generator().manual_seed(4))))
    with pytest.raises(ValueError, match="grey images"):
        scan_augment(np.zeros((2, 8, 8, 3), np.uint8), draw_scan_params(2, torch.Generator().manual_seed(0)))


def test_protocol_converged_aug_trains_with_the_scan_augmentation(monkeypatch):
    args = config.build_parser().parse_args(["--protocol", "converged-aug"])
    c = config.config_from_args(args)
    assert c.augment == "scan" and c.optimizer == "adam" and c.iterations == PROTOCOLS["converged"]["iterations"]
    tr, te = rows_data(60, 0), rows_data(20, 1)
    seen = recorded_inputs(monkeypatch)
    train(cfg(val_images=10, augment="scan"), tr, te)
    from core.data.transforms import to_sequence

    rows = {r.numpy().tobytes() for r in to_sequence(tr.images)}
    batches = [x for training, x in seen if training]
    assert len(batches) == 6 and not any(r.numpy().tobytes() in rows for b in batches for r in b)


def test_the_protocol_help_says_what_each_protocol_is():
    """``--protocol``'s help names each protocol's optimiser, schedule and budget: the key
    "converged" reads as the 4,000-iteration short budget it is."""
    text = config.protocol_help()
    for name, p in PROTOCOLS.items():
        assert f"{name}: " in text and f"{p['iterations']:,} iterations" in text
    assert "converged: Adam 0.002, cosine, 4,000 iterations;" in text
    shown = " ".join(config.build_parser().format_help().split())  # argparse wraps the help
    assert "converged: Adam 0.002, cosine, 4,000 iterations;" in shown
