"""The interventions in words and tables (core.report.interventions): one significance rule
(Holm over the table), no sentence the table does not decide, small p values in scientific
notation, the generated REPRODUCTION block from the CSV."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from core.eval import interventions as ivs
from core.eval.interventions import InterventionTable, Variant
from core.report import intervene as text
from core.report import interventions as words
from core.report import interventions_block as summary
from core.report.stats import holm


def _table(flips: dict[str, tuple[int, int]], N: int = 400) -> InterventionTable:
    """A hand-made table: the intact model right on the first half; each variant loses and gains
    the given numbers of images (clean and noisy alike)."""
    labels = np.arange(N) % 10
    intact = np.arange(N) < N // 2
    table = InterventionTable(labels, [str(c) for c in range(10)], [f"LSTM {i + 1}" for i in range(6)], 0.01,
                              alpha=0.1, k_active=4)
    table.variants.append(Variant("intact", "intact", intact, intact.copy()))
    for key, (lost, gained) in flips.items():
        v = intact.copy()
        v[:lost] = False
        v[N // 2 : N // 2 + gained] = True
        mode, unit = key.split(":")
        kind = "knockout" if mode in ivs.KNOCKOUTS else "selection"
        table.variants.append(Variant(key, kind, v, v.copy(), mode, int(unit) if kind == "knockout" else None,
                                      seed=0 if mode == "random" else None))
    return table


def test_captions_follow_holm_over_the_table_and_never_say_needed():
    # removed:0 alone would pass an unadjusted 0.05 test (8 lost, 1 gained: p 0.039) but not Holm over 12 tests
    flips = {"removed:0": (8, 1), **{f"removed:{i}": (60, 2) for i in range(1, 6)}}
    table = _table(flips)
    p_raw = table.p_value("removed:0")
    holm_p = words.adjusted(table)
    assert p_raw < 0.05 <= holm_p[("removed:0", "clean")]
    assert holm_p[("removed:0", "clean")] == pytest.approx(
        holm([table.p_value(k, c) for k in flips for c in ("clean", "noisy")])[0])
    text = words.caption(table)
    assert "5 of 6 differ from no change" in text and "Holm-adjusted over the table's 12 tests" in text
    for banned in ("needed", "necessary", "Every LSTM", "No single LSTM"):
        assert banned not in text
    assert "property of these weights" in text


def test_direct_and_indirect_effects_side_by_side():
    flips = {**{f"removed:{i}": (30, 0) for i in range(6)}, **{f"readout:{i}": (2, 0) for i in range(6)}}
    text = words.caption(_table(flips))
    assert "direct effect" in text and "read-out only" in words.variant_label(_table(flips), "readout:0")


def test_p_values_in_scientific_notation_and_the_csv_keeps_them(tmp_path):
    assert words.p_text(2.1e-57) == "2.10e-57" and words.p_text(0.0) == "<1e-300"
    assert words.p_text(0.0123) == "0.0123" and words.p_text(1.0) == "1"
    table = _table({"removed:0": (150, 0), "off:0": (3, 2)})
    path = tmp_path / "k.csv"
    words.write_csv(path, {("mnist", "m", 0): table})
    rows = list(csv.DictReader(path.open()))
    p = next(r["p_paired"] for r in rows if r["variant"] == "removed:0" and r["class"] == "all")
    assert "e-" in p and float(p) == pytest.approx(table.p_value("removed:0"), rel=1e-5)
    assert not any(r["p_paired"] == "0.000000" for r in rows)


def test_alpha_zero_beside_the_retrained_control(tmp_path):
    (tmp_path / "converged").mkdir()
    (tmp_path / "converged" / "controls.csv").write_text(
        "dataset,control,error,seeds,gap,gap_verdict\nmnist,rim,1.55,5,,\n"
        "mnist,rim_alpha0,1.76,5,0.21,no measurable difference at this number of seeds\n")
    control = words.no_communication_control(tmp_path, "mnist")
    assert control == {"error": 1.76, "rim_error": 1.55, "gap": 0.21, "seeds": 5,
                       "verdict": "no measurable difference at this number of seeds", "protocol": ""}
    text = words.caption(_table({"removed:0": (5, 0), "alpha0:0": (80, 0)}), control=control)
    assert "1.76%" in text and "+0.21 points" in text and "not what communication adds" in text
    assert words.no_communication_control(tmp_path, "cifar10") is None


def test_help_counts_the_runs_it_makes():
    from core.models.registry import build_model

    m = build_model("rim")
    n = len(ivs.variants_of(m))
    assert text.runs_text(n).startswith(f"{2 * n} runs")


def test_reproduction_block_from_the_csv(tmp_path):
    table = _table({**{f"{m}:{i}": (40 + i, 1) for m in ivs.KNOCKOUTS for i in range(6)},
                    "random:0": (30, 3), "all:0": (4, 4), "alpha0:0": (90, 1)})
    table.variants[-2].key, table.variants[-1].key = "selection:all", "alpha:0"
    table.active_count = {v.key: np.full((table.n, 28), 3 if v.mode == "off" else 4) for v in table.variants}
    (tmp_path / "interventions").mkdir()
    words.write_csv(tmp_path / "interventions" / "knockout.csv", {("mnist", "m", 4): table})
    md = summary.interventions_markdown(tmp_path)
    assert "| LSTM removed |" in md and "| LSTM read-out only |" in md and "| alpha 0 at inference |" in md
    assert "(6/6)" in md and "MNIST 1 network (seed 4, intact 50.00 %, 42 tests each)" in md
    assert "one LSTM short on 100-100 % of rows" in md and "a property of the method" in md
    assert "needed" not in md and "necessary" not in md
    assert "no communication, retrained" not in md  # no controls in this results folder
    (tmp_path / "converged").mkdir()
    (tmp_path / "converged" / "controls.csv").write_text(
        "dataset,control,protocol,error,seeds,gap,gap_verdict\nmnist,rim,converged,1.55,5,,\n"
        "mnist,rim_alpha0,converged,1.76,5,0.21,cannot tell\n")
    md = summary.interventions_markdown(tmp_path)
    # the control's protocol comes from its table (the networks knocked out may have trained longer)
    assert ("| no communication, retrained (Adam, cosine, 4,000 iterations): test error gap to RIM | +0.21 (5 seeds: "
            "cannot tell) | – |") in md


@pytest.mark.slow  # a minute or more end to end: make test-slow (CI runs it)
def test_the_study_runs_over_several_weight_files(tmp_path, capsys):
    """``python -m core.studies.interventions --weights``: one table per trained network (tiny
    models the test makes, the bundled sample), and the seed-level table across them."""
    import torch

    from core.models.registry import build_model, model_config_dict
    from core.studies import interventions as study
    from core.training.weights import save_weights

    stems = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        m = build_model("rim")
        stem = tmp_path / f"s{seed}" / "rim"
        stem.parent.mkdir()
        save_weights(m, {"model": "rim", "dataset": "mnist", "seed": seed, "config": model_config_dict(m)}, stem)
        stems.append(f"mnist:{stem}")
    out = tmp_path / "out"
    assert study.main(["--datasets", "mnist", "--weights", *stems, "--n", "30", "--readout-fill", "mean",
                       "--train-n", "20", "--patch-n", "20", "--attribution-n", "2", "--out", str(out)]) == 0
    md = (out / "knockout.md").read_text()
    assert md.count("### mnist:") == 4 and "over 3 trained networks" in md and "mean drop [95% CI over seeds]" in md
    rows = list(csv.DictReader((out / "knockout.csv").open()))
    assert {r["seed"] for r in rows} == {"0", "1", "2"}
    assert {r["pairing"] for r in csv.DictReader((out / "patching.csv").open())} == {"class", "noise"}
    block = summary.interventions_markdown(out.parent if out.name == "interventions" else _as_results(out))
    # the seed-level cell: each network's mean drop over its six removed LSTMs, then the t interval over the three
    removed = [r for r in rows if r["mode"] == "removed" and r["condition"] == "clean" and r["class"] == "all"]
    per_seed = [sum(float(r["drop_points"]) for r in removed if r["seed"] == s) / 6 for s in ("0", "1", "2")]
    tests = summary.seed_tests(pd.read_csv(out / "knockout.csv").query("`class` == 'all'"))
    t = tests[(tests["mode"] == "removed") & (tests["condition"] == "clean")].iloc[0]
    assert t["mean"] == pytest.approx(sum(per_seed) / 3, abs=1e-4) and t["seeds"] == 3
    assert f"| LSTM removed | **{t['mean']:+.2f}** [{t['low']:+.2f}, {t['high']:+.2f}] (" in block
    # one family: each interval at its Holm level excludes 0 exactly when its adjusted p is below 0.05
    assert len(tests) == 12 and all((r.low > 0 or r.high < 0) == (r.p_holm < 0.05) for r in tests.itertuples())
    assert "MNIST 3 networks (seeds 0-2, " in block and "which LSTM matters" in block
    att = list(csv.DictReader((out / "attribution.csv").open()))
    assert len(att) == 3 * 2 * 2 and {r["function"] for r in att} == {"frozen mask", "as it runs"}
    assert "Integrated Gradients of the predicted logit (128 points" in block and "2 test images x 3 networks" in block
    assert "set to its mean over training images" in block  # the fill of this run, from the CSV


def _as_results(out):
    root = out.parent / "results"
    (root / "interventions").mkdir(parents=True)
    for f in out.iterdir():
        (root / "interventions" / f.name).write_bytes(f.read_bytes())
    return root


def test_seed_lists_and_what_holds_across_seeds():
    assert summary._seeds(["4"]) == "seed 4" and summary._seeds(["2", "0", "1"]) == "seeds 0-2"
    assert summary._seeds(["0", "2", "5"]) == "seeds 0, 2, 5"
    import pandas as pd

    def rows(mode, drops):  # drops per seed, two units each
        return [{"mode": mode, "dataset": "mnist", "condition": c, "seed": str(s), "drop_points": d}
                for c in ("clean", "noisy") for s, ds in enumerate(drops) for d in ds]
    df = pd.DataFrame(rows("removed", [[2, 4], [3, 3], [2.5, 3.5]]) + rows("readout", [[1, 1], [1.5, 1.5], [1.2, 0.8]])
                      + rows("all", [[1, 1], [-1, -1], [0.5, 0.5]])).assign(
        fill=lambda d: np.where(d["mode"] == "readout", "zeros", ""))
    tests = summary.seed_tests(df)
    assert len(tests) == 6 and set(tests[tests["p_holm"] < 0.05]["mode"]) == {"removed"}  # 3, 3, 3: sd 0
    text = summary._across_seeds(df, tests)
    assert ("(Holm, 6 tests) on every set, clean and noisy, for: an LSTM removed; on none "
            "for: an LSTM read-out only, selection all.") in text
    assert "MNIST +3.00 = +1.17 direct +1.83 indirect" in text and "state zeroed at the classifier" in text
    one = df[df["seed"] == "0"]
    assert summary.seed_tests(one).empty and summary._across_seeds(one, summary.seed_tests(one)) == ""
