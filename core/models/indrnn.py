"""Baseline: IndRNN (Li et al. 2018, arXiv 1803.04831).

``h_t = ReLU(W x_t + u * h_{t-1} + b)``: each unit has a single scalar recurrent weight, so
units are independent over time and only mix through the layers. ``u`` is clamped to
``[-u_max, u_max]`` (u_max = 2 ** (1 / T_ref)) so a unit's memory can neither explode nor,
by default, vanish faster than the paper allows; the input products for every timestep are
computed before the loop, which is then two element-wise ops per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from ._config import SequenceConfig, SequenceModel


@dataclass
class IndRNNConfig(SequenceConfig):
    hidden_size: int = 128
    num_layers: int = 2
    ref_length: int = 28  # T used for the recurrent-weight bound 2 ** (1 / T)
    trace_groups: int = 8  # units are shown in this many groups in the trace


class IndRNN(SequenceModel, config=IndRNNConfig):
    def __init__(self, config: IndRNNConfig):
        super().__init__(config)
        c = config
        if c.hidden_size % c.trace_groups:
            raise ValueError(f"hidden_size ({c.hidden_size}) must be a multiple of trace_groups ({c.trace_groups})")
        self.u_max = 2.0 ** (1.0 / c.ref_length)
        dims = [c.input_dim] + [c.hidden_size] * c.num_layers
        self.inputs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.u = nn.ParameterList(
            nn.Parameter(torch.empty(c.hidden_size).uniform_(0.0, 1.0)) for _ in range(c.num_layers)
        )
        self.readout = nn.Linear(c.hidden_size, c.num_classes)
        per = c.hidden_size // c.trace_groups
        self.unit_names = [f"units {i * per + 1}-{(i + 1) * per}" for i in range(c.trace_groups)]

    def forward(self, x: torch.Tensor, return_trace: bool = False):
        B, T, _ = x.shape
        seq = x
        for lin, u in zip(self.inputs, self.u):
            wx = lin(seq)  # [B,T,H] all timesteps at once
            u = u.clamp(-self.u_max, self.u_max)
            h = wx.new_zeros(B, wx.shape[-1])
            outs = []
            for t in range(T):
                h = torch.relu(torch.addcmul(wx[:, t], u, h))
                outs.append(h)
            seq = torch.stack(outs, dim=1)
        logits = self.readout(seq[:, -1])
        if not return_trace:
            return logits
        c = self.config
        # fraction of units firing (ReLU > 0) in each group of the last layer
        firing = (seq.detach() > 0).float().view(B, T, c.trace_groups, -1).mean(-1)
        norms = seq.detach().view(B, T, c.trace_groups, -1).norm(dim=-1)
        return logits, {"firing": firing, "hidden_norm": norms, "activity": firing}
