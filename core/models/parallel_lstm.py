"""Baseline: parallel LSTMs, all active at every step, no communication.

The paper's main comparison: 4 independent LSTMs of 32 units, the same number of units as
the 4 active LSTMs of the method. Each LSTM is a fused ``nn.LSTM`` (fast C++ loop); they
differ only in their weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from ._config import SequenceConfig, SequenceModel
from ._init import FORGET_BIAS, init_nn_lstm_


@dataclass
class ParallelLSTMConfig(SequenceConfig):
    num_units: int = 4
    hidden_size: int = 32
    forget_bias: float = FORGET_BIAS  # every LSTM of every model starts alike: see _init.py


class ParallelLSTM(SequenceModel, config=ParallelLSTMConfig):
    def __init__(self, config: ParallelLSTMConfig):
        super().__init__(config)
        c = config
        self.unit_names = [f"LSTM {i + 1}" for i in range(c.num_units)]
        self.lstms = nn.ModuleList(
            nn.LSTM(c.input_dim, c.hidden_size, batch_first=True) for _ in range(c.num_units)
        )
        for lstm in self.lstms:
            init_nn_lstm_(lstm, c.forget_bias)
        self.readout = nn.Linear(c.num_units * c.hidden_size, c.num_classes)

    def forget_gate_bias(self) -> torch.Tensor:
        """Effective forget-gate bias of every unit ([n, H]): bias_ih + bias_hh, forget slice."""
        H = self.config.hidden_size
        return torch.stack([(m.bias_ih_l0 + m.bias_hh_l0)[H : 2 * H] for m in self.lstms]).detach()

    def forward(self, x: torch.Tensor, return_trace: bool = False):
        outs = [lstm(x)[0] for lstm in self.lstms]  # each [B,T,H]
        logits = self.readout(torch.cat([o[:, -1] for o in outs], dim=-1))
        if not return_trace:
            return logits
        norms = torch.stack([o.norm(dim=-1) for o in outs], dim=-1).detach()  # [B,T,n]
        active = torch.ones_like(norms)
        return logits, {"active": active, "hidden_norm": norms, "activity": norms}
