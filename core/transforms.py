"""Images as model input: image -> sequence of rows, noise, vertical stretching.

Serves training, evaluation and the pages alike; ``core.data`` re-exports these names.
"""

from __future__ import annotations

import numpy as np
import torch


def to_sequence(images) -> torch.Tensor:
    """``[N,H,W]`` or ``[N,H,W,C]`` images -> float ``[N, T=H, D=W*C]`` in [0, 1].

    uint8 input is divided by 255; float input is taken as already in [0, 1]. Serves
    training, evaluation and the pages alike.
    """
    t = torch.as_tensor(np.asarray(images)) if not isinstance(images, torch.Tensor) else images
    if t.ndim not in (3, 4):
        raise ValueError(f"expected a batch [N,H,W] or [N,H,W,C], got shape {tuple(t.shape)}")
    t = t.float() / 255.0 if t.dtype == torch.uint8 else t.float()
    return t.reshape(t.shape[0], t.shape[1], -1)


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
