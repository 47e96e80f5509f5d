"""Images as model input: image -> sequence of rows, noise, vertical stretching.

Serves training, evaluation and the pages alike.
"""

from __future__ import annotations

import numpy as np
import torch


def _float_batch(images) -> torch.Tensor:
    """``[N,H,W]`` or ``[N,H,W,C]`` images as a float tensor in [0, 1] (uint8 / 255)."""
    t = torch.as_tensor(np.asarray(images)) if not isinstance(images, torch.Tensor) else images
    if t.ndim not in (3, 4):
        raise ValueError(f"expected a batch [N,H,W] or [N,H,W,C], got shape {tuple(t.shape)}")
    return t.float() / 255.0 if t.dtype == torch.uint8 else t.float()


def to_sequence(images) -> torch.Tensor:
    """``[N,H,W]`` or ``[N,H,W,C]`` images -> float ``[N, T=H, D=W*C]`` in [0, 1].

    uint8 input is divided by 255; float input is taken as already in [0, 1]. Serves
    training, evaluation and the pages alike.
    """
    t = _float_batch(images)
    return t.reshape(t.shape[0], t.shape[1], -1)


# "affine" augmentation (TrainConfig.augment): each parameter drawn uniformly from its range,
# independently per image; translation in pixels, angles in degrees
AFFINE_RANGES = {"angle": (-10.0, 10.0), "translate": (-2.0, 2.0), "scale": (0.9, 1.1), "shear": (-5.0, 5.0)}
_AFFINE_ORDER = ("angle", "translate", "translate", "scale", "shear")  # the columns of the parameters


def draw_affine_params(n: int, generator: torch.Generator) -> torch.Tensor:
    """``[n, 5]`` float64 (angle, tx, ty, scale, shear) uniform in ``AFFINE_RANGES``, from ``generator``.

    One ``torch.rand`` call per batch on ``generator`` (a CPU generator whose state the training
    training state saves), so a resumed run draws the same parameters."""
    u = torch.rand(n, 5, generator=generator, dtype=torch.float64)
    lo, hi = torch.tensor([AFFINE_RANGES[k] for k in _AFFINE_ORDER], dtype=torch.float64).unbind(1)
    return lo + u * (hi - lo)


def _inverse_affine(params: torch.Tensor) -> torch.Tensor:
    """``[N, 2, 3]`` float64: per row of ``params`` the output->input pixel map (about the image
    centre) of torchvision's ``affine`` with shear along x, the matrix of
    ``torchvision.transforms.functional._get_inverse_affine_matrix``."""
    angle, tx, ty, scale, shear = params.to(torch.float64).unbind(1)
    rot, sx = torch.deg2rad(angle), torch.deg2rad(shear)
    a, c = torch.cos(rot), torch.sin(rot)
    b = -torch.cos(rot) * torch.tan(sx) - torch.sin(rot)
    d = -torch.sin(rot) * torch.tan(sx) + torch.cos(rot)
    m00, m01, m10, m11 = d / scale, -b / scale, -c / scale, a / scale
    return torch.stack([torch.stack([m00, m01, -(m00 * tx + m01 * ty)], 1),
                        torch.stack([m10, m11, -(m10 * tx + m11 * ty)], 1)], 1)


def affine_augment(images, params: torch.Tensor) -> torch.Tensor:
    """``[N,H,W]`` or ``[N,H,W,C]`` images -> float32 of the same shape in [0, 1], image ``i``
    moved by the affine of ``params[i]`` (``draw_affine_params``): bilinear, zeros outside.

    The same transform as ``torchvision.transforms.v2.functional.affine(img, angle, [tx, ty],
    scale, [shear, 0], interpolation=BILINEAR)`` per image (tests/test_optim.py compares them),
    done for the whole batch in one ``affine_grid`` + ``grid_sample``."""
    t = _float_batch(images)
    chw = t.unsqueeze(1) if t.ndim == 3 else t.permute(0, 3, 1, 2)
    n, _, h, w = chw.shape
    if params.shape != (n, 5):
        raise ValueError(f"expected affine parameters [{n}, 5], got {tuple(params.shape)}")
    m = _inverse_affine(params)
    # pixel coordinates about the centre -> affine_grid's [-1, 1] (align_corners=False)
    theta = m * torch.tensor([[1.0, h / w, 2.0 / w], [w / h, 1.0, 2.0 / h]], dtype=torch.float64)
    grid = torch.nn.functional.affine_grid(theta.float(), [n, chw.shape[1], h, w], align_corners=False)
    out = torch.nn.functional.grid_sample(chw, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    out = out.clamp_(0.0, 1.0)
    return out.squeeze(1) if t.ndim == 3 else out.permute(0, 2, 3, 1).contiguous()


# "scan" augmentation (protocol "converged-aug"): what real scans and forms vary in beyond
# MNIST, per training image, every draw from the run's own generator. A wider slant (shear)
# and size range than "affine"; an elastic distortion (a smooth random displacement field, as
# different hands bend strokes); the stroke width (a 3 x 3 grey dilation thickens, an
# erosion, half blended, thins); binarisation (a thresholded scan: hard ink edges).
SCAN_RANGES = {"angle": (-12.0, 12.0), "translate": (-2.0, 2.0), "scale": (0.85, 1.1), "shear": (-20.0, 20.0)}
SCAN_CHANCES = {"elastic": 0.5, "thicken": 0.3, "thin": 0.15, "binarise": 0.3}
ELASTIC_PX = 1.5  # largest displacement of the elastic field, in pixels
ELASTIC_GRID = 5  # the field is drawn on a coarse grid this many points wide, then smoothed up
BINARISE_LEVELS = (0.25, 0.6)  # the threshold of a binarised image, uniform in this range


def draw_scan_params(n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Parameters of the "scan" augmentation for ``n`` images, from ``generator`` (always the
    same three ``torch.rand`` calls per batch, so a resumed run draws the same numbers)."""
    u = torch.rand(n, 5, generator=generator, dtype=torch.float64)
    lo, hi = torch.tensor([SCAN_RANGES[k] for k in _AFFINE_ORDER], dtype=torch.float64).unbind(1)
    coins = torch.rand(n, 5, generator=generator)  # elastic, thicken, thin, binarise, level
    field = torch.rand(n, 2, ELASTIC_GRID, ELASTIC_GRID, generator=generator) * 2 - 1
    return {"affine": lo + u * (hi - lo), "coins": coins, "field": field}


def scan_augment(images, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[N,H,W]`` grey images -> float32 ``[N,H,W]`` in [0, 1] with the "scan" augmentation of
    ``params`` (``draw_scan_params``): affine + elastic in one resampling, then stroke width,
    then binarisation."""
    t = _float_batch(images)
    if t.ndim != 3:
        raise ValueError(f"the scan augmentation is for grey images [N,H,W], got {tuple(t.shape)}")
    n, h, w = t.shape
    m = _inverse_affine(params["affine"])
    theta = m * torch.tensor([[1.0, h / w, 2.0 / w], [w / h, 1.0, 2.0 / h]], dtype=torch.float64)
    grid = torch.nn.functional.affine_grid(theta.float(), [n, 1, h, w], align_corners=False)
    coins = params["coins"]
    field = torch.nn.functional.interpolate(params["field"], size=(h, w), mode="bicubic", align_corners=True)
    scale = torch.tensor([2.0 / w, 2.0 / h]).view(1, 2, 1, 1) * ELASTIC_PX  # pixels -> [-1, 1] units
    elastic = (coins[:, 0] < SCAN_CHANCES["elastic"]).float().view(n, 1, 1, 1)
    grid = grid + (field * scale * elastic).permute(0, 2, 3, 1)
    x = torch.nn.functional.grid_sample(t.unsqueeze(1), grid, mode="bilinear", padding_mode="zeros",
                                        align_corners=False).clamp_(0.0, 1.0)
    thick = torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1)
    thin = 0.5 * (x - torch.nn.functional.max_pool2d(-x, 3, stride=1, padding=1))  # (x + erosion) / 2
    x = torch.where((coins[:, 1] < SCAN_CHANCES["thicken"]).view(n, 1, 1, 1), thick, x)
    x = torch.where(((coins[:, 1] >= SCAN_CHANCES["thicken"]) & (coins[:, 2] < SCAN_CHANCES["thin"])).view(n, 1, 1, 1),
                    thin, x)
    lo, hi = BINARISE_LEVELS
    level = (lo + coins[:, 4] * (hi - lo)).view(n, 1, 1, 1)
    x = torch.where((coins[:, 3] < SCAN_CHANCES["binarise"]).view(n, 1, 1, 1), (x > level).float(), x)
    return x.squeeze(1)


NOISE_MODES = {
    # name -> (skimage mode, parameter the strength sets, or None)
    "gaussian": ("gaussian", "var"),
    "salt_pepper": ("s&p", "amount"),
    "speckle": ("speckle", "var"),
    "poisson": ("poisson", None),
}


def add_noise(images, mode: str = "gaussian", strength: float = 0.01, seed: int = 0) -> np.ndarray:
    """Noisy copy of uint8 (or [0,1] float) images as float32 in [0,1], seeded.

    Uses ``skimage.util.random_noise`` (clipped). For 'gaussian' and 'speckle' ``strength``
    is the variance (mean 0); for 'salt_pepper' it is the fraction of pixels replaced;
    'poisson' has no parameter.
    """
    from skimage.util import random_noise

    if mode not in NOISE_MODES:
        raise ValueError(f"Unknown noise {mode!r}; choose one of {', '.join(NOISE_MODES)}")
    x = np.asarray(images)
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    sk_mode, param = NOISE_MODES[mode]
    if param is not None and strength <= 0:
        return x.copy()
    kwargs = {param: float(strength)} if param else {}
    return random_noise(x, mode=sk_mode, rng=seed, clip=True, **kwargs).astype(np.float32)


def stretch_rows(images, factor: float) -> np.ndarray:
    """Resize images vertically by ``factor`` (width unchanged): more or fewer timesteps.

    Returns float32 in [0,1]. Tests whether a model generalises to other sequence lengths.
    """
    from skimage.transform import resize

    x = np.asarray(images)
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    new_h = max(1, int(round(x.shape[1] * factor)))
    shape = (x.shape[0], new_h) + x.shape[2:]
    return resize(x, shape, order=1, anti_aliasing=factor < 1, preserve_range=True).astype(np.float32)
