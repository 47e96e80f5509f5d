"""Baseline: Recurrent Entity Network (Henaff et al. 2016, arXiv 1612.03969).

A set of memory slots, each with a learned key ``w_j`` and content ``h_j``. At each row:
``g_j = sigmoid(s^T h_j + s^T w_j)`` decides how much slot j is written,
``candidate_j = PReLU(U h_j + V w_j + W s)``, ``h_j <- h_j + g_j * candidate_j``, then each
slot is L2-normalised (the paper's forgetting mechanism). Everything that does not depend on
the memory (row encodings, ``s^T w_j``, ``W s``, ``V w_j``) is computed before the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._config import SequenceConfig, SequenceModel


@dataclass
class EntNetConfig(SequenceConfig):
    num_slots: int = 8
    slot_size: int = 96


class EntNet(SequenceModel, config=EntNetConfig):
    def __init__(self, config: EntNetConfig):
        super().__init__(config)
        c = config
        d = c.slot_size
        self.unit_names = [f"slot {i + 1}" for i in range(c.num_slots)]
        self.encoder = nn.Linear(c.input_dim, d)
        self.keys = nn.Parameter(torch.randn(c.num_slots, d) / d**0.5)
        self.U = nn.Linear(d, d, bias=False)
        self.V = nn.Linear(d, d, bias=False)
        self.W = nn.Linear(d, d)
        self.prelu = nn.PReLU()  # one learned slope, as in the paper
        self.readout = nn.Linear(c.num_slots * d, c.num_classes)

    def forward(self, x: torch.Tensor, return_trace: bool = False):
        B, T, _ = x.shape
        c = self.config
        s = self.encoder(x)  # [B,T,d]
        s_keys = torch.einsum("btd,md->btm", s, self.keys).unbind(1)  # s^T w_j, per step
        ws = self.W(s).unsqueeze(2).unbind(1)  # T x [B,1,d]
        s_steps = s.unbind(1)
        vw = self.V(self.keys)  # [m,d], constant over time
        # memory starts at the keys (as in the paper's reference setup), normalised
        h = F.normalize(self.keys, dim=-1).expand(B, -1, -1)
        gates = []
        for t in range(T):
            g = torch.sigmoid(torch.bmm(h, s_steps[t].unsqueeze(-1)).squeeze(-1) + s_keys[t])
            cand = self.prelu(self.U(h) + vw + ws[t])
            h = F.normalize(h + g.unsqueeze(-1) * cand, dim=-1)
            gates.append(g)
        logits = self.readout(h.reshape(B, c.num_slots * c.slot_size))
        if not return_trace:
            return logits
        gate = torch.stack(gates, dim=1).detach()  # [B,T,m]
        return logits, {"gate": gate, "activity": gate}
