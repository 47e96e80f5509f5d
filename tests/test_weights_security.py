"""Reliability and security of models (safetensors weights + JSON metadata).

A model is user input: an upload on a page, or a file someone dropped in ``runs/``.
Loading must never unpickle, never allocate what the metadata asks for before checking it,
and refuse every malformed or hostile file with a ``WeightsError`` whose message names
the problem, never with another exception.
"""

from __future__ import annotations

import ast
import io
import json
import pickle
import struct
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save as st_save
from torch.overrides import TorchFunctionMode

from core.errors import WeightsError
from core.models.registry import build_model, list_models
from core.training import weights as ck
from core.training.weights import load_weights, load_weights_bytes, save_weights, weights_bytes
from tests.run_helpers import SMALL as TINY

ROOT = Path(__file__).resolve().parent.parent
META = {"dataset": "mnist", "run_name": "tiny run", "title": "RIM (tiny)", "seed": 0}


def tiny(name="rim", seed=0, **extra):
    torch.manual_seed(seed)
    return build_model(name, input_dim=28, num_classes=10, **{**TINY[name], **extra})


class Payload:
    """Unpickling this object opens (creates) ``marker`` for writing: stands in for any code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("name", list_models())
def test_round_trip_gives_the_same_logits(name, tmp_path):
    model = tiny(name)
    model.eval()
    x = torch.rand(3, 28, 28, generator=torch.Generator().manual_seed(0))
    path = save_weights(model, META, tmp_path / "sub" / f"{name}_run")
    assert path == tmp_path / "sub" / f"{name}_run.safetensors"
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [f"{name}_run.json", f"{name}_run.safetensors"]
    loaded, meta = load_weights(path, expected_dataset="mnist")
    assert meta["model"] == name and meta["dataset"] == "mnist" and meta["format"] == ck.FORMAT
    assert meta["config"] == {**meta["config"], **TINY[name], "input_dim": 28, "num_classes": 10}
    assert not loaded.training
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    # the stem and the .json path work as well; bytes give the same model
    for p in (tmp_path / "sub" / f"{name}_run", tmp_path / "sub" / f"{name}_run.json"):
        assert load_weights(p)[1] == meta
    w, m = weights_bytes(model, META)
    with torch.no_grad():
        assert torch.equal(load_weights_bytes(w, m)[0](x), model(x))


def test_diverged_history_is_stored_as_strict_json():
    w, m = weights_bytes(tiny(), {**META, "history": {"loss": [2.3, float("nan"), float("inf")]}})
    assert json.loads(m)["history"]["loss"] == [2.3, None, None]
    load_weights_bytes(w, m)


def test_missing_files_are_named(tmp_path):
    save_weights(tiny(), META, tmp_path / "a")
    (tmp_path / "a.json").unlink()
    with pytest.raises(WeightsError, match=r"a\.json is missing"):
        load_weights(tmp_path / "a")
    with pytest.raises(WeightsError, match=r"b\.safetensors is missing"):
        load_weights(tmp_path / "b")


# --------------------------------------------------------------------------- bad models


@pytest.fixture(scope="module")
def good():
    model = tiny()
    w, m = weights_bytes(model, META)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    return {"w": w, "m": m, "meta": json.loads(m), "state": state}


def meta_with(good, **changes):
    meta = json.loads(good["m"])
    for key, val in changes.items():
        meta[key] = val
    return json.dumps(meta).encode()


def config_with(good, **changes):
    meta = json.loads(good["m"])
    meta["config"].update(changes)
    return json.dumps(meta).encode()


def config_without(good, key):
    meta = json.loads(good["m"])
    del meta["config"][key]
    return json.dumps(meta).encode()


def state_with(good, fn):
    state = {k: v.clone() for k, v in good["state"].items()}
    fn(state)
    return st_save(state)


def torch_save_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def nested(depth):
    return b"[" * depth + b"]" * depth


def _set(d, k, v):
    d[k] = v


# name -> (builder(good, marker) -> (weights, metadata, kwargs), words any of which the message must contain)
BAD = {
    # pickles and PyTorch files: refused before anything looks inside
    "pickle protocol 0": (lambda g, mk: (pickle.dumps(Payload(mk), protocol=0), g["m"], {}), ["safetensors"]),
    "pickle protocol 1": (lambda g, mk: (pickle.dumps(Payload(mk), protocol=1), g["m"], {}), ["safetensors"]),
    "pickle protocol 2": (lambda g, mk: (pickle.dumps(Payload(mk), protocol=2), g["m"], {}), ["pickle"]),
    "pickle protocol 4": (lambda g, mk: (pickle.dumps(Payload(mk), protocol=4), g["m"], {}), ["pickle"]),
    "pickle protocol 5": (lambda g, mk: (pickle.dumps(Payload(mk), protocol=5), g["m"], {}), ["pickle"]),
    "pickled state dict": (lambda g, mk: (pickle.dumps({"x": Payload(mk), **g["state"]}), g["m"], {}), ["pickle"]),
    "torch.save zip": (lambda g, mk: (torch_save_bytes(g["state"]), g["m"], {}), ["pickle"]),
    "torch.save zip with payload": (lambda g, mk: (torch_save_bytes({"w": Payload(mk)}), g["m"], {}), ["pickle"]),
    "torch.save legacy": (lambda g, mk: (torch_save_bytes({"w": Payload(mk)}, _use_new_zipfile_serialization=False),
                                         g["m"], {}), ["pickle"]),
    # broken or hostile safetensors
    "empty weights": (lambda g, mk: (b"", g["m"], {}), ["empty"]),
    "random bytes": (lambda g, mk: (np.random.default_rng(0).bytes(4096), g["m"], {}), ["safetensors"]),
    "truncated safetensors": (lambda g, mk: (g["w"][: len(g["w"]) // 2], g["m"], {}), ["safetensors"]),
    "header length beyond the file": (lambda g, mk: (struct.pack("<Q", 2**62) + b"{}", g["m"], {}), ["safetensors"]),
    "header not JSON": (lambda g, mk: (struct.pack("<Q", 8) + b"notjson!", g["m"], {}), ["safetensors"]),
    "oversized weights": (lambda g, mk: (b"\x00" * (ck.MAX_WEIGHTS_BYTES + 1), g["m"], {}), ["too large"]),
    "missing tensor": (lambda g, mk: (state_with(g, lambda s: s.pop("w_ih")), g["m"], {}), ["lack", "w_ih"]),
    "extra tensor": (lambda g, mk: (state_with(g, lambda s: _set(s, "backdoor.weight", torch.zeros(2))), g["m"], {}),
                     ["does not have", "backdoor"]),
    "wrong shape": (lambda g, mk: (state_with(g, lambda s: _set(s, "readout.weight", s["readout.weight"].t().contiguous())),
                                   g["m"], {}), ["shape", "readout.weight"]),
    "float64 weights": (lambda g, mk: (state_with(g, lambda s: s.update({k: v.double() for k, v in s.items()})),
                                       g["m"], {}), ["dtype", "float64"]),
    "float16 tensor": (lambda g, mk: (state_with(g, lambda s: _set(s, "w_hq", s["w_hq"].half())), g["m"], {}), ["dtype"]),
    "integer tensor": (lambda g, mk: (state_with(g, lambda s: _set(s, "b_hq", s["b_hq"].long())), g["m"], {}), ["dtype"]),
    "NaN weights": (lambda g, mk: (state_with(g, lambda s: s["w_comm"].view(-1).__setitem__(3, float("nan"))),
                                   g["m"], {}), ["NaN", "w_comm"]),
    "infinite weights": (lambda g, mk: (state_with(g, lambda s: s["readout.bias"].fill_(float("inf"))), g["m"], {}),
                         ["infinite"]),
    "weights of another model": (lambda g, mk: (st_save(tiny("parallel_lstm").state_dict()), g["m"], {}), ["lack"]),
    "weights of a bigger config": (lambda g, mk: (st_save(tiny(hidden_size=16).state_dict()), g["m"], {}), ["shape"]),
    # metadata that is not a model's
    "metadata empty": (lambda g, mk: (g["w"], b"", {}), ["empty"]),
    "metadata malformed": (lambda g, mk: (g["w"], b'{"model": "rim", ', {}), ["JSON"]),
    "metadata a list": (lambda g, mk: (g["w"], b"[1, 2, 3]", {}), ["JSON object"]),
    "metadata a string": (lambda g, mk: (g["w"], b'"rim"', {}), ["JSON object"]),
    "metadata not UTF-8": (lambda g, mk: (g["w"], b"\xff\xfe{\x00}", {}), ["JSON"]),
    "metadata nested 100000 deep": (lambda g, mk: (g["w"], nested(100_000), {}), ["nested", "JSON"]),
    "metadata oversized": (lambda g, mk: (g["w"], b" " * (ck.MAX_META_BYTES + 1), {}), ["too large"]),
    "metadata with a 5000-digit number": (lambda g, mk: (g["w"], b'{"model": "rim", "seed": ' + b"9" * 5000 + b"}", {}),
                                          ["JSON"]),
    "unknown model": (lambda g, mk: (g["w"], meta_with(g, model="resnet"), {}), ["a model RIMscope does not have", "resnet"]),
    "model not named": (lambda g, mk: (g["w"], meta_with(g, model=None), {}), ["no \"model\" entry"]),
    "model name not a string": (lambda g, mk: (g["w"], meta_with(g, model=["rim"]), {}), ["a model RIMscope does not have"]),
    "config missing": (lambda g, mk: (g["w"], meta_with(g, config=None), {}), ["config"]),
    "config not an object": (lambda g, mk: (g["w"], meta_with(g, config=[8, 3]), {}), ["config"]),
    "config unknown field": (lambda g, mk: (g["w"], config_with(g, wings=2), {}), ["wings"]),
    "config string size": (lambda g, mk: (g["w"], config_with(g, hidden_size="8"), {}), ["hidden_size"]),
    "config float size": (lambda g, mk: (g["w"], config_with(g, hidden_size=8.5), {}), ["hidden_size"]),
    "config bool size": (lambda g, mk: (g["w"], config_with(g, hidden_size=True), {}), ["hidden_size"]),
    "config null size": (lambda g, mk: (g["w"], config_with(g, hidden_size=None), {}), ["hidden_size"]),
    "config list size": (lambda g, mk: (g["w"], config_with(g, hidden_size=[8]), {}), ["hidden_size"]),
    "config negative size": (lambda g, mk: (g["w"], config_with(g, hidden_size=-8), {}), ["hidden_size"]),
    "config zero size": (lambda g, mk: (g["w"], config_with(g, hidden_size=0), {}), ["not valid"]),
    "config k_active 0": (lambda g, mk: (g["w"], config_with(g, k_active=0), {}), ["k_active"]),
    "config k_active > units": (lambda g, mk: (g["w"], config_with(g, k_active=TINY["rim"]["num_units"] + 1), {}), ["k_active"]),
    "config without input_dim": (lambda g, mk: (g["w"], config_without(g, "input_dim"), {}), ["input_dim"]),
    "config NaN alpha": (lambda g, mk: (g["w"], config_with(g, alpha=float("nan")), {}), ["alpha"]),
    "config infinite alpha": (lambda g, mk: (g["w"], config_with(g, alpha=float("inf")), {}), ["alpha"]),
    "rmc with 0 heads": (lambda g, mk: (g["w"], meta_with(g, model="rmc", config={**tiny("rmc").config.__dict__,
                                                                                   "num_heads": 0}), {}), ["not valid"]),
    "indrnn with 0 trace groups": (lambda g, mk: (g["w"], meta_with(g, model="indrnn", config={
        **tiny("indrnn").config.__dict__, "trace_groups": 0}), {}), ["not valid"]),
    # sizes that would need gigabytes to terabytes if built
    "config hidden_size 10**9": (lambda g, mk: (g["w"], config_with(g, hidden_size=10**9), {}), ["hidden_size"]),
    "config input_dim 10**12": (lambda g, mk: (g["w"], config_with(g, input_dim=10**12), {}), ["input_dim"]),
    "config num_classes 10**7": (lambda g, mk: (g["w"], config_with(g, num_classes=10**7), {}), ["num_classes"]),
    "config hidden_size 60000": (lambda g, mk: (g["w"], config_with(g, hidden_size=60_000), {}), ["MB", "hidden_size"]),
    "config hidden_size 2048": (lambda g, mk: (g["w"], config_with(g, hidden_size=2048), {}), ["MB"]),
    # names that end up in paths and pages
    "dataset path traversal": (lambda g, mk: (g["w"], meta_with(g, dataset="../../etc"), {}), ["unsafe", "dataset"]),
    "run_name path traversal": (lambda g, mk: (g["w"], meta_with(g, run_name="../../etc/passwd"), {}), ["run_name"]),
    "run_name absolute path": (lambda g, mk: (g["w"], meta_with(g, run_name="/etc/passwd"), {}), ["run_name"]),
    "run_name backslashes": (lambda g, mk: (g["w"], meta_with(g, run_name="..\\..\\windows"), {}), ["run_name"]),
    "title with control characters": (lambda g, mk: (g["w"], meta_with(g, title="ok\x00\n\x1b[31m"), {}), ["title"]),
    "title too long": (lambda g, mk: (g["w"], meta_with(g, title="a" * 500), {}), ["title"]),
    "dataset not a string": (lambda g, mk: (g["w"], meta_with(g, dataset={"name": "mnist"}), {}), ["dataset"]),
    "model for another data set": (lambda g, mk: (g["w"], g["m"], {"expected_dataset": "cifar10"}),
                                        ["mnist", "cifar10"]),
    "model without a data set": (lambda g, mk: (g["w"], meta_with(g, dataset=None), {"expected_dataset": "mnist"}),
                                      ["None", "mnist"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_model_is_refused(case, good, tmp_path):
    build, words = BAD[case]
    marker = tmp_path / "PWNED"
    weights, meta, kwargs = build(good, marker)
    with pytest.raises(WeightsError) as err:
        load_weights_bytes(weights, meta, **kwargs)
    msg = str(err.value)
    assert any(w in msg for w in words), f"{case}: message {msg!r} names none of {words}"
    assert 0 < len(msg) < 600 and "Traceback" not in msg
    assert not marker.exists(), f"{case}: the payload ran"


def test_all_bad_models_summary(good, tmp_path, capsys):
    """Every case above in one go: counted, and any exception other than WeightsError is a crash."""
    crashes, marker = [], tmp_path / "PWNED"
    for case, (build, _) in BAD.items():
        weights, meta, kwargs = build(good, marker)
        try:
            load_weights_bytes(weights, meta, **kwargs)
            crashes.append(f"{case}: accepted")
        except WeightsError:
            pass
        except BaseException as exc:  # noqa: B036 - a crash of any kind is what we count
            crashes.append(f"{case}: {type(exc).__name__}: {exc}"[:200])
    with capsys.disabled():
        print(f"\n{len(BAD)} bad models tried, {len(crashes)} crashes")
    assert not crashes, crashes
    assert not marker.exists()
    assert len(BAD) >= 60


def test_the_pickle_payload_is_live(tmp_path):
    """Guard: the payload used above really does run when unpickled, so its absence means
    the loader never unpickled it."""
    marker = tmp_path / "control"
    f = pickle.loads(pickle.dumps(Payload(marker), protocol=4))
    f.close()
    assert marker.exists()


def test_pickle_refused_through_files_too(tmp_path, good):
    marker = tmp_path / "PWNED"
    (tmp_path / "evil.safetensors").write_bytes(torch_save_bytes({"w": Payload(marker)}))
    (tmp_path / "evil.json").write_bytes(good["m"])
    with pytest.raises(WeightsError, match="pickle"):
        load_weights(tmp_path / "evil.safetensors")
    assert not marker.exists()


class AllocationMonitor(TorchFunctionMode):
    """Records the size of every tensor a torch call creates (or fails to create)."""

    def __init__(self):
        super().__init__()
        self.sizes, self.failures = [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            out = func(*args, **(kwargs or {}))
        except Exception as exc:  # e.g. "can't allocate memory" / "Storage size ... overflowed"
            self.failures.append(f"{getattr(func, '__name__', func)}: {exc}"[:200])
            raise
        if isinstance(out, torch.Tensor) and out.device.type != "meta":
            self.sizes.append(out.numel() * out.element_size())
        return out


@pytest.mark.parametrize("changes", [
    {"hidden_size": 2048},  # 1.6 GB if built: fits in memory, so it would really be allocated
    {"hidden_size": 60_000},  # 345 GB
    {"hidden_size": 10**9},
    {"input_dim": 10**6},
    {"num_units": 60_000, "k_active": 1},
    {"embed_dim": 60_000, "input_heads": 60_000},
])
def test_huge_configs_are_refused_before_allocating(good, changes):
    monitor = AllocationMonitor()
    t0 = time.perf_counter()
    with monitor, pytest.raises(WeightsError, match="larger than any model|out of range"):
        load_weights_bytes(good["w"], config_with(good, **changes))
    assert time.perf_counter() - t0 < 5.0
    assert not monitor.failures, monitor.failures
    assert sum(monitor.sizes) < ck.MAX_WEIGHTS_BYTES, f"{sum(monitor.sizes) / 2**20:.0f} MB allocated"


def test_the_allocation_monitor_sees_big_allocations():
    """Guard for the test above: building a 1.6 GB model directly is recorded as such."""
    monitor = AllocationMonitor()
    with monitor:
        torch.empty(300, 1000, 1000)
    assert sum(monitor.sizes) == 300 * 1000 * 1000 * 4


def test_the_size_guard_is_not_too_tight():
    """The paper-sized models of every kind, on the largest inputs (RGB rows), still load."""
    for name in list_models():
        model = build_model(name, input_dim=96, num_classes=10)
        w, m = weights_bytes(model, {"dataset": "cifar10"})
        loaded, _ = load_weights_bytes(w, m, expected_dataset="cifar10")
        assert sum(p.numel() for p in loaded.parameters()) == sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------- no unpickling anywhere in core


UNPICKLING_MODULES = ("pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal")
UNPICKLING_CALLS = ("torch.load", "torch.serialization.load", "torch.jit.load", "torch.hub.load",
                    "pickle.load", "pickle.loads", "Unpickler")


def unpickling_offences(source: str, name: str) -> list[str]:
    """Imports of pickle-like modules, calls that unpickle, and np.load allowing pickles."""
    offences = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any(m and m.split(".")[0] in UNPICKLING_MODULES for m in mods):
                offences.append(f"{name}:{node.lineno} imports {mods}")
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        where = f"{name}:{node.lineno} {func}"
        if func in UNPICKLING_CALLS or func.endswith(tuple("." + c for c in UNPICKLING_CALLS)):
            offences.append(where)
        if func.endswith("load") and func.split(".")[0] in ("np", "numpy"):
            for kw in node.keywords:
                if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    offences.append(f"{where} allow_pickle={ast.unparse(kw.value)}")
                if kw.arg is None:  # **kwargs could carry allow_pickle=True
                    offences.append(f"{where} **{ast.unparse(kw.value)}")
    return offences


def test_core_never_unpickles():
    files = sorted((ROOT / "core").rglob("*.py"))
    assert len(files) >= 10 and any(f.name == "weights.py" for f in files)
    offences = []
    for path in files:
        offences += unpickling_offences(path.read_text(), str(path.relative_to(ROOT)))
    assert not offences, offences


@pytest.mark.parametrize("line", [
    "import pickle", "from pickle import loads", "import joblib", "torch.load('a.pt')",
    "torch.load(f, weights_only=True)", "pickle.loads(b'')", "x = pickle.Unpickler(f).load()",
    "np.load('x.npz', allow_pickle=True)", "numpy.load(p, allow_pickle=flag)", "np.load(p, **opts)",
])
def test_the_unpickling_scan_finds_offences(line):
    """Guard for the scan above: it flags each forbidden construct..."""
    assert unpickling_offences(line, "x.py"), line


@pytest.mark.parametrize("line", [
    "np.load(p, allow_pickle=False)", "np.load(p)", "model.load_state_dict(t)", "st_load_bytes(w)",
    "json.loads(s)", "# torch.load is never used", "'pickle.loads(x)'",
])
def test_the_unpickling_scan_allows_safe_code(line):
    """...and does not flag safe ones (comments, strings, safetensors, np.load without pickles)."""
    assert unpickling_offences(line, "x.py") == []
