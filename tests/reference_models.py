"""Plain, obviously-correct twins of the fast models, for ``tests/test_equivalence.py``.

The RIM and the RMC state their maths plainly in the package itself: ``core/models/rim.py`` and
``core/models/rmc.py`` with ``impl="reference"`` are a step written in ordinary torch ops, and
their fused kernels (``rim_kernel.py``, ``rmc_kernel.py``) are checked against that. So the
twin of a RIM or RMC is the same model with the other ``impl``.

The other three models have no second implementation in the package, so their twins are
written here: each declares the same parameters under the same names and shapes (so it loads
the fast model's ``state_dict`` with ``strict=True``) and computes the same maths the slow
way, one timestep at a time (the parallel LSTMs' cell written out by hand instead of
``nn.LSTM``). Nothing here is tuned for speed; keep it that way so that it stays easy to
read and trust.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.models.entnet import EntNetConfig
from core.models.indrnn import IndRNNConfig
from core.models.parallel_lstm import ParallelLSTMConfig
from core.models.registry import build_model, model_config_dict


# ----------------------------------------------------------------------------------------
class ReferenceEntNet(nn.Module):
    def __init__(self, c: EntNetConfig):
        super().__init__()
        self.config = c
        d = c.slot_size
        self.encoder = nn.Linear(c.input_dim, d)
        self.keys = nn.Parameter(torch.zeros(c.num_slots, d))
        self.U = nn.Linear(d, d, bias=False)
        self.V = nn.Linear(d, d, bias=False)
        self.W = nn.Linear(d, d)
        self.prelu = nn.PReLU()
        self.readout = nn.Linear(c.num_slots * d, c.num_classes)

    def forward(self, x, return_trace: bool = False):
        c = self.config
        B, T, _ = x.shape
        h = F.normalize(self.keys, dim=-1).expand(B, -1, -1)  # [B,m,d]
        gates = []
        for t in range(T):
            s = self.encoder(x[:, t])  # [B,d]
            g = torch.sigmoid(torch.einsum("bmd,bd->bm", h, s) + torch.einsum("md,bd->bm", self.keys, s))
            cand = self.prelu(self.U(h) + self.V(self.keys)[None] + self.W(s)[:, None])
            h = F.normalize(h + g[..., None] * cand, dim=-1)
            gates.append(g)
        logits = self.readout(h.reshape(B, c.num_slots * c.slot_size))
        if not return_trace:
            return logits
        gate = torch.stack(gates, dim=1).detach()
        return logits, {"gate": gate, "activity": gate}


# ----------------------------------------------------------------------------------------
class ReferenceParallelLSTM(nn.Module):
    """Same nn.LSTM parameters, but the LSTM cell written out by hand (gate order i, f, g, o)."""

    def __init__(self, c: ParallelLSTMConfig):
        super().__init__()
        self.config = c
        self.lstms = nn.ModuleList(nn.LSTM(c.input_dim, c.hidden_size, batch_first=True) for _ in range(c.num_units))
        self.readout = nn.Linear(c.num_units * c.hidden_size, c.num_classes)

    def forward(self, x, return_trace: bool = False):
        B, T, _ = x.shape
        H = self.config.hidden_size
        finals, norms = [], []
        for lstm in self.lstms:
            h, cell = x.new_zeros(B, H), x.new_zeros(B, H)
            per_t = []
            for t in range(T):
                gates = x[:, t] @ lstm.weight_ih_l0.t() + lstm.bias_ih_l0 + h @ lstm.weight_hh_l0.t() + lstm.bias_hh_l0
                ig, fg, gg, og = gates.chunk(4, dim=-1)
                cell = torch.sigmoid(fg) * cell + torch.sigmoid(ig) * torch.tanh(gg)
                h = torch.sigmoid(og) * torch.tanh(cell)
                per_t.append(h.norm(dim=-1))
            finals.append(h)
            norms.append(torch.stack(per_t, dim=1))
        logits = self.readout(torch.cat(finals, dim=-1))
        if not return_trace:
            return logits
        norms_t = torch.stack(norms, dim=-1).detach()
        return logits, {"active": torch.ones_like(norms_t), "hidden_norm": norms_t, "activity": norms_t}


# ----------------------------------------------------------------------------------------
class ReferenceIndRNN(nn.Module):
    def __init__(self, c: IndRNNConfig):
        super().__init__()
        self.config = c
        self.u_max = 2.0 ** (1.0 / c.ref_length)
        dims = [c.input_dim] + [c.hidden_size] * c.num_layers
        self.inputs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.u = nn.ParameterList(nn.Parameter(torch.zeros(c.hidden_size)) for _ in range(c.num_layers))
        self.readout = nn.Linear(c.hidden_size, c.num_classes)

    def forward(self, x, return_trace: bool = False):
        c = self.config
        B, T, _ = x.shape
        seq = x
        for lin, u in zip(self.inputs, self.u):
            u = u.clamp(-self.u_max, self.u_max)
            h = x.new_zeros(B, c.hidden_size)
            outs = []
            for t in range(T):
                h = torch.relu(lin(seq[:, t]) + u * h)
                outs.append(h)
            seq = torch.stack(outs, dim=1)
        logits = self.readout(seq[:, -1])
        if not return_trace:
            return logits
        s = seq.detach().view(B, T, c.trace_groups, -1)
        firing = (s > 0).to(x.dtype).mean(-1)
        return logits, {"firing": firing, "hidden_norm": s.norm(dim=-1), "activity": firing}


REFERENCES = {
    "parallel_lstm": ReferenceParallelLSTM,
    "entnet": ReferenceEntNet,
    "indrnn": ReferenceIndRNN,
}
OTHER_IMPL = {"fused": "reference", "reference": "fused"}  # models with two implementations


def reference_for(model: nn.Module) -> nn.Module:
    """The twin of a model, holding a copy of its weights (same dtype): for the RIM and the RMC
    the same model with the other ``impl``, for the others the plain class above."""
    p = next(model.parameters())
    if "impl" in model_config_dict(model):
        cfg = {**model_config_dict(model), "impl": OTHER_IMPL[model.config.impl]}
        ref = build_model(model.model_name, **cfg)
    else:
        ref = REFERENCES[model.model_name](model.config)
    ref = ref.to(dtype=p.dtype)
    ref.load_state_dict(model.state_dict(), strict=True)
    return ref
