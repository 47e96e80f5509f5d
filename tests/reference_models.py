"""Plain, obviously-correct reference implementations of the five models.

These exist only to check the fast implementations in ``core.models``: each reference class
declares the same parameters under the same names and shapes (so it loads the fast model's
``state_dict`` with ``strict=True``) and computes the same maths the slow way, one timestep
and (for the RIM) one LSTM at a time, written directly from ``METHOD.md``. Nothing here is
tuned for speed; keep it that way so that it stays easy to read and trust.

The RIM semantics, step by step (``n`` LSTMs, ``k`` active, per-LSTM weights):

1. encode the row, ``e_t = W_e x_t + b_e``;
2. per LSTM ``i``: query ``q_i = W_q,i h_i + b_q,i``; keys/values of the two rows
   ``X = [e_t; 0]`` (the null row's key and value are 0: no bias); per head a softmax over
   the two rows; the weight on the real row, averaged over heads, ranks the LSTMs;
3. the ``k`` LSTMs with the largest averaged weight are active (``torch.topk``);
4. an active LSTM runs its LSTM cell (gate order i, f, o, g) on its attended input, an
   inactive one keeps ``h`` and ``c``;
5. communication: every LSTM's ``h~`` gives keys/values (and a query); an active LSTM adds
   ``alpha`` times its multi-head read (softmax over all ``n`` LSTMs) after its output
   projection; an inactive one keeps ``h~``;
6. logits from the concatenated final states.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.models.entnet import EntNetConfig
from core.models.indrnn import IndRNNConfig
from core.models.parallel_lstm import ParallelLSTMConfig
from core.models.rim import RIMConfig
from core.models.rmc import RMCConfig


# ----------------------------------------------------------------------------------------
class ReferenceRIM(nn.Module):
    def __init__(self, c: RIMConfig):
        super().__init__()
        self.config = c
        n, H = c.num_units, c.hidden_size
        q_out = c.input_heads * c.input_key_size
        v_in = c.input_heads * c.input_value_size
        comm_out = 2 * c.comm_heads * c.comm_key_size + c.comm_heads * c.comm_value_size
        self.encoder = nn.Linear(c.input_dim, c.embed_dim)
        self.key = nn.Linear(c.embed_dim, q_out, bias=False)
        self.value = nn.Linear(c.embed_dim, v_in, bias=False)
        # per LSTM i: [h -> query | h -> gates i,f,o,g]
        self.w_hq = nn.Parameter(torch.zeros(n, H, q_out + 4 * H))
        self.b_hq = nn.Parameter(torch.zeros(n, 1, q_out + 4 * H))
        self.w_ih = nn.Parameter(torch.zeros(n, v_in, 4 * H))
        self.w_comm = nn.Parameter(torch.zeros(n, H, comm_out))
        self.w_comm_out = nn.Parameter(torch.zeros(n, c.comm_heads * c.comm_value_size, H))
        self.readout = nn.Linear(n * H, c.num_classes)

    def forward(self, x, return_trace: bool = False):
        c = self.config
        B, T, _ = x.shape
        n, H, k = c.num_units, c.hidden_size, c.k_active
        Hi, dk, dv = c.input_heads, c.input_key_size, c.input_value_size
        Hc, dkc, dvc = c.comm_heads, c.comm_key_size, c.comm_value_size
        q_out = Hi * dk
        h = [x.new_zeros(B, H) for _ in range(n)]
        cell = [x.new_zeros(B, H) for _ in range(n)]
        tr = {name: [] for name in ("active", "input_attention", "input_attention_heads",
                                    "comm_attention", "hidden_norm")}
        for t in range(T):
            # 1. encode the row; 2. keys and values of [real row; null row]
            e = self.encoder(x[:, t])  # [B,E]
            rows = torch.stack([e, torch.zeros_like(e)], dim=1)  # [B,2,E]
            K = self.key(rows).view(B, 2, Hi, dk)
            V = self.value(rows).view(B, 2, Hi, dv)
            w_heads, attended = [], []
            for i in range(n):
                q = (h[i] @ self.w_hq[i, :, :q_out] + self.b_hq[i, 0, :q_out]).view(B, Hi, dk)
                scores = torch.einsum("bhd,brhd->bhr", q, K) / math.sqrt(dk)  # [B,Hi,2 rows]
                p = torch.softmax(scores, dim=-1)
                w_heads.append(p[..., 0])  # weight on the real row, per head
                attended.append(torch.einsum("bhr,brhd->bhd", p, V).reshape(B, Hi * dv))
            w_heads_t = torch.stack(w_heads, dim=1)  # [B,n,Hi]
            w_mean = w_heads_t.mean(-1)  # [B,n]
            # 3. the k largest are active
            top = w_mean.topk(k, dim=1).indices
            active = torch.zeros(B, n, dtype=x.dtype).scatter_(1, top, 1.0).bool()
            # 4. LSTM cell for active LSTMs, inactive keep their state
            h_tilde, new_cell = [], []
            for i in range(n):
                gates = attended[i] @ self.w_ih[i] + h[i] @ self.w_hq[i, :, q_out:] + self.b_hq[i, 0, q_out:]
                ig, fg, og, gg = gates.chunk(4, dim=-1)
                c_new = torch.sigmoid(fg) * cell[i] + torch.sigmoid(ig) * torch.tanh(gg)
                h_new = torch.sigmoid(og) * torch.tanh(c_new)
                act = active[:, i : i + 1]
                h_tilde.append(torch.where(act, h_new, h[i]))
                new_cell.append(torch.where(act, c_new, cell[i]))
            # 5. communication
            cq, ck, cv = [], [], []
            for i in range(n):
                qkv = h_tilde[i] @ self.w_comm[i]
                cq.append(qkv[:, : Hc * dkc].reshape(B, Hc, dkc))
                ck.append(qkv[:, Hc * dkc : 2 * Hc * dkc].reshape(B, Hc, dkc))
                cv.append(qkv[:, 2 * Hc * dkc :].reshape(B, Hc, dvc))
            values = torch.stack(cv, dim=1)  # [B,n_j,Hc,dvc]
            new_h, comm_att = [], []
            for i in range(n):
                scores = torch.stack([(cq[i] * ck[j]).sum(-1) for j in range(n)], dim=-1) / math.sqrt(dkc)
                att = torch.softmax(scores, dim=-1)  # [B,Hc,n_j]
                read = torch.einsum("bhj,bjhd->bhd", att, values).reshape(B, Hc * dvc)
                comm = read @ self.w_comm_out[i]
                new_h.append(torch.where(active[:, i : i + 1], h_tilde[i] + c.alpha * comm, h_tilde[i]))
                comm_att.append(att.mean(1))  # [B,n_j], head-averaged
            h, cell = new_h, new_cell
            tr["active"].append(active.to(x.dtype))
            tr["input_attention"].append(w_mean)
            tr["input_attention_heads"].append(w_heads_t)
            tr["comm_attention"].append(torch.stack(comm_att, dim=1))
            tr["hidden_norm"].append(torch.stack([hi.norm(dim=-1) for hi in h], dim=1))
        logits = self.readout(torch.cat(h, dim=-1))
        if not return_trace:
            return logits
        out = {name: torch.stack(v, dim=1).detach() for name, v in tr.items()}
        out["activity"] = out["active"]
        return logits, out


# ----------------------------------------------------------------------------------------
class ReferenceRMC(nn.Module):
    def __init__(self, c: RMCConfig):
        super().__init__()
        self.config = c
        d = c.slot_size
        self.input_proj = nn.Linear(c.input_dim, d)
        self.initial_memory = nn.Parameter(torch.zeros(c.num_slots, d))
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_out = nn.Linear(d, d)
        self.norm1 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(*[m for _ in range(c.mlp_layers) for m in (nn.Linear(d, d), nn.ReLU())])
        self.norm2 = nn.LayerNorm(d)
        self.gate_in = nn.Linear(d, 2 * d)
        self.gate_mem = nn.Linear(d, 2 * d, bias=False)
        self.readout = nn.Linear(c.num_slots * d, c.num_classes)

    def forward(self, x, return_trace: bool = False):
        c = self.config
        B, T, _ = x.shape
        m, d, nh = c.num_slots, c.slot_size, c.num_heads
        dh = d // nh
        mem = self.initial_memory.expand(B, m, d)
        attns, gates = [], []
        for t in range(T):
            inp = self.input_proj(x[:, t])[:, None]  # [B,1,d]
            q = self.qkv(mem)[..., :d]  # queries from the memory only
            kv_in = torch.cat([mem, inp], dim=1)  # memory attends over itself plus the input
            kv = self.qkv(kv_in)
            k, v = kv[..., d : 2 * d], kv[..., 2 * d :]
            q = q.view(B, m, nh, dh).transpose(1, 2)
            k = k.reshape(B, m + 1, nh, dh).transpose(1, 2)
            v = v.reshape(B, m + 1, nh, dh).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)  # [B,nh,m,m+1]
            read = (a @ v).transpose(1, 2).reshape(B, m, d)
            new = self.norm1(mem + self.attn_out(read))
            new = self.norm2(new + self.mlp(new))
            g = self.gate_in(inp) + self.gate_mem(torch.tanh(mem))
            i_gate = torch.sigmoid(g[..., :d] + c.input_bias)
            f_gate = torch.sigmoid(g[..., d:] + c.forget_bias)
            mem = i_gate * torch.tanh(new) + f_gate * mem
            attns.append(a.mean(1))
            gates.append(i_gate.mean(-1))
        logits = self.readout(mem.reshape(B, m * d))
        if not return_trace:
            return logits
        gate = torch.stack(gates, 1).detach()
        return logits, {"input_gate": gate, "memory_attention": torch.stack(attns, 1).detach(), "activity": gate}


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
    "rim": ReferenceRIM,
    "parallel_lstm": ReferenceParallelLSTM,
    "entnet": ReferenceEntNet,
    "rmc": ReferenceRMC,
    "indrnn": ReferenceIndRNN,
}


def reference_for(model: nn.Module) -> nn.Module:
    """A reference twin of a fast model, holding a copy of its weights (same dtype)."""
    p = next(model.parameters())
    ref = REFERENCES[model.model_name](model.config).to(dtype=p.dtype)
    ref.load_state_dict(model.state_dict(), strict=True)
    return ref
