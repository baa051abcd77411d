#!/usr/bin/env python3
"""Independent float64 numpy reference of the Qwen3-Next / Qwen3.5 (dense and MoE) hybrid forward pass.

Reads a GGUF (F32 tensors) with llama.cpp's names, shapes and value conventions for the
architectures `qwen3next`, `qwen35` and `qwen35moe`, and computes next-token logits in float64,
token by token: the Gated DeltaNet (GDN) layers run the recurrent form (the ground truth); the
chunked form (chunk 64, the UT/WY transform) is implemented separately and asserted equal by
make_hybrid_fixtures.py. Written from the published model definition (transformers'
modeling_qwen3_next.py / modeling_qwen3_5.py / modeling_qwen3_5_moe.py) and llama.cpp's GGUF
conventions (conversion/qwen.py, src/models/qwen3next.cpp, src/models/qwen35.cpp); it shares no
code with tessera nor with transformers.

Per layer (pre-norm, two residuals): h += mixer(rms(h) * attn_norm); h += ffn(rms(h) * post_attention_norm).
Layer i is GDN iff (i + 1) % full_attention_interval != 0 (layers 0-2 GDN, 3 attention for interval 4).

GDN mixer (per token t; k_heads = ssm.group_count, v_heads = ssm.time_step_rank, d_k = ssm.state_size,
d_v = ssm.inner_size / v_heads; r = v_heads / k_heads):
  qkv = attn_qkv x  (rows q [k_heads*d_k] | k [k_heads*d_k] | v [v_heads*d_v]), z = attn_gate x
    (legacy qwen3next files: ssm_in x, rows grouped per key head [q|k|v (r heads)|z (r heads)])
  b, a: qwen3next ssm_ba x, per key head [b (r) | a (r)]; qwen35* ssm_beta x, ssm_alpha x
  conv: c_t = silu(sum_j w[:, j] * u_{t-K+1+j}) over the last K inputs (zeros before the
    sequence), w = ssm_conv1d [conv_dim, K]; conv state = the last K-1 inputs
  q, k = l2norm(q), l2norm(k) per head (x / sqrt(sum x^2 + 1e-6), as HF's l2norm); q *= d_k^-1/2
  value head j reads key head j // r in qwen3next files (HF's grouped order, repeat-interleave) and
    key head j % k_heads in qwen35 / qwen35moe files (their converter reorders value heads to tiled order)
  beta = sigmoid(b); g = ssm_a * softplus(a + ssm_dt.bias)   (ssm_a = -exp(A_log) in the file)
  S_j <- exp(g_j) S_j;  S_j <- S_j + k (beta_j (v_j - S_j^T k))^T;  o_j = S_j^T q    (S_j [d_k, d_v])
  y_j = rms(o_j) * ssm_norm * silu(z_j)  (eps = rms eps);  out = ssm_out [y_0 .. y_{v_heads-1}]
Gated attention: attn_q x per head [query (head_dim) | gate (head_dim)]; q, k RMS-normed per head with
  attn_q_norm / attn_k_norm (stored with HF's +1 folded in); NeoX RoPE on the first n_rot =
  rope.dimension_count dims (pairs (i, i + n_rot/2), theta^(-2i/n_rot)); causal softmax attention
  scaled head_dim^-1/2, GQA head h uses kv head h // (heads / kv_heads); out = attn_output
  (attn * sigmoid(gate)). qwen35's multi-section RoPE equals this for text (all sections share a position).
FFN: dense SwiGLU (ffn_down (silu(ffn_gate x) * ffn_up x)), or MoE: p = softmax(ffn_gate_inp x),
  top-k experts (ties to the lower id), weights renormalised to sum 1, SwiGLU experts
  (ffn_{gate,up,down}_exps), plus sigmoid(ffn_gate_inp_shexp . x) * SwiGLU shared expert.
Output: rms(h) * output_norm, logits = output (or token_embd when output is absent) h.

Agreement with HF transformers 5.23.0 (torch 2.15.0, run on the CPU), same weights, model run with
torch_dtype=float64 (its RMS norms, GDN kernels and router still compute in float32 internally),
max |next-token logit difference| over the three prompts (lengths 1, 7, 70; logits are O(1)), greedy
16 tokens equal for every prompt — run once with hybrid_hf_check.py (2026-11-26):
  tiny-qwen35.gguf      (Qwen3_5ForCausalLM)     2.04e-06
  tiny-qwen35moe.gguf   (Qwen3_5MoeForCausalLM)  2.18e-06
  tiny-qwen3next.gguf   (Qwen3NextForCausalLM)   2.49e-06
(Sensitivity: swapping the two value-head orders moves the 70-token logits by 2.9-4.1.)

Use:  hybrid_reference.py MODEL.gguf [--prompt 1,2,3] [--steps 16]
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

CHUNK = 64


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _l2(x):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)


class HybridModel:
    def __init__(self, arch: str, kv: dict, tensors: dict[str, np.ndarray]):
        if arch not in ("qwen3next", "qwen35", "qwen35moe"):
            raise ValueError(f"unsupported architecture {arch!r}")
        self.arch, self.kv, self.t = arch, kv, tensors
        g = lambda key, default=None: kv.get(f"{arch}.{key}", default)  # noqa: E731
        self.n_layer = int(g("block_count"))
        self.n_embd = int(g("embedding_length"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv"))
        self.head_dim = int(g("attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(g("rope.dimension_count", self.head_dim))
        self.theta = float(g("rope.freq_base", 10000.0))
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.n_expert = int(g("expert_count", 0))
        self.n_expert_used = int(g("expert_used_count", 0))
        self.conv_k = int(g("ssm.conv_kernel"))
        self.d_k = int(g("ssm.state_size"))
        self.k_heads = int(g("ssm.group_count"))
        self.v_heads = int(g("ssm.time_step_rank"))
        self.d_v = int(g("ssm.inner_size")) // self.v_heads
        interval = int(g("full_attention_interval", 4))
        self.recurrent = [(i + 1) % interval != 0 for i in range(self.n_layer)]
        self.embd = tensors["token_embd.weight"]
        self.output = tensors.get("output.weight", self.embd)
        self.n_vocab = self.embd.shape[0]
        self.tiled_v = arch in ("qwen35", "qwen35moe")
        self.stats: dict = {}

    @classmethod
    def from_gguf(cls, path: str) -> "HybridModel":
        from gguf import GGUFReader, GGMLQuantizationType

        reader = GGUFReader(path)
        kv = {}
        for name, field in reader.fields.items():
            if name.startswith("GGUF.") or name.startswith("tokenizer."):
                continue
            kv[name] = field.contents()
        tensors = {}
        for t in reader.tensors:
            if t.tensor_type != GGMLQuantizationType.F32:
                raise ValueError(f"{t.name}: only F32 tensors are supported, not {t.tensor_type.name}")
            dims = [int(d) for d in reversed(list(t.shape))]  # torch layout [.., out, in]
            tensors[t.name] = np.asarray(t.data, dtype=np.float64).reshape(dims)
        return cls(kv["general.architecture"], kv, tensors)

    # ----- state -----
    def new_state(self) -> list:
        conv_dim = 2 * self.k_heads * self.d_k + self.v_heads * self.d_v
        state = []
        for i in range(self.n_layer):
            if self.recurrent[i]:
                state.append({"conv": np.zeros((self.conv_k - 1, conv_dim)),
                              "S": np.zeros((self.v_heads, self.d_k, self.d_v))})
            else:
                state.append({"k": np.zeros((0, self.n_head_kv, self.head_dim)),
                              "v": np.zeros((0, self.n_head_kv, self.head_dim))})
        return state

    def _w(self, name):
        return self.t[name]

    # ----- GDN -----
    def _gdn_inputs(self, il, x):
        """x [T, n_embd] -> (qkv [T, conv_dim], z [T, v_heads, d_v], b [T, v_heads], a [T, v_heads])."""
        b_ = f"blk.{il}."
        nk, nv, dk, dv = self.k_heads, self.v_heads, self.d_k, self.d_v
        r = nv // nk
        T = x.shape[0]
        if b_ + "attn_qkv.weight" in self.t:
            qkv = x @ self._w(b_ + "attn_qkv.weight").T
            z = (x @ self._w(b_ + "attn_gate.weight").T).reshape(T, nv, dv)
        else:  # legacy qwen3next: ssm_in rows grouped per key head
            m = (x @ self._w(b_ + "ssm_in.weight").T).reshape(T, nk, 2 * dk + 2 * r * dv)
            q, k = m[:, :, :dk], m[:, :, dk:2 * dk]
            v, z = m[:, :, 2 * dk:2 * dk + r * dv], m[:, :, 2 * dk + r * dv:]
            qkv = np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], axis=1)
            z = z.reshape(T, nv, dv)
        if self.arch == "qwen3next":
            ba = (x @ self._w(b_ + "ssm_ba.weight").T).reshape(T, nk, 2 * r)
            b, a = ba[:, :, :r].reshape(T, nv), ba[:, :, r:].reshape(T, nv)
        else:
            b = x @ self._w(b_ + "ssm_beta.weight").T
            a = x @ self._w(b_ + "ssm_alpha.weight").T
        return qkv, z, b, a

    def _key_head_of(self, j):
        return j % self.k_heads if self.tiled_v else j // (self.v_heads // self.k_heads)

    def _gdn(self, il, x, st, mode):
        b_ = f"blk.{il}."
        nk, nv, dk, dv = self.k_heads, self.v_heads, self.d_k, self.d_v
        T = x.shape[0]
        qkv, z, b, a = self._gdn_inputs(il, x)
        # causal depthwise conv over [conv state (K-1 rows) ; new rows]
        w = self._w(b_ + "ssm_conv1d.weight")  # [conv_dim, K]
        K = self.conv_k
        u = np.concatenate([st["conv"], qkv], axis=0)
        conv = np.zeros_like(qkv)
        for t in range(T):
            conv[t] = np.sum(u[t:t + K].T * w, axis=1)
        st["conv"] = u[-(K - 1):].copy() if K > 1 else st["conv"]
        conv = _silu(conv)
        q = conv[:, :nk * dk].reshape(T, nk, dk)
        k = conv[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
        v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
        q = _l2(q) / math.sqrt(dk)
        k = _l2(k)
        kh = [self._key_head_of(j) for j in range(nv)]
        q, k = q[:, kh], k[:, kh]  # [T, nv, dk]
        beta = _sigmoid(b)
        g = self._w(b_ + "ssm_a")[None, :] * _softplus(a + self._w(b_ + "ssm_dt.bias")[None, :])
        if mode == "recurrent":
            o = _gdn_recurrent(q, k, v, g, beta, st["S"])
        else:
            o = _gdn_chunked(q, k, v, g, beta, st["S"])
        y = _rms(o, self._w(b_ + "ssm_norm.weight"), self.eps) * _silu(z)
        return y.reshape(T, nv * dv) @ self._w(b_ + "ssm_out.weight").T

    # ----- attention -----
    def _rope(self, x, pos):
        """NeoX rotation of the first n_rot dims; x [T, heads, head_dim], pos [T]."""
        half = self.n_rot // 2
        inv = self.theta ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x = x.copy()
        x1, x2 = x[..., :half].copy(), x[..., half:self.n_rot].copy()
        x[..., :half] = x1 * cos - x2 * sin
        x[..., half:self.n_rot] = x2 * cos + x1 * sin
        return x

    def _attn(self, il, x, st, pos0):
        b_ = f"blk.{il}."
        T, hd, nh, nkv = x.shape[0], self.head_dim, self.n_head, self.n_head_kv
        qg = (x @ self._w(b_ + "attn_q.weight").T).reshape(T, nh, 2 * hd)
        q, gate = qg[:, :, :hd], qg[:, :, hd:].reshape(T, nh * hd)
        k = (x @ self._w(b_ + "attn_k.weight").T).reshape(T, nkv, hd)
        v = (x @ self._w(b_ + "attn_v.weight").T).reshape(T, nkv, hd)
        q = _rms(q, self._w(b_ + "attn_q_norm.weight"), self.eps)
        k = _rms(k, self._w(b_ + "attn_k_norm.weight"), self.eps)
        pos = np.arange(pos0, pos0 + T)
        q, k = self._rope(q, pos), self._rope(k, pos)
        st["k"] = np.concatenate([st["k"], k], axis=0)
        st["v"] = np.concatenate([st["v"], v], axis=0)
        K, V = st["k"], st["v"]
        out = np.zeros((T, nh, hd))
        group = nh // nkv
        for h in range(nh):
            s = (q[:, h] @ K[:, h // group].T) / math.sqrt(hd)  # [T, pos0+T]
            mask = np.arange(K.shape[0])[None, :] > pos[:, None]
            s = np.where(mask, -np.inf, s)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, h] = s @ V[:, h // group]
        out = out.reshape(T, nh * hd) * _sigmoid(gate)
        return out @ self._w(b_ + "attn_output.weight").T

    # ----- FFN -----
    def _ffn(self, il, x):
        b_ = f"blk.{il}."
        swiglu = lambda g, u, d, h: (_silu(h @ g.T) * (h @ u.T)) @ d.T  # noqa: E731
        if b_ + "ffn_gate_inp.weight" not in self.t:
            return swiglu(self._w(b_ + "ffn_gate.weight"), self._w(b_ + "ffn_up.weight"),
                          self._w(b_ + "ffn_down.weight"), x)
        logits = x @ self._w(b_ + "ffn_gate_inp.weight").T  # [T, E]
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ge, ue, de = (self._w(b_ + n) for n in ("ffn_gate_exps.weight", "ffn_up_exps.weight",
                                                 "ffn_down_exps.weight"))
        out = np.zeros_like(x)
        n = self.n_expert_used
        for t in range(x.shape[0]):
            order = np.argsort(-p[t], kind="stable")
            top = order[:n]
            # how close the top-k choice came to a tie (router logits of the k-th and (k+1)-th)
            gap = logits[t, order[n - 1]] - logits[t, order[n]] if n < len(order) else float("inf")
            self.stats["min_router_logit_gap"] = min(self.stats.get("min_router_logit_gap", float("inf")),
                                                     float(gap))
            wts = p[t, top] / p[t, top].sum()
            for e, wt in zip(top, wts):
                out[t] += wt * swiglu(ge[e], ue[e], de[e], x[t:t + 1])[0]
        if b_ + "ffn_up_shexp.weight" in self.t:
            sh = swiglu(self._w(b_ + "ffn_gate_shexp.weight"), self._w(b_ + "ffn_up_shexp.weight"),
                        self._w(b_ + "ffn_down_shexp.weight"), x)
            gate = x @ self._w(b_ + "ffn_gate_inp_shexp.weight").reshape(-1)
            out += _sigmoid(gate)[:, None] * sh
        return out

    # ----- forward -----
    def forward(self, ids, state, pos0, gdn="recurrent"):
        """Runs tokens `ids` after `pos0` earlier ones; updates `state`; returns logits [T, vocab]."""
        h = self.embd[np.asarray(ids)]
        for il in range(self.n_layer):
            x = _rms(h, self._w(f"blk.{il}.attn_norm.weight"), self.eps)
            if self.recurrent[il]:
                h = h + self._gdn(il, x, state[il], gdn)
            else:
                h = h + self._attn(il, x, state[il], pos0)
            x = _rms(h, self._w(f"blk.{il}.post_attention_norm.weight"), self.eps)
            h = h + self._ffn(il, x)
        h = _rms(h, self._w("output_norm.weight"), self.eps)
        return h @ self.output.T

    def prefill(self, ids, gdn="recurrent"):
        """Next-token logits after the prompt. gdn='recurrent': one token at a time (ground truth);
        gdn='chunked': the whole prompt at once with the chunked GDN form."""
        state = self.new_state()
        if gdn == "recurrent":
            for i, tok in enumerate(ids):
                logits = self.forward([tok], state, i)[-1]
        else:
            logits = self.forward(list(ids), state, 0, gdn="chunked")[-1]
        return logits, state

    def greedy(self, ids, steps):
        """Greedy continuation (token by token); returns (tokens, top1 - top2 margins)."""
        logits, state = self.prefill(ids)
        pos, out, margins = len(ids), [], []
        for _ in range(steps):
            top = np.argsort(-logits, kind="stable")
            margins.append(float(logits[top[0]] - logits[top[1]]))
            tok = int(top[0])
            out.append(tok)
            logits = self.forward([tok], state, pos)[-1]
            pos += 1
        return out, margins


def _gdn_recurrent(q, k, v, g, beta, S):
    """q, k [T, H, dk], v [T, H, dv], g, beta [T, H], S [H, dk, dv] (updated in place)."""
    T, H = g.shape
    o = np.zeros((T, H, v.shape[2]))
    for t in range(T):
        for j in range(H):
            S[j] *= math.exp(g[t, j])
            pred = S[j].T @ k[t, j]
            S[j] += np.outer(k[t, j], beta[t, j] * (v[t, j] - pred))
            o[t, j] = S[j].T @ q[t, j]
    return o


def _gdn_chunked(q, k, v, g, beta, S):
    """The same recurrence in chunks of CHUNK tokens (UT transform within a chunk)."""
    T, H = g.shape
    o = np.zeros((T, H, v.shape[2]))
    for c0 in range(0, T, CHUNK):
        c1 = min(T, c0 + CHUNK)
        n = c1 - c0
        for j in range(H):
            Q, Kc, Vc = q[c0:c1, j], k[c0:c1, j], v[c0:c1, j]
            bt = beta[c0:c1, j]
            G = np.cumsum(g[c0:c1, j])  # log of the decay from the chunk start through token i
            D = np.exp(G[:, None] - G[None, :])  # decay between j and i (used for j <= i)
            lower = np.tril(np.ones((n, n)), -1)
            A = (bt[:, None] * (Kc @ Kc.T)) * D * lower
            Tm = np.linalg.inv(np.eye(n) + A)  # unit lower triangular system
            U = Tm @ (bt[:, None] * Vc)
            W = Tm @ (bt[:, None] * Kc * np.exp(G)[:, None])
            Vn = U - W @ S[j]
            Qd = Q * np.exp(G)[:, None]
            P = (Q @ Kc.T) * D * np.tril(np.ones((n, n)))
            o[c0:c1, j] = Qd @ S[j] + P @ Vn
            S[j] = math.exp(G[-1]) * S[j] + (Kc * np.exp(G[-1] - G)[:, None]).T @ Vn
    return o


def main() -> None:
    ap = argparse.ArgumentParser(description="float64 reference logits for a hybrid GGUF")
    ap.add_argument("model")
    ap.add_argument("--prompt", default="72", help="comma-separated token ids")
    ap.add_argument("--steps", type=int, default=16)
    args = ap.parse_args()
    ids = [int(x) for x in args.prompt.split(",")]
    m = HybridModel.from_gguf(args.model)
    logits, _ = m.prefill(ids)
    chunked, _ = m.prefill(ids, gdn="chunked")
    top = np.argsort(-logits)[:5]
    print(f"arch {m.arch}: layers {['gdn' if r else 'attn' for r in m.recurrent]}")
    print("top-5 next tokens:", [(int(i), round(float(logits[i]), 6)) for i in top])
    print(f"chunked vs recurrent max |diff| {np.max(np.abs(chunked - logits)):.3e}")
    print("greedy:", m.greedy(ids, args.steps)[0])


if __name__ == "__main__":
    sys.exit(main())
