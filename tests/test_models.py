"""Tests for core.models: the paper's method (rim) and the four baselines.

Everything runs on tiny models and tiny synthetic inputs on CPU; nothing touches data on
disk. The RIM tests check what docs/method.md promises: exactly k LSTMs active per row, inactive
LSTMs keeping their state, an all-black row that is not the null input, gradients reaching
every LSTM, and traces with the documented shapes.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from core.models.registry import build_model, count_parameters, list_models, make_config, parameter_counts
from tests.run_helpers import SMALL as TINY

MODELS = ["rim", "parallel_lstm", "entnet", "rmc", "indrnn"]



# The RIM and the RMC have two implementations ("fused", the default, and "reference", the
# plain step): the behavioural tests run on both.
IMPLS = ("fused", "reference")
VARIANTS = [(name, impl) for name in MODELS for impl in (IMPLS if name in ("rim", "rmc") else (None,))]
VARIANT_IDS = [name if impl is None else f"{name}-{impl}" for name, impl in VARIANTS]


def tiny(name: str, input_dim: int = 8, num_classes: int = 4, seed: int = 0, impl: str | None = None,
         **extra) -> torch.nn.Module:
    torch.manual_seed(seed)
    extra = {**extra, **({} if impl is None else {"impl": impl})}
    return build_model(name, input_dim=input_dim, num_classes=num_classes, **{**TINY[name], **extra})


def rand_x(B: int = 6, T: int = 9, D: int = 8, seed: int = 1) -> torch.Tensor:
    return torch.rand(B, T, D, generator=torch.Generator().manual_seed(seed))


def final_hidden(model, x) -> torch.Tensor:
    """The readout's input (RIM: the concatenated final h of all LSTMs), captured by a hook."""
    captured = []
    handle = model.readout.register_forward_pre_hook(lambda mod, args: captured.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    assert len(captured) == 1
    return captured[0]


# --------------------------------------------------------------------------- registry


def test_list_models_is_the_five_models():
    assert list_models() == MODELS


@pytest.mark.parametrize("name", MODELS)
def test_parameter_counts_positive_and_reported(name):
    model = build_model(name)
    n = count_parameters(model)
    assert n == sum(p.numel() for p in model.parameters()) and n > 1000
    counts = parameter_counts()
    assert set(counts) == set(MODELS) and counts[name] == n


def test_build_model_refuses_unknown_model_with_the_choices():
    with pytest.raises(KeyError) as err:
        build_model("transformer")
    msg = str(err.value)
    assert "transformer" in msg and all(n in msg for n in MODELS)


@pytest.mark.parametrize("name, settings, words", [
    ("rim", {"hidden_units": 32}, ["Unknown setting", "hidden_units"]),
    ("rim", {"hidden_size": "32"}, ["hidden_size", "int"]),
    ("rim", {"hidden_size": 32.0}, ["hidden_size", "int"]),
    ("rim", {"hidden_size": True}, ["hidden_size", "int"]),
    ("rim", {"alpha": "0.1"}, ["alpha", "float"]),
    ("rim", {"hidden_size": -1}, ["hidden_size", "at least 1"]),
    ("rim", {"hidden_size": 0}, ["hidden_size", "at least 1"]),
    ("rim", {"alpha": float("nan")}, ["alpha", "finite"]),
    ("rim", {"k_active": 7}, ["k_active", "num_units"]),
    ("rim", {"impl": "fast"}, ["impl must be one of fused, reference", "'fast'"]),
    ("rmc", {"impl": 3}, ["impl must be one of fused, reference", "3"]),
    ("entnet", {"num_slots": -3}, ["num_slots", "at least 1"]),
    ("indrnn", {"trace_groups": 5}, ["hidden_size", "trace_groups"]),
    ("indrnn", {"layers": 2}, ["Unknown setting", "layers"]),
])
def test_build_model_refuses_bad_settings_with_a_clear_message(name, settings, words):
    with pytest.raises(ValueError) as err:
        build_model(name, **settings)
    for w in words:
        assert w in str(err.value)


def test_make_config_accepts_ints_for_float_fields():
    assert make_config("rim", alpha=0).alpha == 0.0


# --------------------------------------------------------------------------- traces


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_trace_has_activity_for_every_unit(name, impl):
    model = tiny(name, impl=impl)
    x = rand_x(B=3, T=7)
    logits, trace = model(x, return_trace=True)
    assert logits.shape == (3, 4) and torch.isfinite(logits).all()
    act = trace["activity"]
    assert act.ndim == 3 and act.shape[:2] == (3, 7)
    assert len(model.unit_names) == act.shape[2] and len(set(model.unit_names)) == act.shape[2]
    assert torch.isfinite(act).all()
    for key, val in trace.items():
        assert isinstance(val, torch.Tensor) and not val.requires_grad, key
        assert val.shape[:2] == (3, 7), key
    # the trace does not change the prediction
    assert torch.equal(model(x), logits)


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_trace_keys_and_shapes(impl):
    n, Hi = 5, 2
    model = tiny("rim", impl=impl)
    B, T = 4, 6
    _, trace = model(rand_x(B=B, T=T), return_trace=True)
    assert {"active", "input_attention", "input_attention_heads", "comm_attention", "activity"} <= set(trace)
    assert trace["active"].shape == (B, T, n)
    assert trace["input_attention"].shape == (B, T, n)
    assert trace["input_attention_heads"].shape == (B, T, n, Hi)
    assert trace["comm_attention"].shape == (B, T, n, n)
    assert torch.equal(trace["activity"], trace["active"])
    # attention weights on the real row are probabilities; the head average is their mean
    heads = trace["input_attention_heads"]
    assert ((heads > 0) & (heads < 1)).all()
    assert (trace["input_attention"] - heads.mean(-1)).abs().max() < 1e-6
    # each LSTM's communication attention is a distribution over the n LSTMs
    comm = trace["comm_attention"]
    assert (comm >= 0).all()
    assert (comm.sum(-1) - 1).abs().max() < 1e-5


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_exactly_k_active_per_step_for_every_example(impl):
    for k in (1, 3, 5):
        model = tiny("rim", k_active=k, seed=k, impl=impl)
        _, trace = model(rand_x(B=16, T=12, seed=k), return_trace=True)
        active = trace["active"]
        assert set(active.unique().tolist()) <= {0.0, 1.0}
        assert (active.sum(-1) == k).all(), f"k={k}: {active.sum(-1)}"
    # the choice is not constant: different LSTMs get activated across rows and examples
    model = tiny("rim", impl=impl)
    _, trace = model(rand_x(B=16, T=12), return_trace=True)
    per_unit = trace["active"].mean((0, 1))
    assert (per_unit > 0).sum() > 3


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_active_ones_have_the_most_attention_on_the_row(impl):
    model = tiny("rim", impl=impl)
    _, trace = model(rand_x(B=8, T=10), return_trace=True)
    att, act = trace["input_attention"], trace["active"].bool()
    lowest_active = att.masked_fill(~act, float("inf")).min(-1).values
    highest_inactive = att.masked_fill(act, float("-inf")).max(-1).values
    assert (lowest_active >= highest_inactive).all()


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_inactive_lstms_keep_h_bit_for_bit(impl):
    """Final h after t rows vs after t+1 rows: an LSTM inactive at row t must not change."""
    model = tiny("rim", impl=impl)
    n, H = 5, 8
    x = rand_x(B=12, T=10, seed=3)
    checked = 0
    for t in range(1, 10):
        h_before = final_hidden(model, x[:, :t]).view(12, n, H)
        h_after = final_hidden(model, x[:, : t + 1]).view(12, n, H)
        _, trace = model(x[:, : t + 1], return_trace=True)
        active = trace["active"][:, t].bool()  # [B, n]
        for b in range(12):
            for i in range(n):
                if active[b, i]:
                    assert not torch.equal(h_after[b, i], h_before[b, i])
                else:
                    assert torch.equal(h_after[b, i], h_before[b, i]), (t, b, i)
                    checked += 1
    assert checked == 9 * 12 * (n - 3)
    # the trace agrees: the hidden-state norm of inactive LSTMs is unchanged exactly
    _, trace = model(x, return_trace=True)
    norm, act = trace["hidden_norm"], trace["active"].bool()
    same = norm[:, 1:] == norm[:, :-1]
    assert same[~act[:, 1:]].all()


def _single_unit_copy(full: torch.nn.Module, i: int, H: int) -> torch.nn.Module:
    """A RIM with every LSTM a copy of the full model's LSTM i, all of them always active."""
    cfg = dict(TINY["rim"], k_active=5, alpha=0.0, impl=full.config.impl)
    solo = build_model("rim", input_dim=8, num_classes=4, **cfg)
    state = {}
    n = cfg["num_units"]
    for key, ref in solo.state_dict().items():
        src = full.state_dict()[key]
        if key == "readout.weight":
            state[key] = src[:, i * H : (i + 1) * H].repeat(1, n)
        elif src.shape == ref.shape and src.ndim >= 1 and src.shape[0] == n and not key.startswith(("encoder", "key", "value", "readout")):
            state[key] = src[i : i + 1].expand_as(src).clone()  # per-LSTM stacked weight
        else:
            state[key] = src.clone()
    solo.load_state_dict(state)
    return solo


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_inactive_lstms_keep_c_too(impl):
    """c is not visible from outside, so replay: with communication off (alpha=0) an LSTM's
    final h must equal running that LSTM alone on exactly the rows where it was active. If
    inactive rows changed its c (or h), the replay would start later rows from another state."""
    H = 8
    full = tiny("rim", alpha=0.0, seed=5, impl=impl)
    x = rand_x(B=5, T=12, seed=7)
    replayed = 0
    for b in range(5):
        xb = x[b : b + 1]
        h_full = final_hidden(full, xb).view(5, H)
        _, trace = full(xb, return_trace=True)
        active = trace["active"][0].bool()  # [T, n]
        for i in range(5):
            rows = active[:, i].nonzero().flatten()
            if len(rows) == 0:
                assert torch.equal(h_full[i], torch.zeros(H))
                continue
            solo = _single_unit_copy(full, i, H)
            h_solo = final_hidden(solo, xb[:, rows]).view(5, H)[0]
            assert (h_full[i] - h_solo).abs().max() < 1e-6, (b, i)
            replayed += 1
            # and the replay is sensitive: one extra row (as if the LSTM had been active at
            # an inactive row) changes the result
            missing = (~active[:, i]).nonzero().flatten()
            if len(missing):
                extra = torch.sort(torch.cat([rows, missing[:1]])).values
                h_wrong = final_hidden(solo, xb[:, extra]).view(5, H)[0]
                assert (h_wrong - h_full[i]).abs().max() > 1e-4
    assert replayed >= 15


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_all_black_row_is_not_the_null_input(impl):
    """The null row has score 0, i.e. attention sigmoid(0) = 0.5 in every head. An all-black
    row is encoded first (e = b_e), so its scores differ from 0; without the encoder bias the
    black row would look exactly like the null row (the pitfall docs/method.md warns about)."""
    model = tiny("rim", impl=impl)
    black = torch.zeros(3, 6, 8)
    _, trace = model(black, return_trace=True)
    heads = trace["input_attention_heads"]
    assert (heads - 0.5).abs().max() > 1e-2
    # counter-check: the same model with a zero encoder bias sees the black row as "null"
    with torch.no_grad():
        model.encoder.bias.zero_()
    _, trace0 = model(black, return_trace=True)
    assert torch.equal(trace0["input_attention_heads"], torch.full_like(heads, 0.5))


@pytest.mark.parametrize("impl", IMPLS)
def test_rim_gradient_reaches_every_lstm(impl):
    model = tiny("rim", impl=impl)
    x, y = rand_x(B=32, T=10, seed=11), torch.arange(32) % 4
    F.cross_entropy(model(x), y).backward()
    n = 5
    for name in ("w_hq", "b_hq", "w_ih", "w_comm", "w_comm_out"):
        grad = getattr(model, name).grad
        assert grad is not None and grad.shape[0] == n, name
        per_lstm = grad.reshape(n, -1).abs().sum(1)
        assert (per_lstm > 0).all(), f"{name}: no gradient for LSTM(s) {(per_lstm == 0).nonzero().flatten().tolist()}"


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_every_parameter_gets_a_gradient(name, impl):
    model = tiny(name, impl=impl)
    x, y = rand_x(B=16, T=8, seed=12), torch.arange(16) % 4
    F.cross_entropy(model(x), y).backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, pname


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", MODELS)
def test_same_seed_same_logits_different_seed_different(name):
    x = rand_x()
    a = tiny(name, seed=0)(x)
    b = tiny(name, seed=0)(x)
    c = tiny(name, seed=1)(x)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    # the forward pass itself is deterministic (no dropout, no random state)
    m = tiny(name, seed=0)
    assert torch.equal(m(x), m(x))


# --------------------------------------------------------------------------- sequence lengths


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("T", [1, 10, 50])
def test_other_sequence_lengths(name, impl, T):
    model = tiny(name, impl=impl)
    logits, trace = model(rand_x(B=2, T=T), return_trace=True)
    assert logits.shape == (2, 4) and torch.isfinite(logits).all()
    assert trace["activity"].shape == (2, T, len(model.unit_names))
    if name == "rim":
        assert (trace["active"].sum(-1) == 3).all()


@pytest.mark.parametrize("name", MODELS)
def test_default_models_take_paper_shaped_input(name):
    for D in (28, 96):  # MNIST rows; CIFAR-10 / Animals-10 rows (32 px x 3 channels)
        model = build_model(name, input_dim=D, num_classes=10)
        out = model(torch.rand(2, 28 if D == 28 else 32, D))
        assert out.shape == (2, 10)


# --------------------------------------------------------------------------- learning


def bright_row_task(n: int, seed: int, T: int = 8, D: int = 8, classes: int = 4):
    """Class c: row 2c is bright, the others dim noise. Needs memory over up to T rows."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    x = 0.3 * torch.rand(n, T, D, generator=g)
    x[torch.arange(n), 2 * y] += 0.7
    return x, y


# (Adam steps, learning rate, batch): a few seconds each on a busy CPU; accuracy well above
# chance for every seed tried while tuning, not just the one used here.
RECIPES = {"rim": (50, 0.02, 64), "indrnn": (60, 0.02, 64)}
DEFAULT_RECIPE = (40, 0.03, 64)


@pytest.mark.parametrize("name,impl", VARIANTS, ids=VARIANT_IDS)
def test_every_model_learns_a_tiny_task(name, impl):
    steps, lr, batch = RECIPES.get(name, DEFAULT_RECIPE)
    torch.manual_seed(0)
    model = tiny(name, impl=impl)
    x, y = bright_row_task(256, seed=0)
    x_test, y_test = bright_row_task(200, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        idx = torch.randint(0, len(y), (batch,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    assert acc > 0.6, f"{name}: held-out accuracy {acc:.2f} (chance 0.25)"


def test_learning_check_can_fail_on_labels_without_signal():
    """Guard for the test above: on shuffled labels the same recipe stays near chance."""
    torch.manual_seed(0)
    model = tiny("parallel_lstm")
    x, _ = bright_row_task(256, seed=0)
    y = torch.randint(0, 4, (256,), generator=torch.Generator().manual_seed(5))
    x_test, _ = bright_row_task(200, seed=1)
    y_test = torch.randint(0, 4, (200,), generator=torch.Generator().manual_seed(6))
    opt = torch.optim.Adam(model.parameters(), lr=DEFAULT_RECIPE[1])
    for i in range(DEFAULT_RECIPE[0]):
        idx = torch.arange(i * 64, i * 64 + 64) % 256
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    assert acc < 0.45


def test_unit_names_are_readable():
    for name in MODELS:
        for label in tiny(name).unit_names:
            assert re.fullmatch(r"[A-Za-z]+ [0-9]+(-[0-9]+)?", label), label
