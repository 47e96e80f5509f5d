"""Every model computes exactly what its plain twin computes.

The RIM and the RMC have two implementations in the package (``impl="fused"``, the default,
and ``impl="reference"``, the readable step of ``rim.py`` / ``rmc.py``); each is run against
the other, starting from either side, under every ablation. The other models are compared
with their twins in ``tests/reference_models.py``. Compared: logits, every parameter gradient,
the input gradient and the trace tensors (same ``state_dict`` on both sides). Models
trained with earlier code must keep loading into either implementation, so parameter names
and shapes are pinned as well.

Tolerances: the main checks run in float64, where both implementations agree to round-off
(differences ~1e-13), so ``1e-9`` there is a real check and not a loose one. A float32 check
uses the project's 1e-5 bound (relative to the tensor's scale); the RIM's top-k makes float32
trajectories sensitive to near-ties, so its float32 check also requires identical masks.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from core.models import rim_kernel, rmc_kernel
from core.models.registry import build_model, config_fields, list_models, model_config_dict
from core.training.weights import load_weights
from tests.reference_models import reference_for

MODELS = list_models()
TWO_IMPLS = [name for name in MODELS if "impl" in config_fields(name)]
# (model, impl): the RIM and the RMC once from each implementation, the others once
VARIANTS = [(name, impl) for name in MODELS for impl in (("fused", "reference") if name in TWO_IMPLS else (None,))]
VARIANT_IDS = [name if impl is None else f"{name}-{impl}" for name, impl in VARIANTS]
PRETRAINED = Path(__file__).resolve().parent.parent / "pretrained"

# parameter names and shapes the shipped models have (input_dim 28, 10 classes)
PINNED_SHAPES = {
    "rim": {"w_hq": (6, 32, 192), "b_hq": (6, 1, 192), "w_ih": (6, 64, 128), "w_comm": (6, 32, 192),
            "w_comm_out": (6, 64, 32), "encoder.weight": (64, 28), "encoder.bias": (64,),
            "key.weight": (64, 64), "value.weight": (64, 64), "readout.weight": (10, 192),
            "readout.bias": (10,)},
    "parallel_lstm": {**{f"lstms.{i}.{p}": s for i in range(4) for p, s in
                         [("weight_ih_l0", (128, 28)), ("weight_hh_l0", (128, 32)),
                          ("bias_ih_l0", (128,)), ("bias_hh_l0", (128,))]},
                      "readout.weight": (10, 128), "readout.bias": (10,)},
    "entnet": {"keys": (8, 96), "encoder.weight": (96, 28), "encoder.bias": (96,), "U.weight": (96, 96),
               "V.weight": (96, 96), "W.weight": (96, 96), "W.bias": (96,), "prelu.weight": (1,),
               "readout.weight": (10, 768), "readout.bias": (10,)},
    "rmc": {"initial_memory": (4, 64), "input_proj.weight": (64, 28), "input_proj.bias": (64,),
            "qkv.weight": (192, 64), "qkv.bias": (192,), "attn_out.weight": (64, 64), "attn_out.bias": (64,),
            "norm1.weight": (64,), "norm1.bias": (64,), "mlp.0.weight": (64, 64), "mlp.0.bias": (64,),
            "mlp.2.weight": (64, 64), "mlp.2.bias": (64,), "norm2.weight": (64,), "norm2.bias": (64,),
            "gate_in.weight": (128, 64), "gate_in.bias": (128,), "gate_mem.weight": (128, 64),
            "readout.weight": (10, 256), "readout.bias": (10,)},
    "indrnn": {"inputs.0.weight": (128, 28), "inputs.0.bias": (128,), "inputs.1.weight": (128, 128),
               "inputs.1.bias": (128,), "u.0": (128,), "u.1": (128,), "readout.weight": (10, 128),
               "readout.bias": (10,)},
}

# (name, T, D, kind of input)
CASES = [
    ("mnist", 28, 28, "rand"),
    ("zeros", 28, 28, "zeros"),
    ("T17", 17, 28, "rand"),
    ("T40", 40, 28, "rand"),
    ("rgb32", 32, 96, "rand"),
]


def _build(name: str, impl: str | None, **overrides):
    return build_model(name, **overrides, **({} if impl is None else {"impl": impl}))


def _pair(name: str, impl: str | None, D: int, dtype, seed: int = 0, **overrides):
    """The model (built with ``impl``) and its twin holding the same weights."""
    torch.manual_seed(seed)
    fast = _build(name, impl, input_dim=D, **overrides).to(dtype)
    with torch.no_grad():  # move the IndRNN recurrent weights over its clamp, to test it too
        if name == "indrnn":
            fast.u[0].mul_(1.5)
    return fast, reference_for(fast)


def _input(B, T, D, kind, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "zeros":
        return torch.zeros(B, T, D, dtype=dtype)
    return torch.rand(B, T, D, generator=g, dtype=dtype)


def _loss(logits, seed=2):
    """A loss with generic gradients: cross-entropy plus a random projection of the logits."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, logits.shape[1], (logits.shape[0],), generator=g)
    proj = torch.randn(logits.shape, generator=g, dtype=logits.dtype)
    return F.cross_entropy(logits, y) + (logits * proj).mean()


def _run(model, x, trace=False):
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    torch.manual_seed(99)  # the same draw for the "random" selection ablation on both sides
    out = model(x, return_trace=trace)
    logits, tr = (out if trace else (out, None))
    _loss(logits).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return logits.detach(), grads, x.grad, tr


def _close(a, b, tol, what):
    """max |a - b| <= tol * max(1, max |b|): relative to the tensor's scale."""
    a, b = a.double(), b.double()
    scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
    err = float((a - b).abs().max()) if b.numel() else 0.0
    assert err <= tol * scale, f"{what}: max abs difference {err:.3g} > {tol:g} x scale {scale:.3g}"
    return err


def _compare(name, fast, ref, x, tol, trace=True):
    lf, gf, xf, tf = _run(fast, x, trace)
    lr, gr, xr, trf = _run(ref, x, trace)
    _close(lf, lr, tol, f"{name} logits")
    assert set(gf) == set(gr)
    for pname in gr:
        assert (gf[pname] is None) == (gr[pname] is None), f"{name}: grad of {pname} missing on one side"
        if gr[pname] is not None:
            _close(gf[pname], gr[pname], tol, f"{name} grad {pname}")
    _close(xf, xr, tol, f"{name} input grad")
    if trace:
        assert set(tf) == set(trf), f"{name}: trace keys differ"
        for key in trf:
            assert tf[key].shape == trf[key].shape, f"{name}: trace {key} shape"
            if name == "rim" and key in ("active", "activity"):
                assert torch.equal(tf[key].double(), trf[key].double()), f"rim: {key} mask differs"
            else:
                _close(tf[key], trf[key], tol, f"{name} trace {key}")


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_state_dict_pinned(name, impl):
    m = _build(name, impl)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == PINNED_SHAPES[name]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_fast_matches_reference_float64(name, impl, case):
    _, T, D, kind = case
    fast, ref = _pair(name, impl, D, torch.float64)
    x = _input(6, T, D, kind, torch.float64)
    _compare(name, fast, ref, x, tol=1e-9)


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_fast_matches_reference_float32(name, impl):
    fast, ref = _pair(name, impl, 28, torch.float32, seed=3)
    x = _input(16, 28, 28, "rand", torch.float32, seed=4)
    _compare(name, fast, ref, x, tol=1e-5)


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_inference_paths_match(name, impl):
    """no_grad / eval (the fast inference path) and one-image tracing agree with the twin."""
    fast, ref = _pair(name, impl, 28, torch.float64, seed=5)
    x = _input(5, 28, 28, "rand", torch.float64, seed=6)
    fast.eval()
    ref.eval()
    with torch.no_grad():
        _close(fast(x), ref(x), 1e-9, f"{name} no_grad logits")
        lf, tf = fast(x[:1], return_trace=True)
        lr, tr = ref(x[:1], return_trace=True)
    _close(lf, lr, 1e-9, f"{name} traced logits")
    for key in tr:
        _close(tf[key], tr[key], 1e-9, f"{name} one-image trace {key}")
    # the trace also matches when the batch is traced as a whole
    with torch.no_grad():
        _, tf_all = fast(x, return_trace=True)
    for key in tr:
        _close(tf_all[key][:1], tr[key], 1e-9, f"{name} batch trace {key}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rim_masks_and_attention(seed):
    """RIM: identical activation masks, k active per step, attention rows that sum to one."""
    fast, ref = _pair("rim", "fused", 28, torch.float64, seed=seed)
    x = _input(12, 28, 28, "rand", torch.float64, seed=10 + seed)
    with torch.no_grad():
        _, tf = fast(x, return_trace=True)
        _, tr = ref(x, return_trace=True)
    assert torch.equal(tf["active"], tr["active"])
    assert (tf["active"].sum(-1) == fast.config.k_active).all()
    _close(tf["input_attention"], tr["input_attention"], 1e-12, "input attention")
    _close(tf["input_attention_heads"], tr["input_attention_heads"], 1e-12, "input attention heads")
    _close(tf["comm_attention"], tr["comm_attention"], 1e-12, "communication attention")
    assert torch.allclose(tf["comm_attention"].sum(-1), torch.ones(()).double())


def test_rim_training_steps_match():
    """A few SGD steps (lr 0.1, float64) keep fast and reference weights together."""
    fast, ref = _pair("rim", "fused", 28, torch.float64, seed=7)
    opt_f = torch.optim.SGD(fast.parameters(), lr=0.1)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        x = _input(10, 28, 28, "rand", torch.float64, seed=20 + step)
        for model, opt in ((fast, opt_f), (ref, opt_r)):
            opt.zero_grad()
            _loss(model(x), seed=30 + step).backward()
            opt.step()
    sd_f, sd_r = fast.state_dict(), ref.state_dict()
    for key in sd_r:
        _close(sd_f[key], sd_r[key], 1e-9, f"weights {key} after 3 steps")


OTHER_CONFIGS = [
    ("rim", {"k_active": 6}),
    ("rim", {"k_active": 5}),
    ("rim", {"k_active": 1, "alpha": 0.0}),
    ("rim", {"alpha": 0.0}),
    ("rim", {"selection": "random"}),
    ("rim", {"selection": "all"}),
    ("rim", {"selection": "random", "k_active": 2, "alpha": 0.0}),
    ("rim", {"num_units": 3, "k_active": 2, "hidden_size": 8, "input_heads": 2, "comm_heads": 1,
             "comm_key_size": 8, "comm_value_size": 4, "input_value_size": 8}),
    ("rim", {"forget_bias": 0.0}),
    ("rmc", {"mlp_layers": 0}),
    ("rmc", {"mlp_layers": 3, "num_slots": 2, "num_heads": 2, "input_bias": 0.5}),
    ("entnet", {"num_slots": 3, "slot_size": 10}),
]
OTHER_CASES = [(name, impl, overrides) for name, overrides in OTHER_CONFIGS
               for impl in (("fused", "reference") if name in TWO_IMPLS else (None,))]


@pytest.mark.parametrize("name,impl,overrides", OTHER_CASES,
                         ids=[f"{n}-{impl}-{i}" for i, (n, impl, _) in enumerate(OTHER_CASES)])
def test_fast_matches_reference_other_configs(name, impl, overrides):
    """Both implementations agree for any setting, every ablation included, not only the defaults."""
    fast, ref = _pair(name, impl, 28, torch.float64, seed=11, **overrides)
    x = _input(5, 19, 28, "rand", torch.float64, seed=12)
    _compare(name, fast, ref, x, tol=1e-9)


def test_random_selection_is_the_same_draw_in_both_impls():
    """The check above is not vacuous for "random": its masks depend on the generator (and not
    on the input), and both implementations take the same draw from the same seed."""
    fast, ref = _pair("rim", "fused", 28, torch.float64, seed=11, selection="random")
    x = _input(4, 9, 28, "rand", torch.float64, seed=12)
    masks = []
    for model, seed in ((fast, 5), (ref, 5), (fast, 6)):
        torch.manual_seed(seed)
        with torch.no_grad():
            masks.append(model(x, return_trace=True)[1]["active"])
    assert torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], masks[2])


@pytest.mark.parametrize("name", TWO_IMPLS)
@pytest.mark.parametrize("src,dst", [("fused", "reference"), ("reference", "fused")])
def test_state_dict_saved_from_one_impl_loads_into_the_other(name, src, dst):
    """Weights saved (to bytes, as a file would hold them) from one implementation load strictly
    into the other, which then gives the same logits and trace."""
    torch.manual_seed(21)
    a = _build(name, src, input_dim=28).double()
    with torch.no_grad():  # move away from the initialisation, so that every weight matters
        for p in a.parameters():
            p.add_(0.05 * torch.randn_like(p))
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    b = _build(name, dst, input_dim=28).double()
    assert not torch.equal(b.readout.weight, a.readout.weight)  # not the same weights by chance
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=True), strict=True)
    x = _input(4, 28, 28, "rand", torch.float64, seed=22)
    with torch.no_grad():
        la, ta = a(x, return_trace=True)
        lb, tb = b(x, return_trace=True)
    _close(lb, la, 1e-9, f"{name} {src} -> {dst} logits")
    assert set(ta) == set(tb)
    for key in ta:
        _close(tb[key], ta[key], 1e-9, f"{name} {src} -> {dst} trace {key}")


def _shipped(name: str) -> list[str]:
    manifest = PRETRAINED / "manifest.json"
    if not manifest.is_file():
        return []
    return [m["weights"] for m in json.loads(manifest.read_text())["models"] if m["model"] == name][:2]


@pytest.mark.parametrize("name,weights", [(n, w) for n in TWO_IMPLS for w in _shipped(n)])
def test_shipped_models_load_into_both_impls(name, weights):
    """A shipped model (trained before ``impl`` existed) loads into either implementation,
    which then give the same logits and trace on that data set's row shape (float64)."""
    fused, meta = load_weights(PRETRAINED / weights)
    assert fused.config.impl == "fused"  # the default for configs saved without the field
    cfg = {**model_config_dict(fused), "impl": "reference"}
    ref = build_model(name, **cfg)
    ref.load_state_dict(fused.state_dict(), strict=True)
    x = _input(3, 12, cfg["input_dim"], "rand", torch.float64, seed=23)
    with torch.no_grad():
        lf, tf = fused.double()(x, return_trace=True)
        lr, tr = ref.double()(x, return_trace=True)
    _close(lf, lr, 1e-9, f"{weights} logits")
    for key in tr:
        _close(tf[key], tr[key], 1e-9, f"{weights} trace {key}")


@pytest.mark.parametrize("name,kernel", [("rim", rim_kernel), ("rmc", rmc_kernel)], ids=["rim", "rmc"])
def test_trace_with_gradients_runs_the_recurrence_once(name, kernel, monkeypatch):
    """A traced training forward runs the fused recurrence once (the trace comes out of the
    autograd node's forward) and gives the trace and logits of an untraced / no-grad run."""
    fast, _ = _pair(name, "fused", 28, torch.float64, seed=24)
    x = _input(3, 10, 28, "rand", torch.float64, seed=25)
    calls = []
    original = kernel._recurrence
    monkeypatch.setattr(kernel, "_recurrence", lambda *a, **k: calls.append(1) or original(*a, **k))
    logits, trace = fast(x, return_trace=True)
    assert len(calls) == 1 and logits.requires_grad
    assert not any(v.requires_grad for v in trace.values())
    _loss(logits).backward()  # the gradient is still there
    assert all(p.grad is not None for p in fast.parameters())
    assert torch.equal(fast(x), logits.detach())
    with torch.no_grad():
        _, trace_ng = fast(x, return_trace=True)
    for key in trace:
        _close(trace[key], trace_ng[key], 1e-12, f"{name} traced-with-grad {key}")


@pytest.mark.parametrize("name", TWO_IMPLS)
def test_unknown_impl_is_refused(name):
    with pytest.raises(ValueError, match="impl must be one of fused, reference, got 'fast'"):
        build_model(name, impl="fast")
