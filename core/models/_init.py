"""One initialisation policy for every LSTM-style gate in every model.

Why this exists: a forget-gate bias of 1 alone moves 1,000-iteration MNIST error by about
40 points (measured: parallel LSTMs 49% -> 10%, RIM 14% -> 61% the other way). A comparison
of methods is only fair when every LSTM starts the same way, so every model that has a
forget gate takes it from one config field, ``forget_bias``, with this one default, and all
LSTM weights are drawn the way ``nn.LSTM`` draws them.

The policy (applied by each model's constructor):
* LSTM weights (input-to-gate and hidden-to-gate): uniform in +-1/sqrt(H), ``nn.LSTM``'s rule.
* LSTM biases: 0, except the forget gate's, which is ``forget_bias`` (default 1.0, the usual
  recommendation: Gers et al. 2000; Jozefowicz et al. 2015).
"""

from __future__ import annotations

import math

import torch

FORGET_BIAS = 1.0  # the one default for every model's forget_bias field


def lstm_bound(hidden_size: int) -> float:
    """Half-width of the uniform draw for LSTM weights (``nn.LSTM``'s 1/sqrt(H))."""
    return 1.0 / math.sqrt(hidden_size)


@torch.no_grad()
def init_nn_lstm_(lstm: torch.nn.LSTM, forget_bias: float) -> None:
    """Apply the policy to an ``nn.LSTM`` (gate order i, f, g, o; two bias vectors).

    The effective forget bias is ``bias_ih + bias_hh`` on the forget slice: ``bias_ih`` gets
    ``forget_bias``, ``bias_hh`` 0, every other bias 0. Weights keep ``nn.LSTM``'s draw.
    """
    H = lstm.hidden_size
    for name, p in lstm.named_parameters():
        if name.startswith("weight"):
            p.uniform_(-lstm_bound(H), lstm_bound(H))
        elif name.startswith("bias"):
            p.zero_()
            if name.startswith("bias_ih"):
                p[H : 2 * H] = forget_bias
