"""Equal footing (one initialisation for every LSTM) and the ablation fields of rim.

Each ablation test checks what the field says it does, and is written so that it fails
when the field is ignored (the paper's default behaves differently on the same check). The
ablation tests run on both implementations of the RIM (``impl`` "fused" and "reference").
"""

from __future__ import annotations

import math

import pytest
import torch

from core.models._init import FORGET_BIAS
from core.models.registry import build_model, config_fields, get_spec, list_models

SMALL = dict(num_units=5, hidden_size=8, k_active=3, embed_dim=12, input_heads=2, input_key_size=4,
             input_value_size=4, comm_heads=2, comm_key_size=4, comm_value_size=4)
IMPLS = ("fused", "reference")


def _lstm_models():
    return [n for n in list_models() if get_spec(n).forget_gate]


def test_every_forget_gate_starts_at_the_same_default():
    """Built with defaults, every model with a forget gate has forget bias exactly 1.0 on every unit."""
    assert set(_lstm_models()) == {"rim", "parallel_lstm", "rmc"}
    for name in _lstm_models():
        assert config_fields(name)["forget_bias"] == FORGET_BIAS == 1.0
        torch.manual_seed(0)
        fb = build_model(name).forget_gate_bias()
        assert fb.numel() > 0
        assert torch.equal(fb, torch.full_like(fb, FORGET_BIAS)), name
    for name in set(list_models()) - set(_lstm_models()):  # EntNet, IndRNN: no forget gate
        assert "forget_bias" not in config_fields(name)
        assert not hasattr(build_model(name), "forget_gate_bias")


@pytest.mark.parametrize("name", ["rim", "parallel_lstm", "rmc"])
@pytest.mark.parametrize("value", [0.0, 2.5])
def test_forget_bias_field_sets_it(name, value):
    fb = build_model(name, forget_bias=value).forget_gate_bias()
    assert torch.equal(fb, torch.full_like(fb, value))


def test_lstm_weights_follow_one_rule():
    """rim's LSTM gate weights and the parallel LSTMs' are drawn from the same uniform
    +-1/sqrt(H); all their non-forget LSTM biases are 0."""
    torch.manual_seed(0)
    rim = build_model("rim")
    pl = build_model("parallel_lstm")
    H = rim.config.hidden_size
    assert pl.config.hidden_size == H
    bound = 1 / math.sqrt(H)
    q = rim.config.input_heads * rim.config.input_key_size
    gates = [rim.w_hq[..., q:], rim.w_ih] + [p for m in pl.lstms for n_, p in m.named_parameters() if "weight" in n_]
    for w in gates:
        assert w.abs().max() <= bound
        assert w.abs().max() > 0.9 * bound  # the full range is used (not a narrower draw)
    b = rim.b_hq[..., q:].detach()
    assert torch.count_nonzero(b[..., :H]) == 0 and torch.count_nonzero(b[..., 2 * H :]) == 0
    for m in pl.lstms:
        both = (m.bias_ih_l0 + m.bias_hh_l0).detach()
        assert torch.count_nonzero(both[:H]) == 0 and torch.count_nonzero(both[2 * H :]) == 0


# ---------------------------------------------------------------------------------------
# ablations of rim
def _masks(model, x):
    with torch.no_grad():
        return model(x, return_trace=True)[1]["active"]


@pytest.mark.parametrize("impl", IMPLS)
def test_selection_all_activates_every_lstm(impl):
    torch.manual_seed(0)
    m = build_model("rim", selection="all", impl=impl, **SMALL)
    act = _masks(m, torch.rand(4, 7, 28))
    assert torch.equal(act, torch.ones_like(act))


@pytest.mark.parametrize("impl", IMPLS)
def test_selection_random_does_not_depend_on_the_input(impl):
    torch.manual_seed(0)
    m = build_model("rim", selection="random", impl=impl, **SMALL)
    x1, x2 = torch.rand(6, 9, 28), torch.rand(6, 9, 28) * 3
    torch.manual_seed(123)
    a1 = _masks(m, x1)
    torch.manual_seed(123)
    a2 = _masks(m, x2)
    assert torch.equal(a1, a2)  # same generator state, different input: same mask
    assert torch.equal(a1.sum(-1), torch.full_like(a1.sum(-1), SMALL["k_active"]))
    assert not torch.equal(a1, _masks(m, x1))  # fresh draws differ
    assert len({tuple(r.tolist()) for r in a1.reshape(-1, SMALL["num_units"])}) > 3  # varies over steps/examples
    # while the paper's attention selection does depend on the input (the check can fail)
    att = build_model("rim", impl=impl, **SMALL)
    att.load_state_dict(m.state_dict())
    assert not torch.equal(_masks(att, x1), _masks(att, x2))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("k", [4, 5, 6])
def test_k_active(k, impl):
    torch.manual_seed(0)
    m = build_model("rim", k_active=k, impl=impl)
    act = _masks(m, torch.rand(3, 28, 28))
    assert torch.equal(act.sum(-1), torch.full_like(act.sum(-1), k))


@pytest.mark.parametrize("impl", IMPLS)
def test_alpha_zero_is_no_communication(impl):
    """With alpha 0 the states are those of a model without communication: the communication
    weights have no effect at all (bit for bit); with the paper's alpha they do."""
    x = torch.rand(5, 8, 28)
    for alpha, unaffected in ((0.0, True), (0.1, False)):
        torch.manual_seed(0)
        m = build_model("rim", alpha=alpha, impl=impl, **SMALL)
        logits, tr = m(x, return_trace=True)
        with torch.no_grad():
            m.w_comm.normal_()
            m.w_comm_out.normal_()
        logits2, tr2 = m(x, return_trace=True)
        assert torch.equal(logits, logits2) == unaffected
        assert torch.equal(tr["hidden_norm"], tr2["hidden_norm"]) == unaffected


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("selection", ["random", "all"])
def test_fixed_mask_gradients_are_exact(selection, impl):
    """The gradient under a fixed (ablation) mask (the fused kernel's hand-written backward, and
    autograd through the reference step) matches finite differences."""
    torch.manual_seed(0)
    m = build_model("rim", selection=selection, impl=impl, **SMALL).double()
    x = torch.rand(2, 5, 28, dtype=torch.double)
    torch.manual_seed(1)
    mask = m.selection_mask(5, 2, x)
    m.selection_mask = lambda *args, **kwargs: mask  # the same draw in every gradcheck call
    params = [m.w_hq, m.w_ih, m.w_comm]
    # compare the fused gradient with central differences on a few coordinates
    loss = m(x).sum()
    grads = torch.autograd.grad(loss, params)
    eps = 1e-6
    for p, g in zip(params, grads):
        for idx in [(0, 0, 0), (1, 2, 3), (-1, -1, -1)]:
            old = p.data[idx].item()
            p.data[idx] = old + eps
            up = m(x).sum().item()
            p.data[idx] = old - eps
            down = m(x).sum().item()
            p.data[idx] = old
            assert abs((up - down) / (2 * eps) - g[idx].item()) < 1e-6


def test_unknown_selection_is_refused():
    with pytest.raises(ValueError, match="selection must be one of attention, random, all"):
        build_model("rim", selection="best")
