"""Interventions on the RIM (core.models.rim.Intervention, core.eval.interventions).

The identities that make an intervention trustworthy, checked bit for bit where the maths
is the same code path (``torch.equal``), and across the two implementations (fused kernel and
reference step) to round-off in float64 and with identical masks on the shipped models.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.eval import interventions as ivs
from core.eval import patching
from core.models.registry import build_model, model_config_dict
from core.models.rim import Intervention
from core.training.weights import load_weights

PRETRAINED = Path(__file__).resolve().parent.parent / "pretrained"
IMPLS = ("fused", "reference")


def _model(impl="fused", dtype=torch.float64, seed=0, **overrides):
    torch.manual_seed(seed)
    m = build_model("rim", impl=impl, **overrides).to(dtype).eval()
    with torch.no_grad():  # away from the initialisation, so that every weight matters
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m


def _twin(model, impl):
    other = build_model("rim", **{**model_config_dict(model), "impl": impl}).to(next(model.parameters()).dtype)
    other.load_state_dict(model.state_dict())
    return other.eval()


def _x(B=6, T=28, D=28, dtype=torch.float64, seed=1):
    return torch.rand(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@torch.no_grad()
def _out(model, x, iv=None):
    return model(x, return_trace=True, intervention=iv)


@pytest.mark.parametrize("impl", IMPLS)
def test_no_intervention_is_bit_for_bit(impl):
    m = _model(impl)
    x = _x()
    with torch.no_grad():
        plain, tr = m(x, return_trace=True)
        empty, tr_e = m(x, return_trace=True, intervention=Intervention())
    assert torch.equal(plain, empty)
    assert all(torch.equal(tr[k], tr_e[k]) for k in tr)


@pytest.mark.parametrize("impl", IMPLS)
def test_forcing_the_models_own_mask_reproduces_it_exactly(impl):
    m = _model(impl)
    x = _x()
    logits, tr = _out(m, x)
    forced, tr_f = _out(m, x, Intervention(force=tr["active"]))
    assert torch.equal(logits, forced)
    assert torch.equal(tr["active"], tr_f["active"])


@pytest.mark.parametrize("impl", IMPLS)
def test_forcing_all_on_equals_selection_all(impl):
    m = _model(impl)
    x = _x()
    T, n = x.shape[1], m.config.num_units
    forced, tr_f = _out(m, x, Intervention(force=np.ones((T, n))))
    swapped, tr_s = _out(m, x, Intervention(selection="all"))
    assert torch.equal(forced, swapped)
    assert torch.equal(tr_f["active"], tr_s["active"]) and bool((tr_f["active"] == 1).all())
    plain, _ = _out(m, x)
    assert not torch.equal(forced, plain)  # the check is not vacuous


@pytest.mark.parametrize("impl", IMPLS)
def test_knocking_out_a_never_active_lstm_changes_nothing(impl):
    """k = 2 of 6: on some images an LSTM is never selected; knocking it out there changes
    nothing, bit for bit; knocking out one that is active does change the logits."""
    m = _model(impl, k_active=2, seed=3)
    x = _x(B=24, T=12)
    found = changed = 0
    for b in range(len(x)):
        xb = x[b : b + 1]
        logits, tr = _out(m, xb)
        ever = tr["active"][0].amax(0)  # [n]
        for i in range(m.config.num_units):
            ko, tr_k = _out(m, xb, Intervention(knock_out=(i,)))
            assert bool((tr_k["active"][0, :, i] == 0).all())
            if ever[i] == 0:
                found += 1
                assert torch.equal(ko, logits) and torch.equal(tr_k["active"], tr["active"])
            else:
                changed += int(not torch.equal(ko, logits))
    assert found > 0, "no never-active LSTM in this batch: the test would be vacuous"
    assert changed > 0


def test_knocked_out_lstm_keeps_its_zero_state_and_reads_nothing():
    """What docs say: a knocked-out LSTM's hidden norm stays 0 on every row."""
    m = _model("reference")
    _, tr = _out(m, _x(B=3), Intervention(knock_out=(2,)))
    assert bool((tr["hidden_norm"][:, :, 2] == 0).all())
    assert bool((tr["hidden_norm"][:, :, 3] > 0).any())


@pytest.mark.parametrize("src", IMPLS)
def test_fused_matches_reference_under_interventions(src):
    m = _model(src, seed=5)
    ref = _twin(m, "reference" if src == "fused" else "fused")
    x = _x(B=5, T=19, seed=6)
    T, n = 19, m.config.num_units
    force = ivs.force_grid(T, n, on=[(3, 0), (4, 0), (10, 5)], off=[(3, 1), (12, 2), (0, 4)])
    cases = [Intervention(force=force), Intervention(knock_out=(1, 4)), Intervention(alpha=0.0),
             Intervention(alpha=0.5, force=force), Intervention(selection="random", seed=7),
             Intervention(selection="all", knock_out=(0,)), Intervention(selection="random", seed=3, force=force),
             Intervention(remove=(2,)), Intervention(remove=(0, 5), isolate=(0, 5)), Intervention(isolate=(3,)),
             Intervention(knock_out=(1,), isolate=(1,)),
             ivs.knockout(m, "readout", 2, mean_state=np.full((6, 32), 0.3)),
             ivs.patch_state(_states(ref, _x(B=1, T=19, seed=12))[0][0], _states(ref, _x(B=1, T=19, seed=12))[1][0],
                             [1, 4], (5, 11))]
    for iv in cases:
        lf, tf = _out(m, x, iv)
        lr, tr = _out(ref, x, iv)
        assert float((lf - lr).abs().max()) < 1e-9, iv
        assert torch.equal(tf["active"], tr["active"]), iv
        for key in tr:
            assert float((tf[key] - tr[key]).abs().max()) < 1e-9, (iv, key)


@pytest.mark.parametrize("iv", [
    Intervention(force=ivs.force_grid(9, 6, on=[(2, 1)], off=[(5, 0)]), knock_out=(3,), alpha=0.3),
    Intervention(remove=(1,), isolate=(1, 4))])
def test_interventions_keep_gradients_right(iv):
    """The fused kernel's hand-written backward under an intervention equals autograd's."""
    m = _model("fused", seed=8)
    ref = _twin(m, "reference")
    x = _x(B=3, T=9, seed=9)
    grads = []
    for model in (m, ref):
        xx = x.clone().requires_grad_(True)
        model(xx, intervention=iv).sum().backward()
        grads.append(xx.grad)
    assert float((grads[0] - grads[1]).abs().max()) < 1e-9


def _states(model, x):
    with torch.no_grad():
        _, tr = model(x, return_trace=True, return_states=True)
    return tr["h"].numpy(), tr["c"].numpy()


@pytest.mark.parametrize("impl", IMPLS)
def test_removed_lstm_leaves_the_competition_and_k_others_stay_active(impl):
    """Removed: exactly k active on every row, the top k of the others' attention; switched off
    after selection: the rows where it ranked in the top k run one short."""
    m = _model(impl, seed=2)
    x = _x(B=8)
    k = m.config.k_active
    _, tr = _out(m, x)
    unit = int(tr["active"].sum((0, 1)).argmax())  # the most often active LSTM
    _, tr_r = _out(m, x, Intervention(remove=(unit,)))
    act, w = tr_r["active"], tr_r["input_attention"].clone()
    assert bool((act.sum(-1) == k).all()) and bool((act[..., unit] == 0).all())
    w[..., unit] = -1.0
    top = torch.zeros_like(w).scatter_(-1, w.topk(k, dim=-1).indices, 1.0)
    assert torch.equal(act, top)
    _, tr_o = _out(m, x, Intervention(knock_out=(unit,)))
    short = tr_o["active"].sum(-1) < k
    assert bool(short.any()) and bool((tr_o["active"].sum(-1) >= k - 1).all())


@pytest.mark.parametrize("impl", IMPLS)
def test_isolated_lstm_gets_no_communication_weight(impl):
    m = _model(impl)
    x = _x(B=3)
    _, tr = _out(m, x, Intervention(knock_out=(2,)))
    _, tr_i = _out(m, x, Intervention(knock_out=(2,), isolate=(2,)))
    assert float(tr["comm_attention"][..., 2].min()) > 0  # the zero key takes a share of every reader
    assert bool((tr_i["comm_attention"][..., 2] == 0).all())
    assert torch.allclose(tr_i["comm_attention"].sum(-1), torch.ones(()).double())


@pytest.mark.parametrize("impl", IMPLS)
def test_readout_only_leaves_the_recurrence_and_replaces_the_final_state(impl):
    m = _model(impl)
    ref = _twin(m, "reference")
    x = _x(B=4)
    logits, tr = _out(m, x)
    mean = np.random.default_rng(0).normal(size=(6, 32))
    for fill in (None, mean):
        iv = ivs.knockout(m, "readout", 3, mean_state=fill)
        after, tr_a = _out(m, x, iv)
        assert all(torch.equal(tr[k], tr_a[k]) for k in tr)  # the recurrence runs as trained
        h = torch.as_tensor(_states(ref, x)[0][:, -1])
        h[:, 3] = 0.0 if fill is None else torch.as_tensor(fill[3])
        expected = m.readout(h.reshape(len(x), -1)).detach()
        assert float((after - expected).abs().max()) < 1e-9
        assert not torch.equal(after, logits)


def test_patching_from_oneself_changes_nothing_and_from_a_donor_everywhere_gives_the_donor():
    m = _model("fused")
    ref = _twin(m, "reference")
    x, donor = _x(B=3, seed=1), _x(B=3, seed=2)
    h, c = _states(ref, x)
    same, tr = _out(m, x, ivs.patch_state(h, c, range(6), (1, 28)))
    plain, tr0 = _out(m, x)
    assert float((same - plain).abs().max()) < 1e-9
    hd, cd = _states(ref, donor)
    moved, _ = _out(m, x, ivs.patch_state(hd, cd, range(6), (28, 28)))  # the last row: the classifier's input
    theirs, tr_d = _out(m, donor)
    assert float((moved - theirs).abs().max()) < 1e-9
    part, tr_p = _out(m, x, ivs.patch_mask(tr_d["active"].numpy(), (5, 9)))
    assert torch.equal(tr_p["active"][:, 4:9], tr_d["active"][:, 4:9])
    assert torch.equal(tr_p["active"][:, :4], tr0["active"][:, :4])
    with pytest.raises(ValueError, match="without gradients"):
        m(x.clone().requires_grad_(True), intervention=ivs.patch_state(hd, cd, [0], (1, 3)))


def test_random_selection_seed_is_reproducible_and_alpha_matters():
    m = _model()
    x = _x(B=4)
    a, _ = _out(m, x, Intervention(selection="random", seed=1))
    b, _ = _out(m, x, Intervention(selection="random", seed=1))
    c, _ = _out(m, x, Intervention(selection="random", seed=2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    plain, _ = _out(m, x)
    same, _ = _out(m, x, Intervention(alpha=m.config.alpha))
    zero, _ = _out(m, x, Intervention(alpha=0.0))
    assert torch.equal(plain, same) and not torch.equal(plain, zero)


def test_bad_interventions_are_refused():
    m = _model()
    x = _x(B=2, T=5)
    with pytest.raises(ValueError, match="force must be"):
        m(x, intervention=Intervention(force=np.zeros((4, 6))))
    with pytest.raises(ValueError, match="knock_out"):
        m(x, intervention=Intervention(knock_out=(6,)))
    with pytest.raises(ValueError, match="selection must be"):
        m(x, intervention=Intervention(selection="best"))
    with pytest.raises(ValueError, match="1 \\(on\\), 0 \\(off\\)"):
        m(x, intervention=Intervention(force=np.full((5, 6), 0.5)))
    with pytest.raises(ValueError, match="remove"):
        m(x, intervention=Intervention(remove=(-1,)))
    with pytest.raises(ValueError, match="at least one LSTM"):
        m(x, intervention=Intervention(isolate=tuple(range(6))))
    with pytest.raises(ValueError, match="readout must be"):
        m(x, intervention=Intervention(readout=np.zeros((6, 31))))
    with pytest.raises(ValueError, match="patch: donor h"):
        m(x, intervention=Intervention(patch=(np.zeros((1, 4, 6, 32)), np.zeros((1, 4, 6, 32)), np.ones((4, 6)))))
    with pytest.raises(ValueError, match="knock-out mode"):
        ivs.knockout(m, "gone", 1)
    with pytest.raises(ValueError, match="rows must be"):
        ivs.row_cells(5, 6, [0], (0, 3))


def _shipped_rims() -> list[str]:
    manifest = PRETRAINED / "manifest.json"
    if not manifest.is_file():
        return []
    models = json.loads(manifest.read_text())["models"]
    return [m["weights"] for m in models if m["model"] == "rim" and m["dataset"] in ("mnist", "fashion_mnist")]


@pytest.mark.parametrize("weights", _shipped_rims())
def test_shipped_models_fused_equals_reference_under_interventions(weights):
    """The shipped models (float32, fused kernel) give the reference step's numbers under
    interventions: identical masks, logits within the project's float32 bound."""
    fused, _ = load_weights(PRETRAINED / weights)
    ref = _twin(fused, "reference")
    x = _x(B=8, T=28, dtype=torch.float32, seed=11)
    force = ivs.force_grid(28, 6, on=[(5, 0), (6, 0)], off=[(10, 2), (11, 3)])
    for iv in (None, Intervention(force=force), Intervention(knock_out=(2,)), Intervention(alpha=0.0),
               Intervention(selection="all"), Intervention(selection="random", seed=0)):
        lf, tf = _out(fused.eval(), x, iv)
        lr, tr = _out(ref, x, iv)
        assert torch.equal(tf["active"], tr["active"]), iv
        scale = max(1.0, float(lr.abs().max()))
        assert float((lf - lr).abs().max()) <= 1e-5 * scale, iv


def test_downstream_changes_exclude_the_forced_cells():
    m = _model()
    x = _x(B=1)
    _, tr = _out(m, x)
    mask = tr["active"][0].numpy()
    t0 = 3
    i_off = int(np.flatnonzero(mask[t0])[0])
    iv = Intervention(force=ivs.force_grid(28, 6, off=[(t0, i_off)]))
    _, tr2 = _out(m, x, iv)
    after = tr2["active"][0].numpy()
    changed = ivs.downstream_changes(mask, after, iv)
    assert not changed[t0, i_off] and after[t0, i_off] == 0
    assert not changed[:t0].any()  # nothing before the forced row can change
    assert (changed == ((mask != after) & ~ivs.pinned_cells(iv, 28, 6))).all()


def _tiny_set(N=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (N, 28, 28), dtype=np.uint8), rng.integers(0, 10, N)


def test_knockout_table_counts_modes_and_short_rows():
    """The set-wide table on a small random set: accuracies are counts over the images, the
    intact row equals the plain model's accuracy, each LSTM in each of the three modes, and
    only "switched off" runs rows short."""
    m = _model("fused", dtype=torch.float32)
    images, labels = _tiny_set()
    seen = []
    table = ivs.knockout_table(m, images, labels, [str(c) for c in range(10)], batch_size=16,
                               progress=lambda f, what: seen.append(f))
    assert seen[-1] == 1.0 and len(seen) == len(table.variants) == len(ivs.variants_of(m))
    assert len(table.variants) == 1 + 3 * 6 + len(ivs.RANDOM_SEEDS) + 2
    assert table.modes == list(ivs.KNOCKOUTS)
    from core.eval.predict import predict_logits

    plain = (predict_logits(m, images, batch_size=16).argmax(1).numpy() == labels).mean()
    assert table.accuracy("intact")[0] == plain
    for v in table.variants:
        acc, lo, hi, n = table.accuracy(v.key)
        assert n == 40 and lo <= acc <= hi and acc == v.clean.mean()
    assert all(table.short_rows(k) == 0 for k in table.keys("knockout", "removed") + table.keys("knockout", "readout"))
    assert max(table.short_rows(k) for k in table.keys("knockout", "off")) > 0
    assert table.per_class_drops("readout").shape == (6, 10)


def test_knockout_tables_over_seeds_give_seed_level_intervals():
    """Several trained networks (tiny models the test makes): one table each, the drop of each
    variant per seed, and the t interval over seeds."""
    from scipy import stats

    from core.report import interventions as words

    models = [_model("fused", dtype=torch.float32, seed=s) for s in (0, 1, 2)]
    images, labels = _tiny_set()
    tables = ivs.knockout_tables(models, images, labels, [str(c) for c in range(10)], modes=("removed",),
                                 random_seeds=(0,))
    d = np.array([np.mean([t.drop(f"removed:{i}") for i in range(6)]) for t in tables])  # the mode's mean per network
    df = words.seeds_frame(tables, [0, 1, 2])
    row = df[df["variant"] == "LSTM removed"].iloc[0]
    lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=stats.sem(d)) if d.std() > 0 else (d.mean(), d.mean())
    assert row["mean drop"] == pytest.approx(d.mean()) and row["95% CI low"] == pytest.approx(lo)
    assert row["95% CI high"] == pytest.approx(hi) and row["seeds"] == 3
    md = words.seeds_markdown(tables, [0, 1, 2], "t")
    assert "seed 2" in md and "Drop per class" in md and "not matched across networks" in md


def test_patching_table_counts_what_a_direct_run_gives():
    m = _model("fused", dtype=torch.float32)
    images, labels = _tiny_set(24)
    donors = images[patching.class_donors(labels)]
    assert (labels[patching.class_donors(labels)] != labels).all()
    pt = patching.patching_table(m, images, donors, pairing="class", bands=((1, 14), (15, 28)))
    assert len(pt.cells) == 6 * 2 + 2 and pt.grid("state").shape == (6, 2) and pt.grid("mask").shape == (1, 2)
    y_r = ivs.run(m, images)[0].argmax(1)
    y_d, tr = ivs.run(m, donors, with_states=True)
    keep = np.flatnonzero(y_r != y_d.argmax(1))
    assert pt.pairs == len(keep) > 0
    cell = next(c for c in pt.cells if c.what == "state" and c.unit == 2 and c.rows == (15, 28))
    y_p = ivs.run(m, images[keep], ivs.patch_state(tr["h"][keep], tr["c"][keep], [2], (15, 28)))[0].argmax(1)
    assert cell.moved == int((y_p == y_d.argmax(1)[keep]).sum())


def test_one_input_composes_the_tabs_settings():
    m = _model("fused")
    h, c = _states(_twin(m, "reference"), _x(B=1, seed=4))
    _, trd = _out(m, _x(B=1, seed=4))
    patch = {"what": "mask", "units": [], "rows": (3, 6), "h": h[0], "c": c[0], "mask": trd["active"][0].numpy()}
    iv = ivs.one_input(m, 28, cells={(4, 0): 1}, knock_out=(2,), mode="removed", isolate=True, alpha=0.2, patch=patch)
    assert iv.remove == (2,) and iv.isolate == (2,) and iv.alpha == 0.2
    assert iv.force[4, 0] == 1 and (iv.force[2:6, 1:] == trd["active"][0, 2:6, 1:].numpy()).all()
    assert (iv.force[:2] == -1).all()
    iv2 = ivs.one_input(m, 28, knock_out=(1,), mode="readout",
                        patch={**patch, "what": "state", "units": [0], "rows": (1, 2)})
    assert np.isnan(iv2.readout[0]).all() and (iv2.readout[1] == 0).all() and iv2.patch[2][:2, 0].all()




def test_decisive_cell_names_a_cell_whose_flip_alone_changes_the_answer():
    from core.data.datasets import SAMPLES_DIR

    model, _ = load_weights(PRETRAINED / "converged" / "mnist" / "rim")
    with np.load(SAMPLES_DIR / "mnist_sample.npz", allow_pickle=False) as d:
        images = d["x"][:300]
    idx, row, lstm = ivs.decisive_cell(model, images)
    img = images[idx: idx + 1]
    logits, tr = ivs.run(model, img, with_trace=True)
    force = np.full(tr["active"].shape, -1.0, dtype=np.float32)
    force[0, row, lstm] = 1.0 - tr["active"][0, row, lstm]
    flipped, _ = ivs.run(model, img, Intervention(force=force))
    assert flipped.argmax(1)[0] != logits.argmax(1)[0]
    assert ivs.decisive_cell(model, images, look_at=0) is None
