"""The RMC's fused recurrence: the same maths as ``core/models/rmc.py``, made fast.

``RMC(RMCConfig(impl="fused"))`` (the default) runs ``fused_forward`` below instead of the
plain step of ``rmc.py``; ``tests/test_equivalence.py`` holds the two together.

Speed without changing the maths:
* the input row's projection, key, value and gate terms are computed for all rows at once;
* the memory is kept as one ``[slots * B, d]`` matrix, so each linear layer is one matrix
  product over all slots and examples, and layer norm is PyTorch's fused kernel;
* the attention works on a transposed copy that the query/key/value product writes
  directly (``[d, slots, B]``, batch last), so its per-head sums run over middle axes,
  which is much cheaper than summing many 16-element rows;
* training runs through ``_RMCSequence``, an autograd function with a hand-written backward:
  the forward keeps what the backward needs (in a workspace reused between steps, see
  ``_workspace.py``), and every weight gradient is one large product (or sum) over all
  timesteps at the end instead of one small one per step; asked for a trace as well, the same
  forward returns it (the recurrence runs once);
* ``tanh(x)`` is computed as ``2 * sigmoid(2x) - 1`` (an identity; sigmoid is much cheaper).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._workspace import WorkspacePool, claim, outputs_with_trace


def fused_forward(model, inp: torch.Tensor, return_trace: bool):
    """The recurrence of ``model`` (an ``RMC``) on the projected rows ``inp`` [B,T,d].

    Returns the final memory [B, m, d] and, with ``return_trace``, the trace
    ``{"input_gate": [B,T,m], "memory_attention": [B,T,m,m+1]}`` (else None).
    """
    c = model.config
    d = c.slot_size
    # the input row's key and value ([T, 2d, B], batch last like the attention) and gate
    # terms ([T, B, 2d]) for every timestep at once
    kv_in = F.linear(inp, model.qkv.weight[d:], model.qkv.bias[d:]).permute(1, 2, 0).contiguous()
    gate_in = model.gate_in(inp).transpose(0, 1).contiguous()
    mlp = [layer for layer in model.mlp if isinstance(layer, nn.Linear)]
    weights = (model.initial_memory, model.qkv.weight, model.qkv.bias, model.attn_out.weight,
               model.attn_out.bias, model.norm1.weight, model.norm1.bias, model.norm2.weight,
               model.norm2.bias, model.gate_mem.weight, *[p for lin in mlp for p in (lin.weight, lin.bias)])
    dims = _Dims(c.num_slots, d, c.num_heads, len(mlp), float(c.input_bias), float(c.forget_bias),
                 float(model.norm1.eps), float(model.norm2.eps))
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (kv_in, gate_in, *weights))
    if needs_grad:
        mem, *stacked = _RMCSequence.apply(kv_in, gate_in, dims, return_trace, *weights)
        trace = dict(zip(_TRACE_KEYS, stacked)) if return_trace else None
    else:
        with torch.no_grad():
            mem, tr = _recurrence(kv_in, gate_in, weights, dims, trace=return_trace)
        trace = _stack(tr) if return_trace else None
    return mem.transpose(0, 1), trace  # mem: [m, B, d] -> [B, m, d]


_TRACE_KEYS = ("input_gate", "memory_attention")


def _stack(tr: dict) -> dict:
    """Per-step trace lists -> [B,T,...] tensors (copies)."""
    return {"input_gate": torch.stack(tr["gate"], 1), "memory_attention": torch.stack(tr["attn"], 1)}


@dataclass(frozen=True)
class _Dims:
    m: int  # slots
    d: int  # slot size
    nh: int  # heads
    layers: int  # MLP layers
    input_bias: float
    forget_bias: float
    eps1: float
    eps2: float


def _tanh(x, out=None):
    """tanh(x) = 2 sigmoid(2x) - 1 (sigmoid is several times cheaper than tanh on CPU)."""
    return torch.sigmoid(x * 2, out=out).mul_(2).sub_(1)


def _split_weights(weights, layers: int):
    """The flat weight tuple the autograd node receives -> (the ten fixed ones, MLP (w, b) pairs)."""
    return tuple(weights[:10]), [(weights[10 + 2 * i], weights[11 + 2 * i]) for i in range(layers)]


def _recurrence(kv_in, gate_in, weights, dm: _Dims, trace=False, ws=None):
    """All T steps. Returns the final memory [m, B, d] and the trace lists (or None).

    With a workspace dict ``ws`` (training) everything the backward needs is kept in it.
    """
    T, _, B = kv_in.shape
    m, d, nh, L = dm.m, dm.d, dm.nh, dm.layers
    dh, mB, scale = d // nh, m * B, (d // nh) ** -0.5
    (mem0, w_qkv, b_qkv, w_ao, b_ao, ln1_w, ln1_b, ln2_w, ln2_b, w_gm), mlp = _split_weights(weights, L)
    gate_bias = torch.cat([kv_in.new_full((d,), dm.input_bias), kv_in.new_full((d,), dm.forget_bias)])
    gin_t = gate_in.unbind(0)  # T x [B, 2d]
    save = ws is not None
    if save:
        mems, qkv_all = ws["MEM"], ws["QKV"]  # [T+1, m+1, B, d] rows, [3d, T, m+1, B]
        mems[:, m].zero_()  # the input row has no memory: zero rows keep the weight gradient exact
        mems[0, :m].copy_(mem0[:, None, :].expand(m, B, d))
        qkv_all[d:, :, m].copy_(kv_in.transpose(0, 1))
        mem = mems[0, :m]
        mem_t, qkv_t = mems.unbind(0), qkv_all.unbind(1)
        read_t = ws["READ"].unbind(2)  # [nh, dh, T, m, B] -> [nh, dh, m, B]
        z1_t, z2_t, new1_t, tm_t = (ws[key].unbind(0) for key in ("Z1", "Z2", "NEW1", "TM"))
        hid_t = [ws[f"H{i}"].unbind(0) for i in range(L)]
        for key in ("ATT", "LN1", "LN2", "SIG", "TN"):
            ws[key] = []
    else:
        mem = mem0[:, None, :].expand(m, B, d).contiguous()
    tr = {"gate": [], "attn": []} if trace else None

    for t in range(T):
        mem2 = mem.view(mB, d)
        # queries, keys and values of the memory, transposed by the product itself:
        # [3d, m+1, B], where column m holds the input row's key and value
        if save:
            qkv = qkv_t[t]
        else:
            qkv = kv_in.new_empty(3 * d, m + 1, B)
            qkv[d:, m] = kv_in[t]
        torch.addmm(b_qkv[:, None], w_qkv, mem2.t(), out=_mat(qkv[:, :m]))
        q = qkv[:d, :m].view(nh, dh, m, 1, B)
        k = qkv[d : 2 * d].view(nh, dh, 1, m + 1, B)
        v = qkv[2 * d :].view(nh, dh, 1, m + 1, B)
        att = torch.softmax((q * k).sum(1) * scale, dim=2)  # [nh, m, m+1, B]
        read = torch.sum(att.unsqueeze(1) * v, 3, out=read_t[t] if save else None)  # [nh, dh, m, B]
        z1 = torch.addmm(b_ao, read.view(d, mB).t(), w_ao.t(), out=z1_t[t] if save else None).add_(mem2)
        new, mean1, rstd1 = torch.native_layer_norm(z1, [d], ln1_w, ln1_b, dm.eps1)
        if save:
            new1_t[t].copy_(new)
        h = new
        for i, (w, b) in enumerate(mlp):
            h = torch.addmm(b, h, w.t(), out=hid_t[i][t] if save else None).relu_()
        z2 = torch.add(new, h, out=z2_t[t] if save else None)
        new2, mean2, rstd2 = torch.native_layer_norm(z2, [d], ln2_w, ln2_b, dm.eps2)
        tm = _tanh(mem2, out=tm_t[t] if save else None)
        g = torch.mm(tm, w_gm.t()).view(m, B, 2 * d).add_(gin_t[t]).add_(gate_bias)
        sig = torch.sigmoid(g)  # [m, B, 2d]: input gate, forget gate
        tn = _tanh(new2).view(m, B, d)
        i_gate, f_gate = sig[..., :d], sig[..., d:]
        mem = torch.addcmul(i_gate * tn, f_gate, mem, out=mem_t[t + 1][:m] if save else None)
        if save:
            ws["ATT"].append(att)
            ws["LN1"].append((mean1, rstd1))
            ws["LN2"].append((mean2, rstd2))
            ws["SIG"].append(sig)
            ws["TN"].append(tn)
        if tr is not None:
            tr["attn"].append(att.mean(0).permute(2, 0, 1))  # [B, m, m+1]
            tr["gate"].append(i_gate.mean(-1).t())  # [B, m]
    return mem, tr


def _mat(x):
    """An [F, m, B] view whose (m, B) block is contiguous, as an [F, m*B] matrix."""
    F_, m, B = x.shape
    assert x.stride(2) == 1 and x.stride(1) == B
    return x.as_strided((F_, m * B), (x.stride(0), 1))


def _recurrence_backward(dmem, ws, kv_in, gate_in, weights, dm: _Dims):
    # long: the hand-written backward of the fused step, one pass over T in reverse over shared
    # workspaces, reads best in one piece; tests/test_equivalence.py checks it against autograd
    T, _, B = kv_in.shape
    m, d, nh, L = dm.m, dm.d, dm.nh, dm.layers
    dh, mB, scale = d // nh, m * B, (d // nh) ** -0.5
    (mem0, w_qkv, b_qkv, w_ao, b_ao, ln1_w, ln1_b, ln2_w, ln2_b, w_gm), mlp = _split_weights(weights, L)
    mems, qkv_all, dqkv_all = ws["MEM"], ws["QKV"], ws["dQKV"]
    dqkv_all[:d, :, m].zero_()  # the input row asks no query
    mem_t, qkv_t, dqkv_t = mems.unbind(0), qkv_all.unbind(1), dqkv_all.unbind(1)
    z1_t, z2_t, tm_t, hid_t = ws["Z1"].unbind(0), ws["Z2"].unbind(0), ws["TM"].unbind(0), [ws[f"H{i}"].unbind(0) for i in range(L)]
    dz1_t, dnew1_t, dnew2_t, dg_t = (ws[key].unbind(0) for key in ("dZ1", "dNEW1", "dNEW2", "dG"))
    dpre_t = [ws[f"dP{i}"].unbind(0) for i in range(L)]
    dmem = dmem.contiguous()  # [m, B, d]
    for t in range(T - 1, -1, -1):
        sig, tn, tm = ws["SIG"][t], ws["TN"][t], tm_t[t]
        i_gate, f_gate = sig[..., :d], sig[..., d:]
        mem_prev = mem_t[t][:m]
        # mem = i * tanh(new2) + f * mem_prev
        dsig = torch.empty_like(sig)
        torch.mul(dmem, tn, out=dsig[..., :d])
        torch.mul(dmem, mem_prev, out=dsig[..., d:])
        dg = torch.ops.aten.sigmoid_backward.grad_input(dsig, sig, grad_input=dg_t[t].view(m, B, 2 * d)).view(mB, 2 * d)
        dnew2 = torch.ops.aten.tanh_backward.grad_input(dmem * i_gate, tn, grad_input=dnew2_t[t].view(m, B, d)).view(mB, d)
        dmem_prev = torch.mul(dmem, f_gate).view(mB, d)
        dmem_prev.add_(torch.ops.aten.tanh_backward(torch.mm(dg, w_gm), tm))
        # new2 = LN2(new1 + mlp(new1))
        mean2, rstd2 = ws["LN2"][t]
        dz2 = torch.ops.aten.native_layer_norm_backward(dnew2, z2_t[t], [d], mean2, rstd2, ln2_w, ln2_b,
                                                        [True, False, False])[0]
        dh_ = dz2
        for i in range(L - 1, -1, -1):
            dpre = torch.ops.aten.threshold_backward.grad_input(dh_, hid_t[i][t], 0, grad_input=dpre_t[i][t])
            dh_ = torch.mm(dpre, mlp[i][0])
        dnew1 = torch.add(dz2, dh_, out=dnew1_t[t])  # the residual around the MLP (no MLP: dz2 + dz2)
        # new1 = LN1(mem_prev + attn_out(read))
        mean1, rstd1 = ws["LN1"][t]
        dz1 = torch.ops.aten.native_layer_norm_backward(dnew1, z1_t[t], [d], mean1, rstd1, ln1_w, ln1_b,
                                                        [True, False, False])[0]
        dz1_t[t].copy_(dz1)
        dmem_prev.add_(dz1)
        dread = torch.mm(w_ao.t(), dz1.t()).view(nh, dh, m, 1, B)
        # attention (batch last)
        qkv, dqkv, att = qkv_t[t], dqkv_t[t], ws["ATT"][t]
        q = qkv[:d, :m].view(nh, dh, m, 1, B)
        k = qkv[d : 2 * d].view(nh, dh, 1, m + 1, B)
        v = qkv[2 * d :].view(nh, dh, 1, m + 1, B)
        d_att = (dread * v).sum(1)  # [nh, m, m+1, B]
        torch.sum(att.unsqueeze(1) * dread, 2, out=dqkv[2 * d :].view(nh, dh, m + 1, B))
        d_s = torch._softmax_backward_data(d_att, att, 2, att.dtype).mul_(scale).unsqueeze(1)
        torch.sum(d_s * k, 3, out=dqkv[:d, :m].view(nh, dh, m, B))
        torch.sum(d_s * q, 2, out=dqkv[d : 2 * d].view(nh, dh, m + 1, B))
        dmem_prev.addmm_(_mat(dqkv[:, :m]).t(), w_qkv)
        dmem = dmem_prev.view(m, B, d)

    # everything nothing in the loop depends on, all timesteps at once
    def flat(key):
        return ws[key].view(T * mB, -1)

    def ln_grads(dy, z, saved):
        mean = torch.cat([s[0] for s in saved], 0)
        rstd = torch.cat([s[1] for s in saved], 0)
        xhat = (z - mean).mul_(rstd)
        return (dy * xhat).sum(0), dy.sum(0)

    cols = T * (m + 1) * B
    g_w_qkv = torch.mm(dqkv_all.view(3 * d, cols), mems[:T].reshape(cols, d))
    g_b_qkv = dqkv_all[:, :, :m].sum((1, 2, 3))
    g_w_ao = torch.mm(flat("dZ1").t(), ws["READ"].view(d, T * mB).t())
    g_b_ao = flat("dZ1").sum(0)
    g_ln1_w, g_ln1_b = ln_grads(flat("dNEW1"), flat("Z1"), ws["LN1"])
    g_ln2_w, g_ln2_b = ln_grads(flat("dNEW2"), flat("Z2"), ws["LN2"])
    dg_all = flat("dG")
    g_w_gm = torch.mm(dg_all.t(), flat("TM"))
    mlp_grads = []
    for i in range(L):
        dp = flat(f"dP{i}")
        mlp_grads += [torch.mm(dp.t(), flat("NEW1" if i == 0 else f"H{i - 1}")), dp.sum(0)]
    d_gate_in = dg_all.view(T, m, B, 2 * d).sum(1)  # [T, B, 2d]
    d_kv_in = dqkv_all[d:, :, m].transpose(0, 1)  # [T, 2d, B]
    d_mem0 = dmem.sum(1)  # [m, d]
    return (d_kv_in, d_gate_in, d_mem0, g_w_qkv, g_b_qkv, g_w_ao, g_b_ao, g_ln1_w, g_ln1_b,
            g_ln2_w, g_ln2_b, g_w_gm, *mlp_grads)


_POOL = WorkspacePool()  # see core/models/_workspace.py: why workspaces are reused


def _workspace(T, B, dm: _Dims, dtype, device) -> dict:
    return _POOL.take((T, B, dm, dtype, device), lambda: _new_workspace(T, B, dm, dtype, device))


def _new_workspace(T, B, dm: _Dims, dtype, device) -> dict:
    m, d, nh = dm.m, dm.d, dm.nh

    def new(*shape):
        return torch.empty(*shape, dtype=dtype, device=device)

    mB = m * B
    ws = {"MEM": new(T + 1, m + 1, B, d), "QKV": new(3 * d, T, m + 1, B),
          "dQKV": new(3 * d, T, m + 1, B), "READ": new(nh, d // nh, T, m, B)}
    for name, width in (("Z1", d), ("Z2", d), ("NEW1", d), ("TM", d), ("dZ1", d), ("dNEW1", d),
                        ("dNEW2", d), ("dG", 2 * d), *[(f"{p}{i}", d) for i in range(dm.layers) for p in ("H", "dP")]):
        ws[name] = new(T, mB, width)
    return ws


def _release(ws: dict) -> None:
    big = {k: v for k, v in ws.items() if not isinstance(v, list)}  # drop the per-step lists
    ws.clear()
    _POOL.give_back(big)


class _RMCSequence(torch.autograd.Function):
    """The whole recurrence as one autograd node: inputs, weights -> final memory [m, B, d],
    followed (with ``trace``) by the trace tensors of ``_TRACE_KEYS`` (not differentiable)."""

    @staticmethod
    def forward(ctx, kv_in, gate_in, dims, trace, *weights):
        T, _, B = kv_in.shape
        ws = _workspace(T, B, dims, kv_in.dtype, kv_in.device)
        mem, tr = _recurrence(kv_in, gate_in, weights, dims, trace=trace, ws=ws)
        ctx.ws, ctx.dims = ws, dims
        ctx.save_for_backward(kv_in, gate_in, *weights)
        return outputs_with_trace(ctx, mem.clone(), _stack(tr) if trace else None)

    @staticmethod
    @once_differentiable
    def backward(ctx, dmem, *_trace_grads):
        ws = claim(ctx, "RMC")
        kv_in, gate_in, *weights = ctx.saved_tensors
        grads = _recurrence_backward(dmem, ws, kv_in, gate_in, weights, ctx.dims)
        _release(ws)
        d_kv_in, d_gate_in, *weight_grads = grads
        return (d_kv_in, d_gate_in, None, None, *weight_grads)
