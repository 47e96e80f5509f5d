#!/usr/bin/env python3
"""A plain MNIST CNN beside the shipped converged models, on other people's handwriting.

What a user would reach for instead of the dashboard's sequence models: the textbook MNIST
CNN (two 3 x 3 convolutions with 32 and 64 channels, 2 x 2 max-pool, dropout 0.25, 128
hidden units, dropout 0.5; Adadelta, learning rate 1.0 with a 0.7 step decay, batch 64, one
epoch), trained here on MNIST train and measured in the same run and through the same
upload path (``core.digit_external``) as the five converged MNIST models: MNIST test
accuracy and accuracy on the even and odd half of each external handwriting set.

    OMP_NUM_THREADS=1 python -m scripts.plain_cnn --data /work/shared/data [--epochs 1]

It is not one of the dashboard's methods and its weights are not kept (``--save PATH`` writes
a ``state_dict`` with ``torch.save`` if you want them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class PlainCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)  # 28 -> 26
        self.conv2 = nn.Conv2d(32, 64, 3)  # 26 -> 24, pooled to 12
        self.drop1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 12 * 12, 128)
        self.drop2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):  # x: [N, 1, 28, 28] in 0..1
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = self.drop1(F.max_pool2d(x, 2)).flatten(1)
        return self.fc2(self.drop2(F.relu(self.fc1(x))))


def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x, dtype=np.float32) / 255.0)[:, None]


def train(x: np.ndarray, y: np.ndarray, *, epochs: int = 1, seed: int = 0, batch: int = 64) -> PlainCNN:
    torch.manual_seed(seed)
    model = PlainCNN()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    gen = np.random.default_rng(seed)
    model.train()
    for _ in range(epochs):
        order = gen.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i : i + batch]
            opt.zero_grad()
            F.cross_entropy(model(_tensor(x[idx])), torch.from_numpy(y[idx])).backward()
            opt.step()
        sched.step()
    return model.eval()


class _Scorer:
    """``predict_proba``-compatible wrapper: takes uint8 [N, 28, 28] like the sequence models."""

    def __init__(self, model: PlainCNN):
        self.model = model

    @torch.no_grad()
    def predict(self, x: np.ndarray) -> np.ndarray:
        return torch.cat([self.model(_tensor(x[i : i + 1000])) for i in range(0, len(x), 1000)]).argmax(1).numpy()


def main(argv: list[str] | None = None) -> int:
    from core.catalog import load_entry
    from core.eval.predict import predict_proba
    from core.studies.handwriting import external as de

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder with mnist/{train,test}.npz and handwriting/")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    with np.load(args.data / "mnist" / "train.npz", allow_pickle=False) as z:
        xtr, ytr = z["x"], z["y"].astype(np.int64)
    with np.load(args.data / "mnist" / "test.npz", allow_pickle=False) as z:
        xte, yte = z["x"], z["y"].astype(np.int64)
    start = time.perf_counter()
    cnn = _Scorer(train(xtr, ytr, epochs=args.epochs, seed=args.seed))
    print(f"plain CNN trained: {args.epochs} epoch(s) on {len(xtr)} MNIST images in {time.perf_counter() - start:.0f} s")
    if args.save:
        torch.save(cnn.model.state_dict(), args.save)

    entries = de.shipped_entries("converged")
    models = {de.entry_name(e): load_entry(e)[0] for e in entries}
    predict = {name: (lambda x, m=m: predict_proba(m, x).argmax(1)) for name, m in models.items()}
    predict["plain CNN"] = cnn.predict
    results = {name: {"MNIST test": float((p(xte) == yte).mean())} for name, p in predict.items()}
    for set_name in de.SETS:
        data = de.load_external(set_name, args.data / "handwriting")
        inputs = de.upload_inputs(data.x)
        for name, p in predict.items():
            acc = de.half_accuracies(p(inputs), data)
            results[name][f"{set_name} even"], results[name][f"{set_name} odd"] = acc["even"], acc["odd"]
    cols = list(next(iter(results.values())))
    width = max(len(n) for n in results)
    print("model".ljust(width) + "".join(f"{c:>16}" for c in cols))
    for name, row in results.items():
        print(name.ljust(width) + "".join(f"{100 * row[c]:>15.1f}%" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
