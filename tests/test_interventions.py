"""Interventions on the RIM (core.models.rim.Intervention, core.eval.interventions).

The identities that make an intervention trustworthy, checked bit for bit where the maths
is the same code path (``torch.equal``), and across the two implementations (fused kernel and
reference step) to round-off in float64 and with identical masks on the shipped checkpoints.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.eval import interventions as ivs
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
             Intervention(selection="all", knock_out=(0,)), Intervention(selection="random", seed=3, force=force)]
    for iv in cases:
        lf, tf = _out(m, x, iv)
        lr, tr = _out(ref, x, iv)
        assert float((lf - lr).abs().max()) < 1e-9, iv
        assert torch.equal(tf["active"], tr["active"]), iv
        for key in tr:
            assert float((tf[key] - tr[key]).abs().max()) < 1e-9, (iv, key)


def test_interventions_keep_gradients_right():
    """The fused kernel's hand-written backward under an intervention equals autograd's."""
    m = _model("fused", seed=8)
    ref = _twin(m, "reference")
    x = _x(B=3, T=9, seed=9)
    iv = Intervention(force=ivs.force_grid(9, 6, on=[(2, 1)], off=[(5, 0)]), knock_out=(3,), alpha=0.3)
    grads = []
    for model in (m, ref):
        xx = x.clone().requires_grad_(True)
        model(xx, intervention=iv).sum().backward()
        grads.append(xx.grad)
    assert float((grads[0] - grads[1]).abs().max()) < 1e-9


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


def _shipped_rims() -> list[str]:
    manifest = PRETRAINED / "manifest.json"
    if not manifest.is_file():
        return []
    models = json.loads(manifest.read_text())["models"]
    return [m["weights"] for m in models if m["model"] == "rim" and m["dataset"] in ("mnist", "fashion_mnist")]


@pytest.mark.parametrize("weights", _shipped_rims())
def test_shipped_models_fused_equals_reference_under_interventions(weights):
    """The shipped checkpoints (float32, fused kernel) give the reference step's numbers under
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


def test_knockout_table_counts_and_caption():
    """The set-wide table on a small random set: accuracies are counts over the images, the
    intact row equals the plain model's accuracy, the caption quotes the computed drops."""
    torch.manual_seed(0)
    m = build_model("rim", alpha=0.1).eval()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 40)
    seen = []
    table = ivs.knockout_table(m, images, labels, [str(c) for c in range(10)], batch_size=16,
                               progress=lambda f, what: seen.append(f))
    assert seen[-1] == 1.0 and len(seen) == len(table.variants) == 1 + 6 + 3
    from core.eval.predict import predict_logits

    plain = (predict_logits(m, images, batch_size=16).argmax(1).numpy() == labels).mean()
    assert table.accuracy("intact")[0] == plain
    for v in table.variants:
        acc, lo, hi, n = table.accuracy(v.key)
        assert n == 40 and lo <= acc <= hi and acc == v.clean.mean()
    worst = max(table.drop(f"knockout:{i}") for i in range(6))
    assert f"{worst:.2f}" in table.caption()
    rows = table.rows()
    assert len(rows) == len(table.variants) * 2 * 11
    md = table.markdown("test")
    assert md.count("| knock out LSTM") == 12  # once in the main table, once per class
