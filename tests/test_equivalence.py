"""The fast models in ``core.models`` compute exactly what the plain references compute.

Each fast model is compared with its twin in ``tests/reference_models.py`` (same
``state_dict``, maths written out step by step): logits, every parameter gradient, the input
gradient and the trace tensors. Checkpoints trained with earlier code must keep loading, so
parameter names and shapes are pinned as well.

Tolerances: the main checks run in float64, where both implementations agree to round-off
(differences ~1e-13), so ``1e-9`` there is a real check and not a loose one. A float32 check
uses the project's 1e-5 bound (relative to the tensor's scale); the RIM's top-k makes float32
trajectories sensitive to near-ties, so its float32 check also requires identical masks.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from core.models import build_model, list_models
from tests.reference_models import reference_for

MODELS = list_models()

# parameter names and shapes the shipped checkpoints have (input_dim 28, 10 classes)
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


def _pair(name: str, D: int, dtype, seed: int = 0):
    torch.manual_seed(seed)
    fast = build_model(name, input_dim=D).to(dtype)
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


@pytest.mark.parametrize("name", MODELS)
def test_state_dict_pinned(name):
    m = build_model(name)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == PINNED_SHAPES[name]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("name", MODELS)
def test_fast_matches_reference_float64(name, case):
    _, T, D, kind = case
    fast, ref = _pair(name, D, torch.float64)
    x = _input(6, T, D, kind, torch.float64)
    _compare(name, fast, ref, x, tol=1e-9)


@pytest.mark.parametrize("name", MODELS)
def test_fast_matches_reference_float32(name):
    fast, ref = _pair(name, 28, torch.float32, seed=3)
    x = _input(16, 28, 28, "rand", torch.float32, seed=4)
    _compare(name, fast, ref, x, tol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_inference_paths_match(name):
    """no_grad / eval (the fast inference path) and one-image tracing agree with the reference."""
    fast, ref = _pair(name, 28, torch.float64, seed=5)
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
    fast, ref = _pair("rim", 28, torch.float64, seed=seed)
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
    fast, ref = _pair("rim", 28, torch.float64, seed=7)
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
    ("rim", {"k_active": 1, "alpha": 0.0}),
    ("rim", {"num_units": 3, "k_active": 2, "hidden_size": 8, "input_heads": 2, "comm_heads": 1,
             "comm_key_size": 8, "comm_value_size": 4, "input_value_size": 8}),
    ("rmc", {"mlp_layers": 0}),
    ("rmc", {"mlp_layers": 3, "num_slots": 2, "num_heads": 2, "input_bias": 0.5}),
    ("entnet", {"num_slots": 3, "slot_size": 10}),
]


@pytest.mark.parametrize("name,overrides", OTHER_CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OTHER_CONFIGS)])
def test_fast_matches_reference_other_configs(name, overrides):
    """The fused recurrences are written for any setting, not only the defaults."""
    torch.manual_seed(11)
    fast = build_model(name, input_dim=28, **overrides).to(torch.float64)
    ref = reference_for(fast)
    x = _input(5, 19, 28, "rand", torch.float64, seed=12)
    _compare(name, fast, ref, x, tol=1e-9)
