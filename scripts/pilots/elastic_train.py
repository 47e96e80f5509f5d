"""PILOT (not a protocol of the project): train with a strong elastic distortion of every training image.

Hypothesis: what the external sets' misreads have in common is *shape* (open 4s, 9s read as 3,
crossed or flagged strokes, strongly bent digits), which the mild "scan" augmentation (an
elastic field of at most 1.5 px on half the images, plus stroke and binarisation changes that
cost Semeion) barely varies. The classic elastic distortion for handwritten digits (a per-pixel
random displacement field smoothed by a Gaussian, sigma ``SIGMA`` px, scaled by ``ALPHA``, as
in Simard, Steinkraus & Platt 2003, on every image) bends strokes much more. Nothing else
changes: no affine, stroke or binarisation step; every draw from the run's own augmentation
generator (resume-safe, as ``core.training.loop`` seeds it).

Runs the converged protocol through ``core.training.cli.main`` in this process with
``--augment scan`` (so the loop makes the augmentation generator) and the loop's scan
augmentation swapped for this one; the run's JSON then gets ``pilot`` (what was swapped) and
``health`` (``core.report.health.health_of``) added.

    RIMSCOPE_DATA_DIR=<data> OMP_NUM_THREADS=1 python results/pilots/elastic_train.py \
        --protocol converged --augment scan --model entnet --seed 3 --threads 1 --noise-draws 1 --quiet --out <stem>
"""
from __future__ import annotations

import json
import math
import os
import sys

import torch

ALPHA = float(os.environ.get("ELASTIC_ALPHA", "34"))  # the field's scale, in pixels before smoothing
SIGMA = float(os.environ.get("ELASTIC_SIGMA", "4"))  # the Gaussian smoothing of the field, in pixels


def draw_params(n: int, generator: torch.Generator, h: int = 28, w: int = 28) -> dict[str, torch.Tensor]:
    """The raw field, uniform in [-1, 1] per pixel and axis (one ``torch.rand`` call per batch)."""
    return {"field": torch.rand(n, 2, h, w, generator=generator) * 2 - 1}


def elastic_augment(images, params: dict[str, torch.Tensor]) -> torch.Tensor:
    from torchvision.transforms.v2.functional import gaussian_blur

    from core.data.transforms import _float_batch

    t = _float_batch(images)
    n, h, w = t.shape
    if tuple(params["field"].shape[-2:]) != (h, w):
        raise ValueError(f"the elastic field is {tuple(params['field'].shape[-2:])}, the images {h} x {w} (the pilot is for MNIST)")
    size = 2 * math.ceil(3 * SIGMA) + 1  # the kernel reaches 3 sigma each side (reflect padding)
    disp = gaussian_blur(params["field"], [size, size], [SIGMA, SIGMA]) * ALPHA  # [n, 2, h, w], pixels
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    gx = (xs + disp[:, 0] + 0.5) * 2 / w - 1
    gy = (ys + disp[:, 1] + 0.5) * 2 / h - 1
    grid = torch.stack([gx, gy], dim=-1)
    out = torch.nn.functional.grid_sample(t.unsqueeze(1), grid, mode="bilinear", padding_mode="zeros",
                                          align_corners=False)
    return out.clamp_(0.0, 1.0).squeeze(1)


def main(argv: list[str]) -> int:
    import core.training.loop as L
    L.scan_augment = elastic_augment
    L.draw_scan_params = draw_params
    from core.training.cli import main as train_main
    rc = train_main(argv)
    stem = argv[argv.index("--out") + 1]
    path = stem if stem.endswith(".json") else stem + ".json"
    if os.path.exists(path):
        from core.report.health import health_of
        meta = json.load(open(path))
        meta["pilot"] = {"script": "scripts/pilots/elastic_train.py", "augment": "elastic (replaces scan)",
                         "alpha": ALPHA, "sigma": SIGMA}
        meta.update(health_of(meta))
        json.dump(meta, open(path, "w"), indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
