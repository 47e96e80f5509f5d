"""The download probe (core.data.online) and what an offline machine is told (Train page plan, CLI,
a download that fails anyway). The network is never touched: the probe's TCP connect is
replaced by a stand-in; the real thing runs in tests/browser/test_offline_netns.py."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core.data import datasets as D
from core.data import online as O
from core.data.plan import training_data_plan
from core.errors import DataUnavailableError

DOWN = OSError(-2, "Name or service not known")


@pytest.fixture
def net(monkeypatch):
    """Online allowed (RIMSCOPE_OFFLINE unset), with the connect replaced: ``net.up`` decides,
    ``net.calls`` counts the (host, port) tried."""
    monkeypatch.delenv("RIMSCOPE_OFFLINE", raising=False)
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)

    class Net:
        up = False
        delay = 0.0
        calls: list = []

    n = Net()
    n.calls = []

    def connect(host, port, timeout):
        n.calls.append((host, port))
        if n.delay:
            time.sleep(n.delay)
        if not n.up:
            raise DOWN

    monkeypatch.setattr(O, "_connect", connect)
    O.clear_cache()
    return n


def test_urls_are_torchvisions_own():
    import torchvision.datasets as tvd

    assert O.DOWNLOAD_URLS["mnist"] == tuple(tvd.MNIST.mirrors)
    assert O.DOWNLOAD_URLS["fashion_mnist"] == tuple(tvd.FashionMNIST.mirrors)
    assert O.DOWNLOAD_URLS["cifar10"] == (tvd.CIFAR10.url,)
    assert set(O.DOWNLOAD_URLS) == set(D._TV)


def test_forced_offline_touches_no_network(net, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_OFFLINE", "1")
    r = O.download_reachable("mnist")
    assert not r.reachable and "RIMSCOPE_OFFLINE=1" in r.reason and net.calls == []


def test_unreachable_then_reachable_with_the_cache(net, monkeypatch):
    r = O.download_reachable("mnist")
    assert not r.reachable and "Name or service not known" in r.reason
    assert sorted(net.calls) == [("ossci-datasets.s3.amazonaws.com", 443), ("yann.lecun.com", 80)]
    net.up = True
    assert not O.download_reachable("mnist").reachable and len(net.calls) == 2  # cached: not asked again
    assert O.download_reachable("mnist", refresh=True).reachable
    clock = [time.monotonic()]
    monkeypatch.setattr(O.time, "monotonic", lambda: clock[0])
    net.up = False
    O.clear_cache()
    O.download_reachable("mnist")
    asked = len(net.calls)
    clock[0] += O.TTL_S - 1
    O.download_reachable("mnist")
    assert len(net.calls) == asked  # within the TTL
    clock[0] += 2
    O.download_reachable("mnist")
    assert len(net.calls) == asked + 2  # expired: probed again (both mirrors)


def test_one_mirror_answering_is_enough(net, monkeypatch):
    def connect(host, port, timeout):
        if host == "yann.lecun.com":
            raise DOWN
    monkeypatch.setattr(O, "_connect", connect)
    r = O.download_reachable("mnist")
    assert r.reachable and "ossci-datasets" in r.reason


def test_a_hanging_resolver_is_cut_at_the_timeout(net):
    net.delay = 5.0
    t0 = time.monotonic()
    r = O.probe([("example.invalid", 443)], timeout=0.3)
    took = time.monotonic() - t0
    assert not r.reachable and "no answer within 0.3 s from example.invalid:443" in r.reason
    assert took < 2.0, took  # bounded by the timeout, not by the 5 s the connect takes
    assert all(t.daemon for t in threading.enumerate() if t.name == "rimscope-online-probe")


def test_the_proxy_is_probed_when_one_is_set(net, monkeypatch):
    monkeypatch.setenv("https_proxy", "http://proxy.local:3128")
    O.download_reachable("cifar10")
    assert net.calls == [("proxy.local", 3128)]


def test_train_plan_offline_says_so_and_how_to_get_data(net):
    with pytest.raises(DataUnavailableError) as ei:
        training_data_plan("mnist")
    msg = str(ei.value)
    assert msg.startswith("MNIST could not be downloaded: this machine has no internet connection. Put the data at ")
    assert "mnist/train.npz" in msg and "RIMSCOPE_DATA_DIR" in msg and "bundled MNIST sample" in msg
    assert "Name or service not known" in ei.value.detail and "Name or service" not in msg
    with pytest.raises(DataUnavailableError) as ei:
        training_data_plan("cifar10")
    assert "could not be downloaded" in str(ei.value) and "bundled" not in str(ei.value)  # no sample to offer
    net.up = True
    O.clear_cache()
    assert "torchvision download" in training_data_plan("mnist").source


def test_a_download_that_fails_anyway_ends_in_one_sentence(net, monkeypatch):
    """The probe answered, then the download broke (and the network is gone on the re-probe)."""
    import torchvision.datasets as tvd

    class Failing:
        def __init__(self, root, train=True, download=False):
            if download:
                net.up = False  # the connection went away during the download
                raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: Tried https://…, "
                                   "got: <urlopen error [Errno -2] Name or service not known>")
            raise RuntimeError("Dataset not found. You can use download=True to download it")

    monkeypatch.setattr(tvd, "MNIST", Failing)
    net.up = True
    with pytest.raises(DataUnavailableError) as ei:
        D.load_dataset("mnist", "train", allow_sample=False)
    assert str(ei.value).startswith("MNIST could not be downloaded: this machine has no internet connection.")
    assert ei.value.detail.startswith("RuntimeError: Error downloading train-images-idx3-ubyte.gz")
    # the source still answers: the sentence does not blame the connection
    monkeypatch.setattr(tvd, "MNIST", type("Broken", (), {"__init__": lambda self, *a, **k: (_ for _ in ()).throw(
        RuntimeError("HTTP Error 404"))}))
    net.up = True
    O.clear_cache()
    D._CACHE.clear()
    with pytest.raises(DataUnavailableError) as ei:
        D.load_dataset("mnist", "train", allow_sample=False)
    assert "the download failed although its source answers" in str(ei.value) and "404" in ei.value.detail
    D._CACHE.clear()
    assert D.load_dataset("mnist", "test").is_sample  # the test split still falls back to the sample


def test_cli_offline_prints_the_sentence_and_exits_nonzero(net, capsys, tmp_path):
    from core.training import cli

    assert cli.main(["--dataset", "mnist", "--model", "rim", "--iterations", "2", "--quiet",
                   "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "error: MNIST could not be downloaded: this machine has no internet connection." in err
    assert "reason: torchvision's download source did not answer" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_the_worker_keeps_the_raw_reason_apart(net, tmp_path, monkeypatch):
    """A run queued anyway (e.g. the network went away after the page looked) fails with the
    sentence as its message and the raw reason as its detail."""
    from core.runs.store import RunStore
    from core.runs.worker import run_worker
    from core.training.config import TrainConfig

    monkeypatch.setenv("RIMSCOPE_HOME", str(tmp_path / "home"))
    store = RunStore(max_concurrent=0)  # queue only: the worker runs here, in this process
    rid = store.submit(TrainConfig(dataset="mnist", model="rim", iterations=2, batch_size=4, eval_every=1,
                                   eval_samples=4, noise_draws=1))
    assert run_worker(store.run_dir(rid), install_signals=False) == "failed"
    info = store.get(rid)
    assert info.message.startswith("MNIST could not be downloaded: this machine has no internet connection.")
    assert "Name or service not known" in info.detail


def test_a_data_folder_needs_no_probe(net, tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "mnist").mkdir()
    for split in ("train", "test"):
        np.savez(tmp_path / "mnist" / f"{split}.npz", x=rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
                 y=np.arange(5, dtype=np.int64), classes=np.array([str(i) for i in range(10)]))
    assert "npz folder" in training_data_plan("mnist", tmp_path).source and net.calls == []
