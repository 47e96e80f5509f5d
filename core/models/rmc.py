"""Baseline: Relational Memory Core (Santoro et al. 2018, arXiv 1806.01822).

A memory of ``num_slots`` rows. At each timestep the memory attends over itself plus the
(projected) input row with multi-head dot-product attention, goes through a residual MLP
with layer norm, and is then blended with the old memory through LSTM-style input and
forget gates computed from the input and the old memory.

Read top to bottom: the config, the parameters, one step (``step``), the forward pass. Shapes
use B batch, T rows, m slots, d slot size, nh heads (head size d / nh); the memory is [B, m, d].

This file is the model's statement *and* a working implementation (``impl="reference"``).
The default ``impl="fused"`` runs the same maths through ``rmc_kernel.py`` (a hand-written
backward, much faster on CPU); ``tests/test_equivalence.py`` holds the two together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from . import rmc_kernel
from ._config import SequenceConfig, SequenceModel
from ._init import FORGET_BIAS

IMPLS = ("fused", "reference")


@dataclass
class RMCConfig(SequenceConfig):
    num_slots: int = 4
    slot_size: int = 64
    num_heads: int = 4
    mlp_layers: int = 2
    forget_bias: float = FORGET_BIAS  # one default for every model's forget gates: see _init.py
    input_bias: float = 0.0
    # How the recurrence is computed; both give the same numbers and load the same weights:
    # "fused" (rmc_kernel.py, hand-written backward, fast) or "reference" (the plain step below).
    impl: str = "fused"


class RMC(SequenceModel, config=RMCConfig):
    def __init__(self, config: RMCConfig):
        super().__init__(config)
        c = config
        d = c.slot_size
        if d % c.num_heads:
            raise ValueError("slot_size must be divisible by num_heads")
        if c.impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {c.impl!r}")
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
        with torch.no_grad():  # the gate biases are exactly input_bias / forget_bias (_init.py)
            self.gate_in.bias.zero_()
        self.readout = nn.Linear(c.num_slots * d, c.num_classes)

    def forget_gate_bias(self) -> torch.Tensor:
        """Effective forget-gate bias of every memory unit ([m, d]): the learned gate bias plus
        the constant ``forget_bias`` (the memory term has no bias)."""
        c = self.config
        return (self.gate_in.bias[c.slot_size :] + c.forget_bias).expand(c.num_slots, -1).detach()

    def step(self, inp_t: torch.Tensor, mem: torch.Tensor):
        """One timestep: projected row inp_t [B, d], memory [B, m, d] -> new memory and its
        trace (the slots' attention [B, m, m+1] and mean input gate [B, m])."""
        c = self.config
        B, m, d = mem.shape
        nh, dh = c.num_heads, d // c.num_heads
        # 1. The memory attends over itself plus the input row (the last of m+1 rows); only
        #    the memory asks queries.
        rows = torch.cat([mem, inp_t[:, None]], dim=1)  # [B, m+1, d]
        q, k, v = self.qkv(rows).split(d, dim=-1)
        q = q[:, :m].reshape(B, m, nh, dh).transpose(1, 2)  # [B, nh, m, dh]
        k = k.reshape(B, m + 1, nh, dh).transpose(1, 2)
        v = v.reshape(B, m + 1, nh, dh).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)  # [B, nh, m, m+1]
        read = (att @ v).transpose(1, 2).reshape(B, m, d)
        # 2. Residual attention output and residual MLP, each followed by layer norm.
        new = self.norm1(mem + self.attn_out(read))
        new = self.norm2(new + self.mlp(new))
        # 3. LSTM-style gates from the input and tanh(old memory) blend new and old memory.
        g = self.gate_in(inp_t)[:, None] + self.gate_mem(torch.tanh(mem))
        i_gate = torch.sigmoid(g[..., :d] + c.input_bias)
        f_gate = torch.sigmoid(g[..., d:] + c.forget_bias)
        mem = i_gate * torch.tanh(new) + f_gate * mem
        return mem, {"memory_attention": att.mean(1), "input_gate": i_gate.mean(-1)}

    def forward(self, x: torch.Tensor, return_trace: bool = False):
        """Logits [B, C], or ``(logits, trace)`` with "input_gate" [B,T,m] (mean input gate per
        slot), "memory_attention" [B,T,m,m+1] (last column: the input row) and "activity"
        (= "input_gate")."""
        B, T, _ = x.shape
        c = self.config
        inp = self.input_proj(x)  # [B, T, d]: every row at once (independent of the memory)
        if c.impl == "fused":
            mem, trace = rmc_kernel.fused_forward(self, inp, return_trace)
        else:
            mem = self.initial_memory.expand(B, -1, -1)
            steps = []
            for t in range(T):
                mem, tr = self.step(inp[:, t], mem)
                steps.append(tr)
            trace = {key: torch.stack([tr[key] for tr in steps], 1).detach()
                     for key in ("input_gate", "memory_attention")}
        logits = self.readout(mem.reshape(B, c.num_slots * c.slot_size))
        if not return_trace:
            return logits
        trace = {"input_gate": trace["input_gate"], "memory_attention": trace["memory_attention"],
                 "activity": trace["input_gate"]}
        return logits, trace
