"""The RIM's fused recurrence: the same maths as ``core/models/rim.py``, made fast.

``RIM(RIMConfig(impl="fused"))`` (the default, the one the benchmarks and grids measure) runs
``fused_forward`` below instead of the plain step of ``rim.py``; ``tests/test_equivalence.py``
holds the two together (logits, every gradient, the trace, every ablation).

Why the code looks the way it does (speed without changing the maths):
* Everything that does not depend on the recurrent state is computed for all rows at once
  before the loop: the row's keys and values. Attention over ``[row; null]`` with a zero null
  row reduces to scaling the row's value by ``sigmoid(score)``, so no softmax over two rows and
  no null-row products are needed.
* Per-LSTM weights (stacked ``[n, in, out]``) are applied to all LSTMs with one batched matmul.
* Inside the recurrence the batch is the last, contiguous axis (states ``[n, H, B]``), so the
  per-head sums of the two attentions reduce over middle axes, which is much cheaper than
  reducing many 16-element rows.
* Training runs through ``_RIMSequence``, an autograd function with a hand-written backward
  over the whole sequence: the forward saves what the backward needs into one preallocated
  workspace (reused between steps: fresh large allocations cost page faults, see
  ``_workspace.py``), and the weight gradients are each one large matrix product over all
  timesteps at the end instead of one small product per step. Asked for a trace as well, the
  same forward also returns it (the recurrence runs once).
* ``tanh(x)`` is computed as ``2 * sigmoid(2x) - 1`` (an identity; sigmoid is several times
  cheaper than tanh on CPU). For the LSTM's g gate the doubling is folded into a copy of
  the weights (multiplying by 2 is exact in floating point), so all four gates come out of
  one sigmoid over a contiguous block.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from ._workspace import WorkspacePool, claim, outputs_with_trace


def fused_forward(model, e: torch.Tensor, mask: torch.Tensor | None, return_trace: bool,
                  override: torch.Tensor | None = None, alpha: float | None = None,
                  removed: torch.Tensor | None = None, isolated: torch.Tensor | None = None, patch=None):
    """The recurrence of ``model`` (a ``RIM``) on the row encodings ``e`` [B,T,E].

    ``mask`` [T,B,n] is a fixed activation mask (the random / all ablations) or None (top-k of
    the input attention); ``override`` [T,B,n] replaces single cells of it (-1 = as chosen,
    0 = off, 1 = on: an intervention, see ``rim.Intervention``); ``alpha`` is the
    communication share (None: the config's); ``removed`` [n, 1] bool: LSTMs left out of the
    top-k ranking; ``isolated`` [n] bool: LSTMs left out of the communication softmax; ``patch``:
    donor states (h, c [T,B,n,H], cells [T,B,n,1]) written over the state after each row
    (inference only). Returns the final states [B, n, H] and the trace (stacked [B,T,...]
    tensors, keyed as ``rim.py`` documents) or None.
    """
    c = model.config
    B, T, _ = e.shape
    # keys (scale folded in) and values, batch last: [T, Hi*dk, B] and [T, Hi*dv, B]
    keys = (model.key(e) / math.sqrt(c.input_key_size)).permute(1, 2, 0).contiguous()
    vals = model.value(e).permute(1, 2, 0).contiguous()
    if mask is not None:
        mask = mask.permute(0, 2, 1).unsqueeze(2).contiguous()  # [T,n,1,B]
    if override is not None:
        override = override.permute(0, 2, 1).unsqueeze(2).contiguous()  # [T,n,1,B]
    weights = (model.w_hq, model.b_hq, model.w_ih, model.w_comm, model.w_comm_out)
    dims = _Dims.of(c)
    if alpha is not None and float(alpha) != dims.alpha:
        dims = dataclasses.replace(dims, alpha=float(alpha))
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (keys, vals, *weights))
    if removed is not None:
        removed = removed.view(c.num_units, 1, 1)  # [n,1,1]: broadcasts over the batch
    if isolated is not None:
        isolated = isolated.view(1, c.num_units, 1, 1)  # [1,n_j,1,1]
    if patch is not None:  # [T,B,n,H] -> [T,n,H,B]
        patch = tuple(p.permute(0, 2, 3, 1).contiguous() for p in patch)
    if needs_grad:
        if patch is not None:
            raise ValueError("activation patching runs without gradients (torch.no_grad())")
        h, *stacked = _RIMSequence.apply(keys, vals, *weights, dims, mask, return_trace, override, removed,
                                         isolated)
        trace = dict(zip(TRACE_KEYS, stacked)) if return_trace else None
    else:
        with torch.no_grad():
            h, tr = _recurrence(keys, vals, *_g_doubled(*weights, dims), dims, trace=return_trace, mask=mask,
                                override=override, removed=removed, isolated=isolated, patch=patch)
        trace = _stack(tr) if return_trace else None
    return h.permute(2, 0, 1), trace  # h: [n,H,B] -> [B,n,H]


TRACE_KEYS = ("active", "input_attention", "input_attention_heads", "comm_attention", "hidden_norm")


def _stack(tr: dict) -> dict:
    """Per-step trace lists -> [B,T,...] tensors (copies: the steps may be workspace views)."""
    return {key: torch.stack(tr[key], dim=1) for key in TRACE_KEYS}


# The recurrence. Batch-last layout: h, c [n,H,B]; per step keys [Hi*dk, B], values [Hi*dv, B].
@dataclass(frozen=True)
class _Dims:
    n: int
    k: int
    H: int
    Hi: int
    dk: int
    dv: int
    Hc: int
    dkc: int
    dvc: int
    alpha: float

    @staticmethod
    def of(c) -> _Dims:  # c: a RIMConfig
        return _Dims(c.num_units, c.k_active, c.hidden_size, c.input_heads, c.input_key_size,
                     c.input_value_size, c.comm_heads, c.comm_key_size, c.comm_value_size, float(c.alpha))


def _g_doubled(w_hq, b_hq, w_ih, w_comm, w_comm_out, d: _Dims):
    """The five weights, with copies of the gate weights whose g-gate columns are doubled (exact
    in floating point): sigmoid of the g pre-activation is then sigmoid(2x), and
    tanh(x) = 2 sigmoid(2x) - 1 comes out of the same sigmoid as the other three gates."""
    g0 = d.Hi * d.dk + 3 * d.H  # first g column of w_hq / b_hq
    w_hq2, b_hq2, w_ih2 = w_hq.detach().clone(), b_hq.detach().clone(), w_ih.detach().clone()
    w_hq2[..., g0:] *= 2
    b_hq2[..., g0:] *= 2
    w_ih2[..., 3 * d.H :] *= 2
    return w_hq2, b_hq2, w_ih2, w_comm.detach(), w_comm_out.detach()


def _recurrence(keys, vals, w_hq, b_hq, w_ih, w_comm, w_comm_out, d: _Dims, trace=False, ws=None,
                mask=None, override=None, removed=None, isolated=None, patch=None):
    # long: the fused step keeps all T steps in one function so its buffers stay in place and the
    # step reads top to bottom; tests/test_equivalence.py holds it to core/models/rim.py
    """Run all T steps. Returns the final h [n,H,B] and the trace lists (or None).

    ``mask`` [T,n,1,B]: a fixed activation mask (the random / all ablations) used instead of
    the top-k of the input attention. ``override`` [T,n,1,B]: cells forced on (1) or off (0)
    after the choice, -1 elsewhere (an intervention). ``removed`` [n,1,1] bool: left out of the
    top-k ranking; ``isolated`` [1,n,1,1] bool: keys left out of the communication softmax;
    ``patch``: (h, c [T,n,H,B], cells [T,n,1,B]) donor states written over the state after a row
    (inference only: not with ``ws``).

    With a workspace ``ws`` (training) every tensor the backward needs is written into it;
    without one (inference, tracing) nothing is kept. The weights come from ``_g_doubled``.
    """
    T, Q, B = keys.shape
    n, k, H, Hi, dk, dv, Hc, dkc, dvc = d.n, d.k, d.H, d.Hi, d.dk, d.dv, d.Hc, d.dkc, d.dvc
    V, C = Hi * dv, Hc * dkc
    w_hq_t, b_hq_t, w_ih_t = w_hq.transpose(1, 2), b_hq.transpose(1, 2), w_ih.transpose(1, 2)
    w_comm_t, w_out_t = w_comm.transpose(1, 2), w_comm_out.transpose(1, 2)
    scale = 1.0 / math.sqrt(dkc)
    key_t = keys.view(T, 1, Hi, dk, B).unbind(0)
    val_t = vals.view(T, 1, Hi, dv, B).unbind(0)
    none = [None] * T
    if ws is not None:
        ws["H"][:, :, 0].zero_()
        ws["C"][:, :, 0].zero_()
        h, c = ws["H"][:, :, 0], ws["C"][:, :, 0]
        h_out, c_out = ws["H"].unbind(2)[1:], ws["C"].unbind(2)[1:]
        ht_out = ws["HT"].unbind(2)
        a_out = [x.view(n, Hi, dv, B) for x in ws["A"].unbind(2)]
        read_out = [x.view(n, Hc, dvc, B) for x in ws["READ"].unbind(2)]
        hq_out, w_out, u_out, g_out, tc_out, qkv_out, att_out, act_out = (
            ws[name].unbind(0) for name in ("HQ", "W", "U", "G", "TC", "QKV", "ATT", "ACT"))
    else:
        h = keys.new_zeros(n, H, B)
        c = keys.new_zeros(n, H, B)
        h_out = c_out = ht_out = a_out = read_out = none
        hq_out = w_out = u_out = g_out = tc_out = qkv_out = att_out = act_out = none
    tr = {name: [] for name in TRACE_KEYS} if trace else None

    for t in range(T):
        # queries and recurrent gate terms for every LSTM in one product
        hq = torch.baddbmm(b_hq_t, w_hq_t, h, out=hq_out[t])  # [n,Q+4H,B]
        # attention score on the real row per head; the null row's score is 0, so the
        # two-way softmax weight on the real row is sigmoid(score)
        score = (hq[:, :Q].view(n, Hi, dk, B) * key_t[t]).sum(2)  # [n,Hi,B]
        w = torch.sigmoid(score, out=w_out[t])
        w_mean = w.mean(1)  # [n,B] head-averaged, ranks the LSTMs
        if mask is None:
            # top-k activation: exactly k LSTMs per example (ties broken by topk's order)
            rank = w_mean if removed is None else w_mean.masked_fill(removed.view(n, 1), -math.inf)
            top = rank.topk(k, dim=0).indices  # [k,B]
            act = (w_mean.new_zeros(n, 1, B) if ws is None else act_out[t].zero_())
            act.squeeze(1).scatter_(0, top, 1.0)  # [n,1,B], 1 = active
        else:
            act = mask[t] if ws is None else act_out[t].copy_(mask[t])
        if override is not None:  # an intervention: forced cells replace the choice
            forced = torch.where(override[t] >= 0, override[t], act)
            act = forced if ws is None else act_out[t].copy_(forced)
        keep = 1.0 - act

        # LSTM cell on the attended input a_i = [w_{i,h} * v_{t,h}]_h (the null row's value
        # is 0, so attention over [row; null] just scales the row's value)
        a = torch.mul(w.unsqueeze(2), val_t[t], out=a_out[t])  # [n,Hi,dv,B]
        gates = torch.baddbmm(hq[:, Q:], w_ih_t, a.view(n, V, B))  # [n,4H,B], g rows doubled
        u = torch.sigmoid(gates, out=u_out[t])  # i, f, o, sigmoid(2 x_g)
        g = torch.mul(u[:, 3 * H :], 2, out=g_out[t]).sub_(1)  # tanh(x_g)
        c_new = torch.addcmul(u[:, H : 2 * H] * c, u[:, :H], g)
        tc = torch.sigmoid(c_new * 2, out=tc_out[t]).mul_(2).sub_(1)  # tanh(c_new)
        h_new = u[:, 2 * H : 3 * H] * tc
        # inactive LSTMs keep their state bit for bit: x*1 + y*0 = x for finite x, y
        h_t = torch.addcmul(h * keep, h_new, act, out=ht_out[t])
        c = torch.addcmul(c * keep, c_new, act, out=c_out[t])

        # communication: every LSTM's h~ as keys/values, active ones read alpha of it;
        # the n x n attention per example and head as broadcast products
        qkv = torch.bmm(w_comm_t, h_t, out=qkv_out[t])  # [n, 2*Hc*dkc + Hc*dvc, B]
        cq = qkv[:, :C].view(n, 1, Hc, dkc, B)  # reader i
        ck = qkv[:, C : 2 * C].view(1, n, Hc, dkc, B)  # read j
        cv = qkv[:, 2 * C :].view(1, n, Hc, dvc, B)
        s = (cq * ck).sum(3) * scale
        if isolated is not None:  # an intervention: these keys get no weight
            s = s.masked_fill(isolated, -math.inf)
        att = torch._softmax(s, 1, False, out=att_out[t])  # [n_i,n_j,Hc,B]
        read = torch.sum(att.unsqueeze(3) * cv, 1, out=read_out[t])  # [n,Hc,dvc,B]
        comm = torch.bmm(w_out_t, read.view(n, Hc * dvc, B))  # [n,H,B]
        h = torch.addcmul(h_t, act, comm, value=d.alpha, out=h_out[t])
        if patch is not None:  # activation patching: the donor's state after this row
            h, c = torch.where(patch[2][t], patch[0][t], h), torch.where(patch[2][t], patch[1][t], c)

        if tr is not None:
            tr["active"].append(act.squeeze(1).t())
            tr["input_attention"].append(w_mean.t())
            tr["input_attention_heads"].append(w.permute(2, 0, 1))
            tr["comm_attention"].append(att.mean(2).permute(2, 0, 1))
            tr["hidden_norm"].append(h.norm(dim=1).t())
    return h, tr


def _recurrence_backward(dh, ws, keys, vals, w_hq, b_hq, w_ih, w_comm, w_comm_out, d: _Dims):
    """Gradients of the final h w.r.t. keys, values and the five stacked weights (given as
    ``_g_doubled`` returns them; the gradients are for the stored weights)."""
    T, Q, B = keys.shape
    n, H, Hi, dk, dv, Hc, dkc, dvc = d.n, d.H, d.Hi, d.dk, d.dv, d.Hc, d.dkc, d.dvc
    V, C, Cv, G, TB = Hi * dv, Hc * dkc, Hc * dvc, 4 * H, T * B
    scale = 1.0 / math.sqrt(dkc)
    key_t = keys.view(T, 1, Hi, dk, B).unbind(0)
    val_t = vals.view(T, 1, Hi, dv, B).unbind(0)
    act_all = ws["ACT"]
    act_t, act_alpha_t, keep_t = act_all.unbind(0), (act_all * d.alpha).unbind(0), (1.0 - act_all).unbind(0)
    qkv_all = ws["QKV"]
    cq_t = qkv_all[:, :, :C].view(T, n, 1, Hc, dkc, B).unbind(0)
    ck_t = qkv_all[:, :, C : 2 * C].view(T, 1, n, Hc, dkc, B).unbind(0)
    cv_t = qkv_all[:, :, 2 * C :].view(T, 1, n, Hc, dvc, B).unbind(0)
    att_t, u_t, g_t, tc_t, w_t = (ws[name].unbind(0) for name in ("ATT", "U", "G", "TC", "W"))
    c_prev_t = ws["C"].unbind(2)
    dHQ, dQKV, dCOMM, dA_all, dS_all = ws["dHQ"], ws["dQKV"], ws["dCOMM"], ws["dA"], ws["dSCORE"]
    dhq_t, dqkv_t, dcomm_t = dHQ.unbind(2), dQKV.unbind(2), dCOMM.unbind(2)
    da_t, dscore_t = dA_all.unbind(0), dS_all.unbind(0)

    dc = None  # gradient w.r.t. c after the step (none flows into the last cell state)
    for t in range(T - 1, -1, -1):
        act, keep = act_t[t], keep_t[t]
        # h = h~ + alpha * act * (W_out read)
        dcomm = torch.mul(dh, act_alpha_t[t], out=dcomm_t[t])
        dread = torch.bmm(w_comm_out, dcomm).view(n, 1, Hc, dvc, B)
        cq, ck, cv, att = cq_t[t], ck_t[t], cv_t[t], att_t[t]
        dqkv = dqkv_t[t]
        d_att = (dread * cv).sum(3)  # [n_i,n_j,Hc,B]
        torch.sum(att.unsqueeze(3) * dread, 0, out=dqkv[:, 2 * C :].view(n, Hc, dvc, B))
        d_s = torch._softmax_backward_data(d_att, att, 1, att.dtype).mul_(scale)
        torch.sum(d_s.unsqueeze(3) * ck, 1, out=dqkv[:, :C].view(n, Hc, dkc, B))
        torch.sum(d_s.unsqueeze(3) * cq, 0, out=dqkv[:, C : 2 * C].view(n, Hc, dkc, B))
        dh_t = torch.baddbmm(dh, w_comm, dqkv)  # [n,H,B]
        # h~ = h_new where active else h; c likewise
        dh_new = dh_t * act
        u, g, tc = u_t[t], g_t[t], tc_t[t]
        i_, f_, o_ = u[:, :H], u[:, H : 2 * H], u[:, 2 * H : 3 * H]
        dc_new = torch.ops.aten.tanh_backward(dh_new * o_, tc)  # through tanh(c_new)
        if dc is not None:
            dc_new.addcmul_(dc, act)
        dz = dhq_t[t][:, Q:]  # gradient of the gate pre-activations (g rows doubled)
        torch.mul(dc_new, g, out=dz[:, :H])
        torch.mul(dc_new, c_prev_t[t], out=dz[:, H : 2 * H])
        torch.mul(dh_new, tc, out=dz[:, 2 * H : 3 * H])
        torch.mul(dc_new, i_, out=dz[:, 3 * H :]).mul_(2)  # d/d sigmoid(2x) = 2 d/dg
        torch.ops.aten.sigmoid_backward.grad_input(dz, u, grad_input=dz)  # sigmoid' = u (1 - u)
        dc_new.mul_(f_)
        dc = dc_new if dc is None else dc_new.addcmul_(dc, keep)
        # attended input a = w * v  ->  the input-attention weight w = sigmoid(score)
        da = torch.bmm(w_ih, dz, out=da_t[t]).view(n, Hi, dv, B)
        w = w_t[t]
        dw = (da * val_t[t]).sum(2)  # [n,Hi,B]
        dscore = torch.ops.aten.sigmoid_backward.grad_input(dw, w, grad_input=dscore_t[t].squeeze(2)).unsqueeze(2)
        torch.mul(dscore, key_t[t], out=dhq_t[t][:, :Q].view(n, Hi, dk, B))
        dh = torch.baddbmm(dh_t * keep, w_hq, dhq_t[t])

    # gradients that nothing in the loop depends on, all timesteps at once
    d_vals = (ws["W"].unsqueeze(3) * dA_all.view(T, n, Hi, dv, B)).sum(1).view(T, V, B)
    d_keys = (dS_all * ws["HQ"][:, :, :Q].view(T, n, Hi, dk, B)).sum(1).view(T, Q, B)
    g_w_hq = torch.bmm(ws["H"][:, :, :T].reshape(n, H, TB), dHQ.view(n, Q + G, TB).transpose(1, 2))
    g_b_hq = dHQ.sum((2, 3)).unsqueeze(1)
    g_w_ih = torch.bmm(ws["A"].view(n, V, TB), dHQ[:, Q:].reshape(n, G, TB).transpose(1, 2))
    for grad in (g_w_hq[..., Q + 3 * H :], g_b_hq[..., Q + 3 * H :], g_w_ih[..., 3 * H :]):
        grad.mul_(2)  # back from the doubled g columns to the stored weights
    g_w_comm = torch.bmm(ws["HT"].view(n, H, TB), dQKV.view(n, 2 * C + Cv, TB).transpose(1, 2))
    g_w_out = torch.bmm(ws["READ"].view(n, Cv, TB), dCOMM.view(n, H, TB).transpose(1, 2))
    return d_keys, d_vals, g_w_hq, g_b_hq, g_w_ih, g_w_comm, g_w_out


_POOL = WorkspacePool()  # see core/models/_workspace.py: why workspaces are reused


def _workspace(T: int, B: int, d: _Dims, dtype, device) -> dict:
    return _POOL.take((T, B, d, dtype, device), lambda: _new_workspace(T, B, d, dtype, device))


def _new_workspace(T: int, B: int, d: _Dims, dtype, device) -> dict:
    n, H, Hi, Hc = d.n, d.H, d.Hi, d.Hc
    Q, V, C, Cv = Hi * d.dk, Hi * d.dv, Hc * d.dkc, Hc * d.dvc

    def new(*shape):
        return torch.empty(*shape, dtype=dtype, device=device)

    return {
        # [n, F, T(+1), B]: operands of the weight-gradient products over all timesteps
        "H": new(n, H, T + 1, B), "C": new(n, H, T + 1, B), "HT": new(n, H, T, B),
        "A": new(n, V, T, B), "READ": new(n, Cv, T, B),
        "dHQ": new(n, Q + 4 * H, T, B), "dQKV": new(n, 2 * C + Cv, T, B), "dCOMM": new(n, H, T, B),
        # [T, ...]: per-step tensors
        "HQ": new(T, n, Q + 4 * H, B), "W": new(T, n, Hi, B), "U": new(T, n, 4 * H, B),
        "G": new(T, n, H, B), "TC": new(T, n, H, B), "QKV": new(T, n, 2 * C + Cv, B),
        "ATT": new(T, n, n, Hc, B), "ACT": new(T, n, 1, B),
        "dA": new(T, n, V, B), "dSCORE": new(T, n, Hi, 1, B),
    }


def _release(ws: dict) -> None:
    _POOL.give_back(ws)


class _RIMSequence(torch.autograd.Function):
    """The whole recurrence as one autograd node: keys, values, weights -> final h [n,H,B],
    followed (with ``trace``) by the trace tensors of ``TRACE_KEYS`` (not differentiable)."""

    @staticmethod
    def forward(ctx, keys, vals, w_hq, b_hq, w_ih, w_comm, w_comm_out, dims, mask=None, trace=False,
                override=None, removed=None, isolated=None):
        T, _, B = keys.shape
        ws = _workspace(T, B, dims, keys.dtype, keys.device)
        weights = _g_doubled(w_hq, b_hq, w_ih, w_comm, w_comm_out, dims)
        h, tr = _recurrence(keys, vals, *weights, dims, trace=trace, ws=ws, mask=mask, override=override,
                            removed=removed, isolated=isolated)
        ctx.ws, ctx.dims, ctx.weights = ws, dims, weights
        ctx.save_for_backward(keys, vals)
        return outputs_with_trace(ctx, h.clone(), _stack(tr) if trace else None)

    @staticmethod
    @once_differentiable
    def backward(ctx, dh, *_trace_grads):
        ws = claim(ctx, "RIM")
        grads = _recurrence_backward(dh.contiguous(), ws, *ctx.saved_tensors, *ctx.weights, ctx.dims)
        ctx.weights = None
        _release(ws)
        return (*grads, None, None, None, None, None, None)
