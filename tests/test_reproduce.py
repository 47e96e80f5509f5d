"""The reproduction tables are computed correctly: fabricated runs with known numbers, and
a real (tiny) grid trained end to end."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from core.grid import cells, export, local
from core.report import paper, tables
from core.report import stats as stats_mod


def fake_run(root, dataset, model, seed, err, noisy, status="completed"):
    p = cells.run_path(root, dataset, model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"dataset": dataset, "model": model, "seed": seed, "status": status,
                             "train_config": {"iterations": 1000},
                             "metrics": {"test_error": err, "noisy_test_error": noisy, "noise_draws": 10}}))


ERRS = {  # clean error, noisy error per seed
    "rim": ([0.10, 0.12, 0.11], [0.13, 0.15, 0.14]),
    "parallel_lstm": ([0.15, 0.16, 0.17], [0.20, 0.22, 0.21]),
    "entnet": ([0.30, 0.31, 0.35], [0.40, 0.41, 0.45]),
    "rmc": ([0.11, 0.13, 0.12], [0.15, 0.18, 0.17]),
    "indrnn": ([0.50, 0.60, 0.55], [0.50, 0.60, 0.55]),
}


@pytest.fixture
def grid(tmp_path):
    for model, (clean, noisy) in ERRS.items():
        for seed, (c, n) in enumerate(zip(clean, noisy)):
            fake_run(tmp_path, "mnist", model, seed, c, n)
    fake_run(tmp_path, "mnist", "indrnn", 3, None, None, status="diverged")
    return tmp_path


def welch(a, b):
    r = stats.ttest_ind(a, b, equal_var=False)
    ci = r.confidence_interval(0.95)
    return np.mean(a) - np.mean(b), ci.low, ci.high


def test_table2_gap_and_interval(grid):
    t = tables.write_tables(grid)
    row = t["table2"][0]
    rim = np.array(ERRS["rim"][0]) * 100
    pl = np.array(ERRS["parallel_lstm"][0]) * 100
    assert row["rim_error"] == pytest.approx(rim.mean())
    assert row["rim_sd"] == pytest.approx(rim.std(ddof=1))
    d, lo, hi = welch(pl, rim)
    assert (row["gap"], row["gap_raw_ci_low"], row["gap_raw_ci_high"]) == pytest.approx((d, lo, hi))
    assert row["verdict"] == "holds"
    assert row["paper_gap"] == 0.35


def test_table3_runner_up_and_diverged_count(grid):
    row = tables.write_tables(grid)["table3"][0]
    assert row["runner_up"] == "rmc"
    d, lo, hi = welch(np.array(ERRS["rmc"][0]) * 100, np.array(ERRS["rim"][0]) * 100)
    assert row["gap"] == pytest.approx(d) and row["gap_raw_ci_low"] == pytest.approx(lo)
    assert lo < 0 < hi and row["gap_verdict"].startswith("cannot tell")
    # RIM is measurably better than EntNet and IndRNN, not than RMC: on this set it cannot be told
    assert row["gap_entnet_verdict"] == row["gap_indrnn_verdict"] == "holds"
    assert row["verdict"].startswith("cannot tell") and "cannot tell on: RMC" in row["verdict_detail"]
    assert (row["indrnn_healthy"], row["indrnn_runs"]) == (3, 4)  # the diverged run counts, unhealthy
    assert row["rim_lowest"] is True


def test_table4_noise_growth(grid):
    row = tables.write_tables(grid)["table4"][0]
    assert row["runner_up"] == "rmc"  # fixed in advance: the paper's named runner-up
    g_rim = (np.array(ERRS["rim"][1]) - ERRS["rim"][0]) * 100
    g_rmc = (np.array(ERRS["rmc"][1]) - ERRS["rmc"][0]) * 100
    assert row["rim_change"] == pytest.approx(g_rim.mean())
    d, lo, hi = welch(g_rmc, g_rim)
    assert (row["growth_gap"], row["growth_gap_raw_ci_low"], row["growth_gap_raw_ci_high"]) == pytest.approx((d, lo, hi))


def test_outputs_written(grid):
    tables.write_tables(grid)
    md = (grid / "tables.md").read_text()
    assert "Table 2" in md and "Table 3" in md and "Table 4" in md
    summary = json.loads((grid / "summary.json").read_text())
    assert len(summary["runs"]) == 16
    for name in ("table2", "table3", "table4", "runs"):
        assert (grid / f"{name}.csv").read_text().count("\n") >= 2


def test_verdicts():
    # (gap, family-adjusted p): the sign says which way, the adjusted p whether it can be told
    assert stats_mod.verdict(0.3, 0.01) == "holds"
    assert stats_mod.verdict(-0.3, 0.01).startswith("does not hold")
    assert stats_mod.verdict(0.3, 0.2).startswith("cannot tell at this number")
    assert stats_mod.verdict(0.3, 0.05).startswith("cannot tell")  # p must be below 0.05
    assert stats_mod.verdict(0.3, math.nan) == "cannot tell (fewer than 2 seeds)"


@pytest.mark.slow  # a minute or more end to end: make test-slow (CI runs it)
def test_tiny_grid_end_to_end(tmp_path, monkeypatch):
    """Train a real 2 x 2 x 2 grid on tiny data, resume it, and build its tables."""
    data = tmp_path / "data" / "fashion_mnist"  # (MNIST would hold out images 0..9,999)
    data.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 200), ("test", 60)):
        y = rng.integers(0, 10, n)
        x = np.zeros((n, 28, 28), np.uint8)
        x[np.arange(n), y * 2 + 3, :] = 255  # class = which row is bright
        np.savez(data / f"{split}.npz", x=x, y=y.astype(np.int64), classes=np.array([str(i) for i in range(10)]))
    monkeypatch.setenv("RIMSCOPE_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "out"
    log = []
    done = local.run_grid(out, ["fashion_mnist"], ["parallel_lstm", "indrnn"], [0, 1], iterations=5, workers=1,
                              noise_draws=1, eval_every=5, log=log.append,
                              overrides=cells.parse_model_overrides(["parallel_lstm.hidden_size=7"]))
    print("\n".join(log))
    assert len(done) == 4 and all(r["status"] == "completed" for r in done)
    # the override reached the parallel LSTMs (and only them), and the run JSON records it
    pl_meta = json.loads(cells.run_path(out, "fashion_mnist", "parallel_lstm", 0).read_text())
    in_meta = json.loads(cells.run_path(out, "fashion_mnist", "indrnn", 0).read_text())
    assert pl_meta["config"]["hidden_size"] == 7 and in_meta["config"].get("hidden_size") != 7
    again = local.run_grid(out, ["fashion_mnist"], ["parallel_lstm", "indrnn"], [0, 1], iterations=5, workers=1,
                               noise_draws=1, eval_every=5, log=lambda s: None)
    assert again == []  # resumable: nothing retrained
    rows = tables.load_results(out)
    assert len(rows) == 4 and {r["model"] for r in rows} == {"parallel_lstm", "indrnn"}
    manifest = export.export_pretrained(out, 0, tmp_path / "pre")
    # runs of 5 iterations are near chance: only the healthy ones ship, the others are listed as skipped
    healthy = {(r["dataset"], r["model"]) for r in rows if r["seed"] == 0 and r["health"] == "healthy"}
    assert {(m["dataset"], m["model"]) for m in manifest["models"]} == healthy
    assert len(manifest["models"]) + len(manifest["skipped"]) == 2


def test_loss_fluctuation_measures_jitter_around_the_trend():
    rng = np.random.default_rng(0)
    it = np.arange(1000)
    trend = 2.0 * np.exp(-it / 300) + 0.3
    smooth_sd, smooth_rel = tables.loss_fluctuation(trend.tolist())
    assert smooth_sd < 1e-3  # a smooth curve barely deviates from its moving average
    noisy = trend + rng.normal(0, 0.1, size=1000)
    sd, rel = tables.loss_fluctuation(noisy.tolist())
    assert sd == pytest.approx(0.1, rel=0.1)  # the moving average removes the trend, not the noise
    level = trend[500:].mean()
    assert rel == pytest.approx(sd / level, rel=0.05)
    twice, _ = tables.loss_fluctuation((trend + 2 * (noisy - trend)).tolist())
    assert twice == pytest.approx(2 * sd, rel=1e-3)  # linear in the noise (the trend leaves ~1e-5)
    # too short, or a diverged run's NaN/None: no number
    assert all(math.isnan(v) for v in tables.loss_fluctuation([1.0] * 60))
    assert all(math.isnan(v) for v in tables.loss_fluctuation(noisy.tolist()[:-1] + [None]))


def test_fluctuation_table(tmp_path):
    rng = np.random.default_rng(1)
    base = 2.0 * np.exp(-np.arange(1000) / 300) + 0.3
    for seed in range(3):
        for model, noise in (("rim", 0.05), ("parallel_lstm", 0.2)):
            fake_run(tmp_path, "mnist", model, seed, 0.1, 0.2)
            p = cells.run_path(tmp_path, "mnist", model, seed)
            meta = json.loads(p.read_text())
            meta["history"] = {"loss": (base + rng.normal(0, noise, 1000)).tolist()}
            p.write_text(json.dumps(meta))
    t = tables.write_tables(tmp_path)
    row = t["fluctuation"][0]
    assert row["rim_abs"] == pytest.approx(0.05, rel=0.15) and row["parallel_lstm_abs"] == pytest.approx(0.2, rel=0.15)
    rows = tables.load_results(tmp_path)
    pl = [r["loss_fluct"] for r in rows if r["model"] == "parallel_lstm"]
    rim = [r["loss_fluct"] for r in rows if r["model"] == "rim"]
    assert (row["gap_abs"], row["gap_abs_raw_ci_low"], row["gap_abs_raw_ci_high"]) == pytest.approx(welch(pl, rim))
    assert row["gap_abs_verdict"] == "holds" and row["gap_rel_verdict"] == "holds" and row["seeds"] == 3
    assert row["holm_m"] == 2 and row["gap_abs_p_holm"] >= row["gap_abs_p"]  # abs and rel: one family
    assert "Training-loss fluctuation" in (tmp_path / "tables.md").read_text()
    assert (tmp_path / "fluctuation.csv").is_file()


def test_parse_model_overrides():
    from core.errors import ConfigError

    assert cells.parse_model_overrides(["parallel_lstm.hidden_size=81", "rim.k_active=3",
                                            "parallel_lstm.num_units=6"]) == {
        "parallel_lstm": {"hidden_size": 81, "num_units": 6}, "rim": {"k_active": 3}}
    assert cells.parse_model_overrides([]) == {}
    for bad in ("hidden_size=81", "nosuch.hidden_size=3", "parallel_lstm.hidden_size", "parallel_lstm.hiden=3",
                "parallel_lstm.hidden_size=0", "rim.k_active=9"):
        with pytest.raises(ConfigError):
            cells.parse_model_overrides([bad])


def test_ablation_and_init_tables(tmp_path):
    """Variant runs become the ablation and initialisation tables, with Welch intervals."""
    errs = {"rim": [0.10, 0.12, 0.11], "rim_random": [0.20, 0.22, 0.21], "rim_alpha0": [0.11, 0.10, 0.12],
            "parallel_lstm": [0.07, 0.08, 0.075], "rim_fb0": [0.60, 0.61, 0.64], "parallel_lstm_fb0": [0.50, 0.45, 0.55]}
    for model, vals in errs.items():
        for seed, e in enumerate(vals):
            fake_run(tmp_path, "mnist", model, seed, e, e + 0.05)
    t = tables.write_tables(tmp_path)
    abl = {r["variant"]: r for r in t["ablations"]}
    assert set(abl) == {"rim", "rim_random", "rim_alpha0", "parallel_lstm"}
    d, lo, hi = welch(np.array(errs["rim_random"]) * 100, np.array(errs["rim"]) * 100)
    assert abl["rim_random"]["gap"] == pytest.approx(d) and abl["rim_random"]["gap_raw_ci_low"] == pytest.approx(lo)
    assert abl["rim_random"]["verdict"] == "removing it hurts (the part helps)"
    assert abl["rim_alpha0"]["verdict"] == "no measurable effect at this number of seeds"
    init = {r["forget_bias"]: r for r in t["init_study"]}
    assert init[1.0]["verdict"].startswith("does not hold")  # parallel LSTMs better at forget bias 1
    assert init[0.0]["gap"] < 0 and init[0.0]["verdict"].startswith("does not hold")
    d, lo, _ = welch(np.array(errs["rim_fb0"]) * 100, np.array(errs["rim"]) * 100)
    assert init[0.0]["rim_fb_effect"] == pytest.approx(d) and init[0.0]["rim_fb_effect_raw_ci_low"] == pytest.approx(lo)
    md = (tmp_path / "tables.md").read_text()
    assert "### Ablations of the method" in md and "### Initialisation study" in md
    # variants are never exported as pretrained models (only the registry's rim here)
    for name in ("rim", "rim_random"):
        meta_path = cells.run_path(tmp_path, "mnist", name, 0)
        meta = json.loads(meta_path.read_text())
        if name != "rim":
            meta.update(model="rim", variant=name)
        meta.update(data_source={"train": "test data"}, health="healthy")  # the tiny run itself is near chance
        meta_path.write_text(json.dumps(meta))
        meta_path.with_suffix(".safetensors").write_bytes(b"")
    exported = export.export_pretrained(tmp_path, 0, tmp_path / "pre")["models"]
    assert [(m["model"], m["dataset"]) for m in exported] == [("rim", "mnist")]


def test_variant_names_resolve_and_are_validated():
    assert paper.resolve("rim_random") == ("rim", {"selection": "random"})
    assert paper.resolve("indrnn") == ("indrnn", {})
    with pytest.raises(KeyError, match="Unknown model or variant"):
        paper.resolve("rim_best")
    assert cells.parse_model_overrides(["rim_k5.alpha=0.2"]) == {"rim_k5": {"alpha": 0.2}}
    from core.models.registry import build_model

    for model, kw in paper.VARIANTS.values():  # every variant builds
        build_model(model, **kw)


def _crafted_run(root, ds, model, seed, err, loss=(2.3, 1.0, 0.5), confusion=None, weights=True):
    conf = confusion or [[9 if i == j else 0 for j in range(10)] for i in range(10)]
    meta = {"dataset": ds, "model": model, "seed": seed, "status": "completed", "protocol": "paper",
            "history": {"iteration": list(range(1, len(loss) + 1)), "loss": list(loss)},
            "metrics": {"test_error": err, "test_accuracy": 1 - err, "confusion": conf},
            "train_config": {"iterations": len(loss)}, "data_source": {"train": "npz folder (x)"}}
    p = cells.run_path(root, ds, model, seed)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(meta))
    if weights:
        p.with_suffix(".safetensors").write_bytes(f"w{seed}".encode())
    return p


def test_export_ships_the_healthy_median_never_an_unhealthy_run(tmp_path):
    out, dest = tmp_path / "grid", tmp_path / "pre"
    for seed, err in enumerate([0.30, 0.10, 0.20, 0.50]):
        _crafted_run(out, "mnist", "rim", seed, err)
    _crafted_run(out, "mnist", "rim", 4, 0.15, loss=(2.3, 40.0, 0.4))  # diverged: never the median
    one_class = [[0] * 9 + [10] for _ in range(10)]
    _crafted_run(out, "mnist", "indrnn", 0, 0.9, confusion=one_class)  # collapsed: the only run
    m = export.export_pretrained(out, "median", dest)
    (rim,) = m["models"]
    # healthy errors 0.10, 0.20, 0.30, 0.50: the lower middle one is seed 2 (0.20)
    assert rim["seed"] == 2 and rim["health"] == "healthy" and rim["cell_healthy"] == "4 of 5"
    assert (dest / "mnist" / "rim.safetensors").read_bytes() == b"w2"
    assert [s["model"] for s in m["skipped"]] == ["indrnn"] and not (dest / "mnist" / "indrnn.json").exists()


def test_export_falls_back_to_seed_zero_and_says_so_when_the_median_was_not_kept(tmp_path):
    out, dest = tmp_path / "grid", tmp_path / "pre"
    _crafted_run(out, "mnist", "rim", 0, 0.30)
    for seed, err in [(1, 0.10), (2, 0.20)]:
        _crafted_run(out, "mnist", "rim", seed, err, weights=False)
    (rim,) = export.export_pretrained(out, "median", dest)["models"]
    assert rim["seed"] == 0 and "NOT the cell's median (seed 2" in rim["selection"]
    retrained = tmp_path / "retrained"
    _crafted_run(retrained, "mnist", "rim", 2, 0.21, loss=(2.3, 40.0, 0.4))  # the copy diverged: not shipped
    (rim,) = export.export_pretrained(out, "median", dest, extra_weights=[retrained])["models"]
    assert rim["seed"] == 0 and "NOT the cell's median (seed 2" in rim["selection"]
    _crafted_run(retrained, "mnist", "rim", 2, 0.21)
    (rim,) = export.export_pretrained(out, "median", dest, extra_weights=[retrained])["models"]
    assert rim["seed"] == 2 and "retrained" in rim["selection"] and rim["test_error"] == 0.21


def test_export_of_the_long_grid_ships_each_sets_median_under_one_protocol(tmp_path):
    """``protocol="long"``: every plain run of the folder counts whatever its own protocol (one per
    data set); each entry keeps its run's protocol, and a median already shipped under that
    protocol (Animals-10's long-grid runs are the 4,000-iteration grid's) is listed, not copied."""
    out, dest = tmp_path / "long", tmp_path / "pre"
    for seed, err in [(0, 0.30), (1, 0.10), (2, 0.20)]:
        p = _crafted_run(out, "mnist", "rim", seed, err)
        p.write_text(json.dumps({**json.loads(p.read_text()), "protocol": "converged-12k"}))
        p = _crafted_run(out, "animals10", "rim", seed, err, weights=False)
        p.write_text(json.dumps({**json.loads(p.read_text()), "protocol": "converged"}))
        if seed == 2:  # the Animals-10 median, shipped under its own protocol
            shipped = dest / "converged" / "animals10" / "rim"
            shipped.parent.mkdir(parents=True)
            shipped.with_suffix(".json").write_text(p.read_text())
            shipped.with_suffix(".safetensors").write_bytes(b"a2")
    m = export.export_pretrained(out, "median", dest, protocol="long")
    by = {e["dataset"]: e for e in m["models"]}
    assert {e["protocol"] for e in m["models"]} == {"long"} and not m["skipped"]
    assert (by["mnist"]["seed"], by["mnist"]["run_protocol"]) == (2, "converged-12k")
    assert (dest / "long" / "mnist" / "rim.safetensors").read_bytes() == b"w2"
    assert (by["animals10"]["seed"], by["animals10"]["run_protocol"]) == (2, "converged")
    assert by["animals10"]["weights"] == "converged/animals10/rim.safetensors"
    assert not (dest / "long" / "animals10").exists()
    assert m["protocols"]["long"].startswith("Long grid")
    from core.catalog import pretrained_entries

    names = {e.dataset: e.display for e in pretrained_entries(pretrained_dir=dest)}
    assert "long grid" in names["mnist"] and "seed 2" in names["animals10"]
