"""What the input attention of ``rim`` actually does: how decided, how stable, how informative.

Three numbers a careful reader asks for before believing that "attention picks the right
LSTMs" (all computed on a fixed set of images, deterministic for a given seed):

* **margin**: at every step, the head-averaged input-attention weight of the k-th ranked LSTM
  minus that of the (k+1)-th. Near 0 the choice hinges on tiny score differences (a coin
  flip in disguise); large margins mean a decided selection. Undefined when k = n.
* **stability**: the share of steps whose active *set* changes when Gaussian noise (variance
  0.01 by default, the paper's test) is added to the image.
* **class information**: the mutual information (bits) between the class and the active set
  at each step, averaged over steps, with the same quantity after shuffling the labels (the
  plug-in estimate's bias, i.e. what chance gives on this many images).

For the ``random`` ablation the same numbers are the chance level: its mask never looks at
the input, so any stability or information above it comes from the input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.transforms import add_noise, to_sequence


@torch.no_grad()
def traces(model, images, batch_size: int = 500) -> dict[str, np.ndarray]:
    """``active`` [N,T,n] and ``input_attention`` [N,T,n] for many images."""
    was = model.training
    model.eval()
    act, att = [], []
    try:
        for i in range(0, len(images), batch_size):
            _, tr = model(to_sequence(images[i : i + batch_size]), return_trace=True)
            act.append(tr["active"].numpy())
            att.append(tr["input_attention"].numpy())
    finally:
        model.train(was)
    return {"active": np.concatenate(act) > 0.5, "input_attention": np.concatenate(att)}


def selection_margins(attention: np.ndarray, k: int) -> np.ndarray:
    """k-th minus (k+1)-th largest weight at every step: [N, T] (NaN everywhere when k = n)."""
    n = attention.shape[-1]
    if k >= n:
        return np.full(attention.shape[:-1], np.nan)
    s = -np.sort(-attention, axis=-1)
    return s[..., k - 1] - s[..., k]


def set_codes(active: np.ndarray) -> np.ndarray:
    """Each step's active set as one integer (bit i = LSTM i active): [N, T]."""
    return (active.astype(np.int64) << np.arange(active.shape[-1])).sum(-1)


def mutual_information(labels: np.ndarray, codes: np.ndarray) -> float:
    """Plug-in mutual information (bits) between two discrete variables of equal length."""
    labels, codes = np.asarray(labels), np.asarray(codes)
    _, li = np.unique(labels, return_inverse=True)
    _, ci = np.unique(codes, return_inverse=True)
    joint = np.zeros((li.max() + 1, ci.max() + 1))
    np.add.at(joint, (li, ci), 1)
    p = joint / joint.sum()
    pl, pc = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log2(p[nz] / (pl @ pc)[nz])).sum())


def class_information(labels: np.ndarray, active: np.ndarray) -> float:
    """Mean over steps of I(class; active set at that step), bits."""
    codes = set_codes(active)
    return float(np.mean([mutual_information(labels, codes[:, t]) for t in range(codes.shape[1])]))


@dataclass
class SelectionReport:
    k: int
    n: int
    images: int
    margins: np.ndarray  # [N*T] flattened (NaN when k = n)
    changed_share: float  # share of steps whose active set changes under noise
    noise_var: float
    information_bits: float  # mean over steps of I(class; active set)
    chance_bits: float  # the same with shuffled labels
    max_bits: float  # log2(number of classes): the most there could be

    def margin_quantiles(self, qs=(0.1, 0.25, 0.5, 0.75, 0.9)) -> dict[float, float]:
        m = self.margins[np.isfinite(self.margins)]
        return {q: (float(np.quantile(m, q)) if len(m) else float("nan")) for q in qs}

    def summary(self) -> dict:
        return {"k": self.k, "n": self.n, "images": self.images, "changed_share": self.changed_share,
                "noise_var": self.noise_var, "information_bits": self.information_bits,
                "chance_bits": self.chance_bits, "max_bits": self.max_bits,
                "margin_quantiles": {str(q): v for q, v in self.margin_quantiles().items()}}


def selection_report(model, images, labels, noise_var: float = 0.01, seed: int = 0) -> SelectionReport:
    """The three measurements for one model with a unit selection (``rim`` and its variants).

    ``seed`` fixes the noise draw and, for the random ablation, the generator of its mask."""
    labels = np.asarray(labels)
    torch.manual_seed(seed)
    clean = traces(model, images)
    noisy = traces(model, add_noise(images, "gaussian", noise_var, seed=seed))
    changed = (clean["active"] != noisy["active"]).any(-1)
    rng = np.random.default_rng(seed)
    n = clean["active"].shape[-1]
    return SelectionReport(
        k=int(getattr(model.config, "k_active", n)), n=n, images=len(labels),
        margins=selection_margins(clean["input_attention"], int(getattr(model.config, "k_active", n))).ravel(),
        changed_share=float(changed.mean()), noise_var=noise_var,
        information_bits=class_information(labels, clean["active"]),
        chance_bits=class_information(rng.permutation(labels), clean["active"]),
        max_bits=float(np.log2(max(2, len(np.unique(labels))))))


def random_twin(model):
    """The same weights with the random selection: the chance level for ``selection_report``."""
    import dataclasses

    from ..models.registry import DEFAULT_MODEL, build_model

    cfg = {**dataclasses.asdict(model.config), "selection": "random"}
    twin = build_model(getattr(model, "model_name", DEFAULT_MODEL), **cfg)
    twin.load_state_dict(model.state_dict())
    return twin
