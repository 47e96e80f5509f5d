"""--device: CPU everywhere, CUDA where there is a GPU (tests marked ``cuda`` run only there)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.data.datasets import LoadedData
from core.errors import ConfigError
from core.models.registry import build_model
from core.training.config import TrainConfig, resolve_device
from core.training.loop import train
from core.training.weights import load_weights, run_metadata, save_weights

TINY = {"hidden_size": 8, "num_units": 3, "k_active": 2}


def data(n, seed):
    r = np.random.default_rng(seed)
    y = r.integers(0, 10, n).astype(np.int64)
    x = r.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    return LoadedData(x, y, [str(i) for i in range(10)], "synthetic", np.arange(n))


def cfg(**kw):
    base = dict(dataset="fashion_mnist", model="rim", iterations=4, batch_size=8, eval_every=2, eval_samples=10,
                noise_draws=1, threads=1, model_overrides=dict(TINY))
    return TrainConfig(**{**base, **kw})


def test_device_setting_is_validated():
    with pytest.raises(ConfigError, match="Device must be one of auto, cpu, cuda"):
        cfg(device="tpu").validate()
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where there is no GPU")
def test_cuda_without_a_gpu_says_so():
    with pytest.raises(ConfigError, match="torch sees no GPU"):
        train(cfg(device="cuda"), data(40, 0), data(10, 1))
    with pytest.raises(ConfigError, match="torch sees no GPU"):  # said by the one validation, before a run starts
        cfg(device="cuda").validate()


def test_cpu_run_records_its_device_and_returns_a_cpu_model(tmp_path):
    r = train(cfg(device="cpu"), data(40, 0), data(10, 1))
    assert r.metrics["device"] == "cpu"
    assert all(p.device.type == "cpu" for p in r.model.parameters())
    meta = run_metadata(cfg(device="cpu"), r, data(40, 0), data(10, 1))
    save_weights(r.model, meta, tmp_path / "m")
    model, meta2 = load_weights(tmp_path / "m")
    assert meta2["train_config"]["device"] == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto means cpu only without a GPU")
def test_auto_equals_cpu_without_a_gpu():
    a = train(cfg(device="auto"), data(40, 0), data(10, 1))
    b = train(cfg(device="cpu"), data(40, 0), data(10, 1))
    assert a.history == b.history


# ------------------------------------------------------------------ on a GPU machine only
@pytest.mark.cuda
@pytest.mark.parametrize("name", ["rim", "rmc", "parallel_lstm", "entnet", "indrnn"])
def test_cuda_forward_and_gradients_match_cpu(name):
    """The fused rim/rmc kernels (and the others) on CUDA give the CPU's logits and gradients."""
    torch.manual_seed(0)
    m_cpu = build_model(name).double()
    m_gpu = build_model(name).double()
    m_gpu.load_state_dict(m_cpu.state_dict())
    m_gpu.cuda()
    x = torch.rand(16, 28, 28, dtype=torch.double)
    torch.manual_seed(1)
    out_c = m_cpu(x)
    torch.manual_seed(1)
    out_g = m_gpu(x.cuda())
    assert torch.allclose(out_c, out_g.cpu(), atol=1e-9)
    out_c.sum().backward()
    out_g.sum().backward()
    for (n, pc), (_, pg) in zip(m_cpu.named_parameters(), m_gpu.named_parameters()):
        assert torch.allclose(pc.grad, pg.grad.cpu(), atol=1e-8), n


@pytest.mark.cuda
def test_cuda_training_run_and_model_is_device_independent(tmp_path):
    r = train(cfg(device="cuda", iterations=6), data(80, 0), data(20, 1))
    assert r.metrics["device"].startswith("cuda") and r.status == "completed"
    meta = run_metadata(cfg(device="cuda"), r, data(80, 0), data(20, 1))
    save_weights(r.model, meta, tmp_path / "g")
    model, _ = load_weights(tmp_path / "g")  # loads on a CPU-only machine as well
    assert next(model.parameters()).device.type == "cpu"
