"""The workspace pool behind rim's and rmc's hand-written backward passes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from core.models import rim_kernel, rmc_kernel
from core.models._workspace import WorkspacePool
from core.models.registry import build_model


def test_pool_reuses_one_workspace_per_key_and_bounds_keys():
    pool = WorkspacePool(max_keys=2)
    built = []

    def build():
        built.append(1)
        return {"x": torch.zeros(3)}

    a = pool.take("a", build)
    assert a["key"] == "a" and len(built) == 1
    pool.give_back(a)
    assert pool.take("a", build) is a and len(built) == 1  # reused, not rebuilt
    b = pool.take("a", build)  # the pool is empty for "a" now: a second, new one
    assert b is not a and len(built) == 2
    pool.give_back(a)
    pool.give_back(b)  # only one free workspace per key is kept
    assert pool.take("a", build) is a and pool.take("a", build) is not b
    for key in ("k1", "k2", "k3"):
        pool.give_back(pool.take(key, build))
    assert len(pool._free) == 2 and "k1" not in pool._free  # oldest key dropped


def test_training_steps_reuse_the_workspace():
    """Two training steps of rim and rmc on the same shapes allocate their workspace once."""
    torch.manual_seed(0)
    x, y = torch.rand(4, 28, 28), torch.randint(0, 10, (4,))
    for name, module in (("rim", rim_kernel), ("rmc", rmc_kernel)):
        model = build_model(name, input_dim=28, num_classes=10)
        seen = []
        original = module._new_workspace

        def counting(*args, _orig=original, _seen=seen, **kwargs):
            _seen.append(1)
            return _orig(*args, **kwargs)

        module._new_workspace = counting
        try:
            for _ in range(3):
                model.zero_grad()
                F.cross_entropy(model(x), y).backward()
        finally:
            module._new_workspace = original
        assert len(seen) <= 1, f"{name}: a new workspace on {len(seen)} of 3 steps"


def test_backward_twice_through_one_forward_says_what_to_do():
    import pytest

    torch.manual_seed(0)
    x, y = torch.rand(2, 28, 28), torch.randint(0, 10, (2,))
    for name in ("rim", "rmc"):
        model = build_model(name, input_dim=28, num_classes=10)
        loss = F.cross_entropy(model(x), y)
        loss.backward(retain_graph=True)
        with pytest.raises(RuntimeError, match="run the forward again"):
            loss.backward()
