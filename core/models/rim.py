"""The paper's method: attention-activated parallel LSTMs (a close relative of RIMs).

An image is read row by row. ``n`` small LSTMs ("mechanisms") run side by side; at every
row an input attention decides which ``k`` of them are active. Active LSTMs update their own
state from the row and then read a share ``alpha`` of the others' states through a second
attention; inactive LSTMs keep their state unchanged. The logits come from all final states.

Read top to bottom: config, then the module. Shapes use
B batch, T rows (timesteps), D row features, n LSTMs, H hidden units per LSTM,
Hi input-attention heads, Hc communication heads.

Why the forward pass looks the way it does (speed without changing the maths):
* Everything that does not depend on the recurrent state is computed for all rows at once
  before the loop: the row encoding, its keys and values. Attention over ``[row; null]``
  with a zero null row reduces to scaling the row's value by ``sigmoid(score)``, so no
  softmax over two rows and no null-row products are needed.
* Per-LSTM weights are stored as stacked tensors ``[n, in, out]`` and applied to all
  LSTMs with one batched matmul (``torch.baddbmm`` over the LSTM axis), never a Python loop
  over LSTMs. The recurrent gate weights and the input-attention queries share an input
  (``h[t-1]``) so they are one fused product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class RIMConfig:
    input_dim: int = 28  # D: features per row (W * C)
    num_classes: int = 10
    num_units: int = 6  # n: number of LSTMs
    hidden_size: int = 32  # H: units per LSTM
    k_active: int = 4  # k: LSTMs active per timestep
    embed_dim: int = 64  # row encoding e_t = W_e x_t + b_e, computed before attention
    input_heads: int = 4  # Hi
    input_key_size: int = 16
    input_value_size: int = 16  # per head; the LSTM input is Hi * value size
    comm_heads: int = 4  # Hc
    comm_key_size: int = 16
    comm_value_size: int = 16
    alpha: float = 0.1  # share of the communication read added to an active LSTM's state


def _stacked(n: int, fan_in: int, fan_out: int) -> nn.Parameter:
    """n independent weight matrices [n, fan_in, fan_out], uniform like nn.Linear."""
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(n, fan_in, fan_out).uniform_(-bound, bound))


class RIM(nn.Module):
    """Attention-activated parallel LSTMs. ``forward(x [B,T,D]) -> logits [B,C]``."""

    config_class = RIMConfig

    def __init__(self, config: RIMConfig):
        super().__init__()
        c = config
        if not 0 <= c.alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {c.alpha}")
        if not 1 <= c.k_active <= c.num_units:
            raise ValueError(f"k_active must be in 1..num_units ({c.num_units}), got {c.k_active}")
        self.config = c
        n, H = c.num_units, c.hidden_size
        self.unit_names = [f"LSTM {i + 1}" for i in range(n)]

        # Row encoder: applied before attention, so an all-black row (x_t = 0) encodes to
        # b_e, which differs from the null row (0). Otherwise black rows would be "no input".
        self.encoder = nn.Linear(c.input_dim, c.embed_dim)

        # Input attention. Keys/values have no bias, so the null row's key and value are 0:
        # its score is exactly 0 and it contributes nothing to the attended input.
        self.key = nn.Linear(c.embed_dim, c.input_heads * c.input_key_size, bias=False)
        self.value = nn.Linear(c.embed_dim, c.input_heads * c.input_value_size, bias=False)

        # Per-LSTM weights from h[t-1]: queries for input attention and recurrent gates.
        # Stacked as one [n, H, Hi*dk + 4H] tensor so both come from one batched product.
        q_out = c.input_heads * c.input_key_size
        self.w_hq = _stacked(n, H, q_out + 4 * H)
        self.b_hq = nn.Parameter(torch.zeros(n, 1, q_out + 4 * H))
        with torch.no_grad():  # distinct query biases break the all-equal tie at t=0
            self.b_hq[:, :, :q_out].uniform_(-0.5, 0.5)
            # forget-gate bias 1: the usual LSTM trick that keeps early gradients alive
            self.b_hq[:, :, q_out + H : q_out + 2 * H].fill_(1.0)

        # Per-LSTM input-to-gate weights, applied to the attended input a_i.
        self.w_ih = _stacked(n, c.input_heads * c.input_value_size, 4 * H)

        # Communication: per-LSTM query/key/value from h~ (one fused product) and per-LSTM
        # output projection back to H.
        self.comm_q = c.comm_heads * c.comm_key_size
        self.comm_v = c.comm_heads * c.comm_value_size
        self.w_comm = _stacked(n, H, 2 * self.comm_q + self.comm_v)
        self.w_comm_out = _stacked(n, self.comm_v, H)

        self.readout = nn.Linear(n * H, c.num_classes)

    # ------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, return_trace: bool = False):
        c = self.config
        B, T, _ = x.shape
        n, H, k = c.num_units, c.hidden_size, c.k_active
        Hi, dk, dv = c.input_heads, c.input_key_size, c.input_value_size
        Hc, dkc, dvc = c.comm_heads, c.comm_key_size, c.comm_value_size
        q_out = Hi * dk

        # --- state-independent work, all timesteps at once --------------------------------
        e = self.encoder(x)  # [B,T,E]
        # keys [T,1,B,Hi,dk] (scale folded in) and values [T,1,B,Hi,dv], split per step with
        # unbind: indexing a big tensor per step would make autograd allocate and fill a
        # full-size zero gradient for every step.
        keys = (self.key(e) / math.sqrt(dk)).view(B, T, Hi, dk).transpose(0, 1).unsqueeze(1).unbind(0)
        vals = self.value(e).view(B, T, Hi, dv).transpose(0, 1).unsqueeze(1).unbind(0)

        h = x.new_zeros(n, B, H)  # states kept LSTM-major for the batched products
        cell = x.new_zeros(n, B, H)
        w_hq, b_hq = self.w_hq, self.b_hq
        w_comm, w_comm_out = self.w_comm, self.w_comm_out
        alpha = c.alpha
        trace = {k_: [] for k_ in ("active", "input_attention", "input_attention_heads",
                                   "comm_attention", "hidden_norm")} if return_trace else None

        for t in range(T):
            # queries and recurrent gate terms for every LSTM in one product
            hq = torch.baddbmm(b_hq, h, w_hq)  # [n,B,q_out+4H]
            q = hq[..., :q_out].view(n, B, Hi, dk)
            # attention score on the real row per head; the null row's score is 0, so the
            # two-way softmax weight on the real row is sigmoid(score)
            score = (q * keys[t]).sum(-1)  # [n,B,Hi]
            w_real = torch.sigmoid(score)
            w_mean = w_real.mean(-1)  # [n,B] head-averaged, ranks the LSTMs

            # top-k activation: exactly k LSTMs per example (ties broken by topk's order)
            top = w_mean.topk(k, dim=0).indices  # [k,B]
            active = torch.zeros_like(w_mean).scatter_(0, top, 1.0).bool()  # [n,B]

            # LSTM cell on the attended input a_i = [w_{i,h} * v_{t,h}]_h (the null row's
            # value is 0, so attention over [row; null] just scales the row's value)
            a = (w_real.unsqueeze(-1) * vals[t]).reshape(n, B, Hi * dv)
            gates = torch.baddbmm(hq[..., q_out:], a, self.w_ih).view(n, B, 4, H)
            ifo = torch.sigmoid(gates[:, :, :3])
            g = torch.tanh(gates[:, :, 3])
            c_new = ifo[:, :, 1] * cell + ifo[:, :, 0] * g
            h_new = ifo[:, :, 2] * torch.tanh(c_new)
            act = active.unsqueeze(-1)
            # inactive LSTMs keep their state bit for bit
            h_tilde = torch.where(act, h_new, h)
            cell = torch.where(act, c_new, cell)

            # communication: every LSTM's h~ as keys/values, active ones read alpha of it
            qkv = torch.bmm(h_tilde, w_comm)  # [n,B,2*Hc*dkc + Hc*dvc]
            cq = qkv[..., : self.comm_q].reshape(n, 1, B, Hc, dkc)  # reader i
            ck = qkv[..., self.comm_q : 2 * self.comm_q].reshape(1, n, B, Hc, dkc)  # read j
            cv = qkv[..., 2 * self.comm_q :].reshape(1, n, B, Hc, dvc)
            # n x n attention per example and head as broadcast products: thousands of 6x6
            # matrices are far slower through batched matmul than as one element-wise op
            attn = torch.softmax((cq * ck).sum(-1) * (1.0 / math.sqrt(dkc)), dim=1)  # [n_i,n_j,B,Hc]
            read = (attn.unsqueeze(-1) * cv).sum(1).reshape(n, B, Hc * dvc)
            comm = torch.bmm(read, w_comm_out)  # [n,B,H]
            h = torch.where(act, h_tilde + alpha * comm, h_tilde)

            if trace is not None:
                trace["active"].append(active.t().float())
                trace["input_attention"].append(w_mean.t())
                trace["input_attention_heads"].append(w_real.permute(1, 0, 2))
                trace["comm_attention"].append(attn.mean(-1).permute(2, 0, 1))
                trace["hidden_norm"].append(h.norm(dim=-1).t())

        logits = self.readout(h.permute(1, 0, 2).reshape(B, n * H))
        if trace is None:
            return logits
        out = {k_: torch.stack(v, dim=1).detach() for k_, v in trace.items()}
        out["activity"] = out["active"]  # the common per-unit view every model provides
        return logits, out
