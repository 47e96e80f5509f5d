"""Baseline: Relational Memory Core (Santoro et al. 2018, arXiv 1806.01822).

A memory of ``num_slots`` rows. At each timestep the memory attends over itself plus the
(projected) input row with multi-head dot-product attention, goes through a residual MLP
with layer norm, and is then blended with the old memory through LSTM-style input and
forget gates computed from the input and the old memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class RMCConfig:
    input_dim: int = 28
    num_classes: int = 10
    num_slots: int = 4
    slot_size: int = 64
    num_heads: int = 4
    mlp_layers: int = 2
    forget_bias: float = 1.0
    input_bias: float = 0.0


class RMC(nn.Module):
    config_class = RMCConfig

    def __init__(self, config: RMCConfig):
        super().__init__()
        self.config = c = config
        d = c.slot_size
        if d % c.num_heads:
            raise ValueError("slot_size must be divisible by num_heads")
        self.unit_names = [f"slot {i + 1}" for i in range(c.num_slots)]
        self.input_proj = nn.Linear(c.input_dim, d)
        self.initial_memory = nn.Parameter(torch.eye(c.num_slots, d))  # distinct slots
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_out = nn.Linear(d, d)
        self.norm1 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(*[m for _ in range(c.mlp_layers) for m in (nn.Linear(d, d), nn.ReLU())])
        self.norm2 = nn.LayerNorm(d)
        # gates: 2 per slot unit (input, forget), from the input and tanh(memory)
        self.gate_in = nn.Linear(d, 2 * d)
        self.gate_mem = nn.Linear(d, 2 * d, bias=False)
        self.readout = nn.Linear(c.num_slots * d, c.num_classes)

    def forward(self, x: torch.Tensor, return_trace: bool = False):
        B, T, _ = x.shape
        c = self.config
        m, d, nh = c.num_slots, c.slot_size, c.num_heads
        dh = d // nh
        inp = self.input_proj(x)  # [B,T,d]
        # the input row's k/v and gate terms for all t, split per step with unbind (indexing a
        # big tensor per step makes autograd build a full-size zero gradient each time)
        inp_kv = self.qkv(inp)[..., d:].unsqueeze(2).unbind(1)  # T x [B,1,2d]
        inp_gate = self.gate_in(inp).unsqueeze(2).unbind(1)  # T x [B,1,2d]
        mem = self.initial_memory.expand(B, m, d)
        attns, gates = [], []
        for t in range(T):
            qkv = self.qkv(mem)  # [B,m,3d]
            q = qkv[..., :d].view(B, m, 1, nh, dh)
            kv = torch.cat([qkv[..., d:], inp_kv[t]], dim=1)  # [B,m+1,2d]
            k = kv[..., :d].view(B, 1, m + 1, nh, dh)
            v = kv[..., d:].view(B, 1, m + 1, nh, dh)
            # tiny per-example attention as broadcast products (faster than batched matmul)
            a = torch.softmax((q * k).sum(-1) * dh**-0.5, dim=2)  # [B,m,m+1,nh]
            read = (a.unsqueeze(-1) * v).sum(2).reshape(B, m, d)
            new = self.norm1(mem + self.attn_out(read))
            new = self.norm2(new + self.mlp(new))
            g = inp_gate[t] + self.gate_mem(torch.tanh(mem))
            i_gate = torch.sigmoid(g[..., :d] + c.input_bias)
            f_gate = torch.sigmoid(g[..., d:] + c.forget_bias)
            mem = i_gate * torch.tanh(new) + f_gate * mem
            if return_trace:
                attns.append(a.mean(-1))
                gates.append(i_gate.mean(-1))
        logits = self.readout(mem.reshape(B, m * d))
        if not return_trace:
            return logits
        gate = torch.stack(gates, 1).detach()  # [B,T,m]
        attn = torch.stack(attns, 1).detach()  # [B,T,m,m+1]; last column is the input row
        return logits, {"input_gate": gate, "memory_attention": attn, "activity": gate}
