"""The paper's method: attention-activated parallel LSTMs (a close relative of RIMs).

An image is read row by row. ``n`` small LSTMs ("mechanisms") run side by side; at every
row an input attention decides which ``k`` of them are active. Active LSTMs update their own
state from the row and then read a share ``alpha`` of the others' states through a second
attention; inactive LSTMs keep their state unchanged. The logits come from all final states.

Read top to bottom: the config, the parameters, one step of the recurrence (``step``), then
the forward pass and its readout. Shapes use B batch, T rows (timesteps), D row features,
n LSTMs, H hidden units per LSTM, Hi input-attention heads (key size dk, value size dv),
Hc communication heads (dkc, dvc). States are ``h, c`` [B, n, H].

This file is the method's statement *and* a working implementation (``impl="reference"``).
The default ``impl="fused"`` runs the same maths through the fused kernel of
``rim_kernel.py`` (a hand-written backward, several times faster on CPU);
``tests/test_equivalence.py`` holds the two together: logits, every gradient, the trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn

from . import rim_kernel
from ._config import SequenceConfig, SequenceModel
from ._init import FORGET_BIAS, lstm_bound

SELECTIONS = ("attention", "random", "all")
IMPLS = ("fused", "reference")


@dataclass
class RIMConfig(SequenceConfig):
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
    forget_bias: float = FORGET_BIAS  # every LSTM of every model starts alike: see _init.py
    # Which LSTMs are active at a step (the ablations):
    #   "attention": the k with the most input attention on the row (the paper's method);
    #   "random":    k drawn uniformly per step and example, independent of the input;
    #   "all":       every LSTM active at every step.
    # The attended input a_i = w_i * v still uses the attention weights in every variant,
    # so "random"/"all" remove only the input-dependent choice of who updates.
    selection: str = "attention"
    # How the recurrence is computed; both give the same numbers and load the same weights:
    #   "fused":     rim_kernel.py, one autograd node with a hand-written backward (fast; what
    #                the benchmarks and grids measure);
    #   "reference": the plain step below, differentiated by autograd (easy to read and trust).
    impl: str = "fused"


@dataclass(frozen=True)
class Intervention:
    """What to change in a forward pass of trained weights (``RIM.forward(x, intervention=...)``).

    Applied in this order at every row: the selection picks the active set ("attention": top-k
    of the input attention, the removed LSTMs left out of the ranking; "random": k drawn from a
    generator seeded with ``seed``; "all"); then ``force`` overrides single cells; then the
    knocked-out and removed LSTMs are switched off; after the step, ``patch`` replaces states.
    At the end ``readout`` replaces final states before the classifier.

    Three ways to take one LSTM out (``core.eval.interventions.KNOCKOUTS`` names them):

    * ``remove``: the LSTM leaves the top-k competition: the attention ranks only the others, so
      k of them stay active at every row (the "attention" selection), and it is never active.
    * ``knock_out``: the LSTM is switched off *after* the choice: it still takes one of the k
      places when its attention ranks it there, so that row runs one LSTM short. A knocked-out
      (or removed) LSTM keeps its initial state (h = c = 0) throughout, exactly what the model
      does to any LSTM until its first activation. In the read-out its 32 columns then multiply
      zeros (it adds nothing to the logits); in the communication it is still one of the n keys
      and values, with key and value 0 (the communication projections have no bias), so it
      takes its share of every reader's softmax and returns nothing (unless ``isolate``d). No
      new mechanism is added, both implementations run the same code path as an inactive LSTM,
      and an LSTM that is never active anyway is left exactly as it was (knocking it out
      changes nothing, bit for bit).
    * ``readout``: [n, H] or [B, n, H] final states the classifier reads instead of the
      computed ones (NaN: the computed value): zeros or a mean for one LSTM take its direct
      effect on the logits away and leave the recurrence as it was.

    * ``isolate``: LSTMs left out of every reader's communication softmax (their key gets no
      weight), so the others' reads are shared among the remaining LSTMs only.
    * ``force``: the mask override, [T, n] (one for every image) or [B, T, n]: 1 = on, 0 = off,
      -1 (or NaN) = as the selection chose. A forced cell does not push another LSTM out (or
      in): that row may have more or fewer than k active LSTMs.
    * ``patch``: activation patching, ``(h, c, cells)``: donor states h, c [B or 1, T, n, H]
      (the state after each row, ``RIM.forward(..., return_states=True)`` of a donor input) and
      the cells [T, n] or [B, T, n] (bool) where they replace the state after the row's step.
      Inference only (no gradient flows through a patched run).
    * ``alpha``: the communication share at inference (None: the trained value).
    * ``selection``: "attention", "random" or "all" with the same weights (None: the model's).
    * ``seed``: the generator of the "random" selection (None: torch's global generator).
    """

    force: object = None  # array-like [T, n] or [B, T, n]
    knock_out: tuple[int, ...] = field(default_factory=tuple)
    alpha: float | None = None
    selection: str | None = None
    seed: int | None = None
    remove: tuple[int, ...] = field(default_factory=tuple)
    isolate: tuple[int, ...] = field(default_factory=tuple)
    readout: object = None  # array-like [n, H] or [B, n, H], NaN = as computed
    patch: object = None  # (h, c, cells), see above

    def _units(self, name: str, n: int) -> list[int]:
        units = [int(i) for i in getattr(self, name)]
        for i in units:
            if not 0 <= i < n:
                raise ValueError(f"{name}: LSTM index {i} is not in 0..{n - 1}")
        return units

    def removed(self, n: int, like: torch.Tensor) -> torch.Tensor | None:
        """[n, 1] bool: the LSTMs left out of the top-k ranking, or None."""
        units = self._units("remove", n)
        if not units:
            return None
        out = torch.zeros(n, 1, dtype=torch.bool, device=like.device)
        out[units] = True
        return out

    def isolated(self, n: int, like: torch.Tensor) -> torch.Tensor | None:
        """[n] bool: the LSTMs left out of the communication softmax, or None."""
        units = self._units("isolate", n)
        if not units:
            return None
        if len(set(units)) >= n:
            raise ValueError("isolate: at least one LSTM must stay in the communication")
        out = torch.zeros(n, dtype=torch.bool, device=like.device)
        out[units] = True
        return out

    def readout_state(self, h: torch.Tensor) -> torch.Tensor:
        """The final states [B, n, H] the classifier reads (``readout`` where it is not NaN)."""
        if self.readout is None:
            return h
        r = torch.as_tensor(np.asarray(self.readout, dtype=np.float64), dtype=h.dtype, device=h.device)
        if r.dim() == 2:
            r = r.unsqueeze(0)
        if r.shape[1:] != h.shape[1:] or r.shape[0] not in (1, h.shape[0]):
            raise ValueError(f"readout must be [n, H] = {list(h.shape[1:])} or [B, n, H], got {list(r.shape)}")
        return torch.where(torch.isnan(r), h, r)

    def patch_tensors(self, B: int, T: int, n: int, H: int, like: torch.Tensor):
        """The patch as (h, c) [T, B, n, H] and cells [T, B, n, 1] bool, or None."""
        if self.patch is None:
            return None
        h, c, cells = self.patch
        h = torch.as_tensor(np.asarray(h), dtype=like.dtype, device=like.device)
        c = torch.as_tensor(np.asarray(c), dtype=like.dtype, device=like.device)
        cells = torch.as_tensor(np.asarray(cells, dtype=bool), device=like.device)
        if cells.dim() == 2:
            cells = cells.unsqueeze(0)
        for name, v in (("h", h), ("c", c)):
            if v.dim() != 4 or v.shape[1:] != (T, n, H) or v.shape[0] not in (1, B):
                raise ValueError(f"patch: donor {name} must be [B or 1, T, n, H] = [{B}, {T}, {n}, {H}], "
                                 f"got {list(v.shape)}")
        if cells.shape[1:] != (T, n) or cells.shape[0] not in (1, B):
            raise ValueError(f"patch: cells must be [T, n] = [{T}, {n}] or [B, T, n], got {list(cells.shape)}")
        return (h.expand(B, T, n, H).transpose(0, 1), c.expand(B, T, n, H).transpose(0, 1),
                cells.expand(B, T, n).transpose(0, 1).unsqueeze(-1))

    def override(self, B: int, T: int, n: int, like: torch.Tensor) -> torch.Tensor | None:
        """The cell override as a [T, B, n] tensor (-1 = as chosen, 0 = off, 1 = on), or None."""
        if self.force is None and not self.knock_out and not self.remove:
            return None
        ov = like.new_full((B, T, n), -1.0)
        if self.force is not None:
            f = torch.as_tensor(self.force, dtype=like.dtype, device=like.device)
            if f.dim() == 2:
                f = f.unsqueeze(0)
            if f.shape[1:] != (T, n) or f.shape[0] not in (1, B):
                raise ValueError(f"force must be [T, n] = [{T}, {n}] or [B, T, n], got {list(f.shape)}")
            f = torch.nan_to_num(f, nan=-1.0)
            if not bool(((f == -1) | (f == 0) | (f == 1)).all()):
                raise ValueError("force holds 1 (on), 0 (off) and -1 or NaN (as chosen) only")
            ov = f.expand(B, T, n).clone()
        for i in (*self._units("knock_out", n), *self._units("remove", n)):
            ov[:, :, i] = 0.0
        return ov.transpose(0, 1).contiguous()


def _stacked(n: int, fan_in: int, fan_out: int, bound: float | None = None) -> nn.Parameter:
    """n independent weight matrices [n, fan_in, fan_out], uniform like nn.Linear (or +-bound)."""
    bound = 1.0 / math.sqrt(fan_in) if bound is None else bound
    return nn.Parameter(torch.empty(n, fan_in, fan_out).uniform_(-bound, bound))


def _per_unit(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Each LSTM's own linear map: x [B, n, in] and stacked weights w [n, in, out] -> [B, n, out]."""
    return torch.einsum("bni,nio->bno", x, w)


class RIM(SequenceModel, config=RIMConfig):
    """Attention-activated parallel LSTMs. ``forward(x [B,T,D]) -> logits [B,C]``."""

    def __init__(self, config: RIMConfig):
        super().__init__(config)
        c = config
        if not 1 <= c.k_active <= c.num_units:
            raise ValueError(f"k_active must be in 1..num_units ({c.num_units}), got {c.k_active}")
        if c.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {c.selection!r}")
        if c.impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {c.impl!r}")
        n, H = c.num_units, c.hidden_size
        self.unit_names = [f"LSTM {i + 1}" for i in range(n)]

        # Row encoder: applied before attention, so an all-black row (x_t = 0) encodes to
        # b_e, which differs from the null row (0). Otherwise black rows would be "no input".
        self.encoder = nn.Linear(c.input_dim, c.embed_dim)

        # Input attention. Keys/values have no bias, so the null row's key and value are 0:
        # its score is exactly 0 and it contributes nothing to the attended input.
        self.key = nn.Linear(c.embed_dim, c.input_heads * c.input_key_size, bias=False)
        self.value = nn.Linear(c.embed_dim, c.input_heads * c.input_value_size, bias=False)

        # Per-LSTM weights from h[t-1]: queries for input attention and recurrent gates
        # (order i, f, o, g). Stacked as one [n, H, Hi*dk + 4H] tensor so both come from one
        # batched product.
        # LSTM weights and biases follow the one policy of _init.py (nn.LSTM's uniform
        # +-1/sqrt(H); biases 0 except the forget gate's, forget_bias).
        q_out = c.input_heads * c.input_key_size
        self.w_hq = _stacked(n, H, q_out + 4 * H)  # fan-in H: the bound is 1/sqrt(H)
        self.b_hq = nn.Parameter(torch.zeros(n, 1, q_out + 4 * H))
        with torch.no_grad():  # distinct query biases break the all-equal tie at t=0
            self.b_hq[:, :, :q_out].uniform_(-0.5, 0.5)
            self.b_hq[:, :, q_out + H : q_out + 2 * H].fill_(c.forget_bias)

        # Per-LSTM input-to-gate weights, applied to the attended input a_i.
        self.w_ih = _stacked(n, c.input_heads * c.input_value_size, 4 * H, bound=lstm_bound(H))

        # Communication: per-LSTM query/key/value from h~ (one fused product) and per-LSTM
        # output projection back to H.
        self.comm_q = c.comm_heads * c.comm_key_size
        self.comm_v = c.comm_heads * c.comm_value_size
        self.w_comm = _stacked(n, H, 2 * self.comm_q + self.comm_v)
        self.w_comm_out = _stacked(n, self.comm_v, H)

        self.readout = nn.Linear(n * H, c.num_classes)

    def forget_gate_bias(self) -> torch.Tensor:
        """Effective forget-gate bias of every unit ([n, H])."""
        c = self.config
        q_out = c.input_heads * c.input_key_size
        return self.b_hq[:, 0, q_out + c.hidden_size : q_out + 2 * c.hidden_size].detach()

    def selection_mask(self, T: int, B: int, like: torch.Tensor, selection: str | None = None,
                       generator: torch.Generator | None = None) -> torch.Tensor | None:
        """The fixed activation mask [T, B, n] (1 = active) of the "random" and "all" ablations
        (None for "attention", whose mask comes from the state inside the recurrence). "random"
        draws from ``generator`` (default: torch's global generator, so a seeded run is
        reproducible) and never looks at x. Drawn once per forward, before the recurrence, the
        same way for both impls. ``selection`` defaults to the config's."""
        c = self.config
        selection = c.selection if selection is None else selection
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
        if selection == "attention":
            return None
        if selection == "all":
            return like.new_ones(T, B, c.num_units)
        top = torch.rand(T, c.num_units, B, generator=generator).argsort(dim=1)[:, : c.k_active].to(like.device)
        return like.new_zeros(T, c.num_units, B).scatter_(1, top, 1.0).transpose(1, 2)

    # ------------------------------------------------------------------------------------
    def step(self, e_t, h, cell, active=None, override=None, alpha=None, removed=None, isolated=None):
        """One timestep for all LSTMs at once: row encoding e_t [B, E], states h, cell [B, n, H],
        an optional fixed mask ``active`` [B, n], an optional cell override [B, n] (-1 = as
        chosen, 0 = off, 1 = on; see ``Intervention``), the communication share ``alpha``
        (None: the config's), the LSTMs left out of the top-k ranking ``removed`` [n, 1] bool
        and those left out of the communication softmax ``isolated`` [n] bool (None: none).
        Returns the new (h, cell) and this step's trace."""
        c = self.config
        alpha = c.alpha if alpha is None else alpha
        B, n, H = h.shape
        Hi, dk, dv, Hc, dkc, dvc = (c.input_heads, c.input_key_size, c.input_value_size,
                                    c.comm_heads, c.comm_key_size, c.comm_value_size)
        Q = Hi * dk

        # 1. Input attention: each LSTM's query (from its own h) against the two rows
        #    [real row; null row]; the null row's key and value are 0 (no bias).
        hq = _per_unit(h, self.w_hq) + self.b_hq[:, 0]  # [B,n,Q+4H]: queries | recurrent gates
        query = hq[..., :Q].view(B, n, Hi, dk)
        rows = torch.stack([e_t, torch.zeros_like(e_t)], dim=1)  # [B, 2, E]
        keys = self.key(rows).view(B, 2, Hi, dk)
        values = self.value(rows).view(B, 2, Hi, dv)
        scores = torch.einsum("bnhd,brhd->bnhr", query, keys) / math.sqrt(dk)
        weights = torch.softmax(scores, dim=-1)  # [B, n, Hi, 2 rows]
        w_heads = weights[..., 0]  # attention on the real row, per LSTM and head
        w_mean = w_heads.mean(-1)  # [B, n]: ranks the LSTMs
        attended = torch.einsum("bnhr,brhd->bnhd", weights, values).reshape(B, n, Hi * dv)

        # 2. Who is active: the k LSTMs with the most attention on the row (ties: topk's
        #    order), or the ablation's fixed mask.
        if active is None:
            rank = w_mean if removed is None else w_mean.masked_fill(removed.t(), -math.inf)
            top = rank.topk(c.k_active, dim=1).indices
            active = torch.zeros_like(w_mean).scatter_(1, top, 1.0)
        if override is not None:  # an intervention: forced cells replace the choice
            active = torch.where(override >= 0, override, active)
        act = active.bool().unsqueeze(-1)  # [B, n, 1]

        # 3. Every LSTM's cell on its attended input (gate order i, f, o, g); only the active
        #    ones keep the result, the inactive ones keep h and c bit for bit.
        gates = _per_unit(attended, self.w_ih) + hq[..., Q:]
        i_g, f_g, o_g, g_g = gates.chunk(4, dim=-1)
        c_new = torch.sigmoid(f_g) * cell + torch.sigmoid(i_g) * torch.tanh(g_g)
        h_new = torch.sigmoid(o_g) * torch.tanh(c_new)
        h_tilde = torch.where(act, h_new, h)
        cell = torch.where(act, c_new, cell)

        # 4. Communication: every LSTM's h~ gives a query, key and value; each LSTM attends
        #    over all n (softmax per head); the active ones add alpha times the projected read.
        qkv = _per_unit(h_tilde, self.w_comm)
        cq = qkv[..., : Hc * dkc].reshape(B, n, Hc, dkc)
        ck = qkv[..., Hc * dkc : 2 * Hc * dkc].reshape(B, n, Hc, dkc)
        cv = qkv[..., 2 * Hc * dkc :].reshape(B, n, Hc, dvc)
        comm_scores = torch.einsum("bihd,bjhd->bhij", cq, ck) / math.sqrt(dkc)
        if isolated is not None:  # an intervention: these keys get no weight
            comm_scores = comm_scores.masked_fill(isolated, -math.inf)
        comm_att = torch.softmax(comm_scores, dim=-1)
        read = torch.einsum("bhij,bjhd->bihd", comm_att, cv).reshape(B, n, Hc * dvc)
        h = torch.where(act, h_tilde + alpha * _per_unit(read, self.w_comm_out), h_tilde)

        trace = {"active": active.to(h.dtype), "input_attention": w_mean, "input_attention_heads": w_heads,
                 "comm_attention": comm_att.mean(1), "hidden_norm": h.norm(dim=-1)}
        return h, cell, trace

    def forward(self, x: torch.Tensor, return_trace: bool = False, intervention: Intervention | None = None,
                return_states: bool = False):
        """Logits [B, C], or ``(logits, trace)``. The trace holds [B, T, ...] tensors: "active"
        [B,T,n] (1 = active, after any intervention), "input_attention" [B,T,n] (head-averaged
        weight on the row), "input_attention_heads" [B,T,n,Hi], "comm_attention" [B,T,n,n]
        (reader i over read j, head-averaged), "hidden_norm" [B,T,n] (|h| after the step) and
        "activity" (= "active"). ``intervention``: see ``Intervention`` (None: the trained model
        as it is, bit for bit). ``return_states``: the trace also holds "h" and "c" [B,T,n,H],
        the states after each row (computed by the reference step, whichever the impl: the
        donor states of activation patching)."""
        c = self.config
        B, T, _ = x.shape
        iv = intervention or Intervention()
        e = self.encoder(x)  # [B, T, E]: every row encoded at once (independent of the state)
        generator = None if iv.seed is None else torch.Generator().manual_seed(int(iv.seed))
        mask = self.selection_mask(T, B, x, iv.selection, generator)  # [T, B, n] or None
        override = iv.override(B, T, c.num_units, x)  # [T, B, n] or None
        alpha = c.alpha if iv.alpha is None else float(iv.alpha)
        removed, isolated = iv.removed(c.num_units, x), iv.isolated(c.num_units, x)
        patch = iv.patch_tensors(B, T, c.num_units, c.hidden_size, x)
        if c.impl == "fused" and not return_states:
            h, trace = rim_kernel.fused_forward(self, e, mask, return_trace, override=override, alpha=alpha,
                                                removed=removed, isolated=isolated, patch=patch)
        else:
            h = cell = x.new_zeros(B, c.num_units, c.hidden_size)
            steps = []
            for t in range(T):
                h, cell, tr = self.step(e[:, t], h, cell, None if mask is None else mask[t],
                                        None if override is None else override[t], alpha, removed, isolated)
                if patch is not None:  # activation patching: the donor's state after this row
                    h, cell = torch.where(patch[2][t], patch[0][t], h), torch.where(patch[2][t], patch[1][t], cell)
                    tr["hidden_norm"] = h.norm(dim=-1)
                if return_states:
                    tr["h"], tr["c"] = h, cell
                steps.append(tr)
            keys = rim_kernel.TRACE_KEYS + (("h", "c") if return_states else ())
            trace = {key: torch.stack([tr[key] for tr in steps], 1).detach() for key in keys}
        logits = self.readout(iv.readout_state(h).reshape(B, c.num_units * c.hidden_size))
        if not return_trace:
            return logits
        trace["activity"] = trace["active"]  # the common per-unit view every model provides
        return logits, trace
