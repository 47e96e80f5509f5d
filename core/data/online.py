"""Can torchvision download a data set from here? A short, cached probe of its download source.

A machine without internet is detected, not assumed: before a run is queued (Train page, CLI)
``download_reachable(dataset)`` opens a TCP connection to the hosts torchvision downloads that
data set from (through the proxy when one is configured, as urllib would). The answer comes
within ``TIMEOUT_S`` (name resolution included: it runs in threads that are waited for at most
that long) and is cached for ``TTL_S`` seconds per data set. ``RIMSCOPE_OFFLINE=1`` forces
"offline" without any network access.

The URLs are torchvision's own (``MNIST.mirrors``, ``FashionMNIST.mirrors``, ``CIFAR10.url``),
written out here so the probe does not import torchvision (seconds); a test checks they agree.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import paths

TIMEOUT_S = 2.0
TTL_S = 60.0

DOWNLOAD_URLS = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
    "fashion_mnist": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
    "cifar10": ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
}
NO_INTERNET = "this machine has no internet connection"


@dataclass(frozen=True)
class Reachability:
    reachable: bool
    reason: str  # one plain sentence part: why not (or which host answered)
    hosts: tuple = ()  # the (host, port) pairs probed


def _endpoints(urls) -> list[tuple[str, int]]:
    """(host, port) to connect to for each URL: the proxy urllib would use, else the URL's host."""
    proxies = urllib.request.getproxies()
    out = []
    for url in urls:
        u = urlsplit(url)
        proxy = proxies.get(u.scheme)
        if proxy and not urllib.request.proxy_bypass(u.hostname or ""):
            p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            out.append((p.hostname, p.port or 80))
        else:
            out.append((u.hostname, u.port or (443 if u.scheme == "https" else 80)))
    return list(dict.fromkeys(out))


def _connect(host: str, port: int, timeout: float) -> None:
    """Open and close one TCP connection; raises OSError when it cannot."""
    socket.create_connection((host, port), timeout=timeout).close()


def probe(endpoints, timeout: float = TIMEOUT_S) -> Reachability:
    """Try every endpoint at once; reachable as soon as one accepts, unreachable after ``timeout``."""
    endpoints = tuple(endpoints)
    done = threading.Event()
    results: dict = {}
    lock = threading.Lock()

    def attempt(hp):
        try:
            _connect(hp[0], hp[1], timeout)
            outcome = None
        except OSError as exc:
            outcome = exc
        with lock:
            results[hp] = outcome
            if outcome is None or len(results) == len(endpoints):
                done.set()

    for hp in endpoints:  # daemon threads: a resolver stuck past the timeout never blocks exit
        threading.Thread(target=attempt, args=(hp,), daemon=True, name="rimscope-online-probe").start()
    done.wait(timeout)
    with lock:
        seen = dict(results)
    ok = [hp for hp, err in seen.items() if err is None]
    if ok:
        return Reachability(True, f"{ok[0][0]}:{ok[0][1]} answered", endpoints)
    why = "; ".join(f"{h}:{p}: {type(e).__name__}: {e}" for (h, p), e in seen.items())
    silent = [f"{h}:{p}" for h, p in endpoints if (h, p) not in seen]
    if silent:
        why = (why + "; " if why else "") + f"no answer within {timeout:g} s from {', '.join(silent)}"
    return Reachability(False, why, endpoints)


_CACHE: dict = {}
_LOCK = threading.Lock()


def download_reachable(dataset: str, *, refresh: bool = False) -> Reachability:
    """Whether torchvision's download source for ``dataset`` answers from here (cached ``TTL_S``)."""
    if paths.offline():
        return Reachability(False, "RIMSCOPE_OFFLINE=1 is set")
    urls = DOWNLOAD_URLS.get(dataset)
    if not urls:
        return Reachability(False, "torchvision does not download this data set")
    now = time.monotonic()
    with _LOCK:
        hit = _CACHE.get(dataset)
        if hit is not None and not refresh and now - hit[0] < TTL_S:
            return hit[1]
    result = probe(_endpoints(urls))
    with _LOCK:
        _CACHE[dataset] = (time.monotonic(), result)
    return result


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
