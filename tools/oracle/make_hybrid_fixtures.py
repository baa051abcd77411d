#!/usr/bin/env python3
"""Small random hybrid (Gated-DeltaNet + gated attention) GGUF fixtures, and their reference data.

Writes tests/data/hybrid/tiny-{qwen35,qwen35moe,qwen3next}.gguf and tests/data/hybrid/reference.json.

How a fixture is made: the weights are first drawn in *Hugging Face layout* (the parameter names and
shapes of transformers' Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM / Qwen3NextForCausalLM, norm
weights zero-centred as HF stores them), seeded per tensor, then converted to GGUF the way llama.cpp's
converter does (conversion/qwen.py, classes Qwen2MoeModel, Qwen3NextModel,
_LinearAttentionVReorderBase; names from gguf-py's tensor_mapping.py). The conversion is
re-implemented here in numpy; the HF-layout weights are what `hybrid_hf_check.py` loads into
transformers, so that check covers this conversion as well as the numpy reference.

HF -> GGUF conventions (llama.cpp conversion/qwen.py, src/models/qwen3next.cpp, src/models/qwen35.cpp):
  * every `*norm.weight` except `linear_attn.norm.weight` gets +1 (HF Qwen3NextRMSNorm computes
    x_hat * (1 + w); llama.cpp's RMS norm multiplies by the stored weight): attn_norm,
    post_attention_norm, output_norm, attn_q_norm, attn_k_norm. ssm_norm is stored as is
    (Qwen3NextRMSNormGated multiplies by w, initialised to ones).
  * A_log -> blk.N.ssm_a (no .weight suffix) = -exp(A_log); dt_bias -> blk.N.ssm_dt.bias.
  * conv1d.weight [conv_dim, 1, K] -> squeezed [conv_dim, K], i.e. ggml ne {K, conv_dim};
    channels in the order of the qkv projection (q | k | v).
  * qwen3next: in_proj_qkvz rows are grouped per key head, [q_g | k_g | v_g (r heads) | z_g (r heads)]
    for g in key heads (r = v_heads / k_heads); the converter regroups them into
    attn_qkv = [all q | all k | all v] and attn_gate = [all z] (the older `ssm_in` keeps the grouped
    rows; the reference reads both). in_proj_ba -> ssm_ba unchanged: per key head [b (r) | a (r)].
    Value heads stay in HF order, so value head j uses key head j // r (repeat-interleave).
  * qwen35 / qwen35moe: in_proj_qkv -> attn_qkv, in_proj_z -> attn_gate, in_proj_b -> ssm_beta,
    in_proj_a -> ssm_alpha, and when k_heads != v_heads the *value heads are reordered* from
    grouped (HF: head g*r + i) to tiled (GGUF: head i*k_heads + g) in attn_qkv's v rows,
    attn_gate rows, ssm_beta/ssm_alpha rows, ssm_a, ssm_dt, ssm_conv1d's v channels and ssm_out's
    input columns. So in these files value head j uses key head j % k_heads.
  * attention q_proj -> attn_q unchanged: per head [query (head_dim) | gate (head_dim)].
  * MoE: mlp.gate -> ffn_gate_inp [E, H]; experts.gate_up_proj [E, 2I, H] split into
    ffn_gate_exps = [:, :I] and ffn_up_exps = [:, I:]; experts.down_proj -> ffn_down_exps [E, H, I];
    shared_expert.{gate,up,down}_proj -> ffn_{gate,up,down}_shexp; shared_expert_gate [1, H] ->
    ffn_gate_inp_shexp (written here 1-D, ne {H}; llama.cpp accepts {H} or {H, 1}).
  * numpy arrays below are in torch layout [out, in]; GGUF stores the reversed dims (ggml ne).

Run (needs only numpy + gguf):  tools/oracle/.venv/bin/python tools/oracle/make_hybrid_fixtures.py
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(REPO, "tests", "data", "hybrid")

# Shared tiny dimensions (see tests/data/hybrid/reference.json for the values actually written).
BASE = dict(
    hidden=64,
    layers=4,
    full_attention_interval=4,  # layers 0-2 Gated DeltaNet, layer 3 gated attention
    heads=4,
    kv_heads=2,
    head_dim=32,
    partial_rotary_factor=0.25,  # n_rot = 8 (NeoX halves)
    rope_theta=10000.0,
    rms_eps=1e-6,
    lin_k_heads=2,
    lin_v_heads=4,
    lin_k_dim=16,
    lin_v_dim=16,
    conv_kernel=4,
    context_length=4096,
)
CONFIGS = {
    "qwen35": dict(BASE, arch="qwen35", ffn=128, tied=True, mrope_sections=[2, 1, 1, 0], seed=35),
    "qwen35moe": dict(BASE, arch="qwen35moe", experts=8, experts_used=2, expert_ffn=16,
                      shared_ffn=32, tied=False, mrope_sections=[2, 1, 1, 0], seed=3535),
    "qwen3next": dict(BASE, arch="qwen3next", experts=8, experts_used=2, expert_ffn=16,
                      shared_ffn=32, ffn=64, tied=False, seed=4),
}

# Tokenizer: 256 byte-level symbols (GPT-2 byte order), a few merges, three control tokens.
MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("Ġt", "he"), ("e", "r")]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}")


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable symbol table, as a list indexed by byte."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def vocab() -> tuple[list[str], list[int], list[str]]:
    tokens = bytes_to_unicode() + ["".join(m) for m in MERGES] + SPECIALS
    types = [1] * (256 + len(MERGES)) + [3] * len(SPECIALS)  # 1 normal, 3 control
    merges = [f"{a} {b}" for a, b in MERGES]
    return tokens, types, merges


VOCAB_SIZE = 256 + len(MERGES) + len(SPECIALS)


RES_STD = 0.2


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def hf_weights(cfg: dict) -> dict[str, np.ndarray]:
    """Random weights in HF layout and naming (float32), deterministic in cfg['seed']."""
    seed = cfg["seed"]
    out: dict[str, np.ndarray] = {}

    def normal(name, shape, std=0.02, mean=0.0):
        out[name] = (mean + std * rng_for(seed, name).standard_normal(shape)).astype(np.float32)

    def uniform(name, shape, lo, hi):
        out[name] = rng_for(seed, name).uniform(lo, hi, shape).astype(np.float32)

    H, V = cfg["hidden"], VOCAB_SIZE
    hd, nh, nkv = cfg["head_dim"], cfg["heads"], cfg["kv_heads"]
    nk, nv, dk, dv = cfg["lin_k_heads"], cfg["lin_v_heads"], cfg["lin_k_dim"], cfg["lin_v_dim"]
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    # Matrices ~N(0, 0.02), except those that write the residual stream (out_proj, o_proj, down
    # projections: 0.2) and the head (0.1), so that the layers, not the token's own embedding,
    # decide the logits and greedy margins stay far above float32 noise.
    normal("model.embed_tokens.weight", (V, H), std=0.1 if cfg["tied"] else 0.02)
    if not cfg["tied"]:
        normal("lm_head.weight", (V, H), std=0.1)
    normal("model.norm.weight", (H,), std=0.1)  # zero-centred (HF applies 1 + w)
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        normal(p + "input_layernorm.weight", (H,), std=0.1)
        normal(p + "post_attention_layernorm.weight", (H,), std=0.1)
        if is_recurrent(cfg, i):
            la = p + "linear_attn."
            if cfg["arch"] == "qwen3next":
                normal(la + "in_proj_qkvz.weight", (2 * key_dim + 2 * value_dim, H))
                normal(la + "in_proj_ba.weight", (2 * nv, H), std=0.2)
            else:
                normal(la + "in_proj_qkv.weight", (conv_dim, H))
                normal(la + "in_proj_z.weight", (value_dim, H))
                normal(la + "in_proj_b.weight", (nv, H), std=0.2)
                normal(la + "in_proj_a.weight", (nv, H), std=0.2)
            normal(la + "conv1d.weight", (conv_dim, 1, cfg["conv_kernel"]), std=0.3)
            # Decays exp(g) spread over (0.25, 1): g = -exp(A_log) * softplus(a + dt_bias).
            uniform(la + "dt_bias", (nv,), -4.0, 0.0)
            out[la + "A_log"] = np.log(rng_for(seed, la + "A_log").uniform(0.05, 2.0, (nv,))).astype(np.float32)
            normal(la + "norm.weight", (dv,), std=0.1, mean=1.0)  # plain weight (not zero-centred)
            normal(la + "out_proj.weight", (H, value_dim), std=RES_STD)
        else:
            sa = p + "self_attn."
            normal(sa + "q_proj.weight", (nh * hd * 2, H))
            normal(sa + "k_proj.weight", (nkv * hd, H))
            normal(sa + "v_proj.weight", (nkv * hd, H))
            normal(sa + "o_proj.weight", (H, nh * hd), std=RES_STD)
            normal(sa + "q_norm.weight", (hd,), std=0.1)
            normal(sa + "k_norm.weight", (hd,), std=0.1)
        m = p + "mlp."
        if "experts" in cfg:
            E, I, S = cfg["experts"], cfg["expert_ffn"], cfg["shared_ffn"]
            normal(m + "gate.weight", (E, H), std=0.3)  # wide router: no near-ties in the top-k
            normal(m + "experts.gate_up_proj", (E, 2 * I, H))
            normal(m + "experts.down_proj", (E, H, I), std=RES_STD)
            normal(m + "shared_expert.gate_proj.weight", (S, H))
            normal(m + "shared_expert.up_proj.weight", (S, H))
            normal(m + "shared_expert.down_proj.weight", (H, S), std=RES_STD)
            normal(m + "shared_expert_gate.weight", (1, H), std=0.2)
        else:
            F = cfg["ffn"]
            normal(m + "gate_proj.weight", (F, H))
            normal(m + "up_proj.weight", (F, H))
            normal(m + "down_proj.weight", (H, F), std=RES_STD)
    return out


def is_recurrent(cfg: dict, layer: int) -> bool:
    return (layer + 1) % cfg["full_attention_interval"] != 0


def _tiled(t: np.ndarray, axis: int, nk: int, r: int, hd: int) -> np.ndarray:
    """Value heads grouped by key head (HF: g*r + i) -> tiled (llama.cpp qwen35: i*nk + g)."""
    t = np.moveaxis(t, axis, 0)
    rest = t.shape[1:]
    t = t.reshape(nk, r, hd, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest)))
    return np.moveaxis(t.reshape(nk * r * hd, *rest), 0, axis)


def hf_to_gguf(cfg: dict, hf: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """llama.cpp's HF -> GGUF tensor conversion for these three architectures (torch layout)."""
    arch = cfg["arch"]
    nk, nv, dk, dv = cfg["lin_k_heads"], cfg["lin_v_heads"], cfg["lin_k_dim"], cfg["lin_v_dim"]
    r = nv // nk
    key_dim = nk * dk
    tiled = arch in ("qwen35", "qwen35moe") and nk != nv
    g: dict[str, np.ndarray] = {}
    g["token_embd.weight"] = hf["model.embed_tokens.weight"]
    if not cfg["tied"]:
        g["output.weight"] = hf["lm_head.weight"]
    g["output_norm.weight"] = hf["model.norm.weight"] + np.float32(1)
    for i in range(cfg["layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        g[b + "attn_norm.weight"] = hf[p + "input_layernorm.weight"] + np.float32(1)
        g[b + "post_attention_norm.weight"] = hf[p + "post_attention_layernorm.weight"] + np.float32(1)
        if is_recurrent(cfg, i):
            la = p + "linear_attn."
            conv = hf[la + "conv1d.weight"][:, 0, :]
            a_log, dt = hf[la + "A_log"], hf[la + "dt_bias"]
            out_proj = hf[la + "out_proj.weight"]
            if arch == "qwen3next":
                qkvz = hf[la + "in_proj_qkvz.weight"]
                grouped = qkvz.reshape(nk, 2 * dk + 2 * r * dv, -1)
                q, k = grouped[:, :dk], grouped[:, dk:2 * dk]
                v, z = grouped[:, 2 * dk:2 * dk + r * dv], grouped[:, 2 * dk + r * dv:]
                flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
                g[b + "attn_qkv.weight"] = np.concatenate([flat(q), flat(k), flat(v)], axis=0)
                g[b + "attn_gate.weight"] = flat(z)
                g[b + "ssm_ba.weight"] = hf[la + "in_proj_ba.weight"]
            else:
                qkv = hf[la + "in_proj_qkv.weight"]
                zw, bw, aw = hf[la + "in_proj_z.weight"], hf[la + "in_proj_b.weight"], hf[la + "in_proj_a.weight"]
                if tiled:
                    qkv = np.concatenate([qkv[:2 * key_dim], _tiled(qkv[2 * key_dim:], 0, nk, r, dv)])
                    zw = _tiled(zw, 0, nk, r, dv)
                    bw, aw = _tiled(bw, 0, nk, r, 1), _tiled(aw, 0, nk, r, 1)
                    a_log, dt = _tiled(a_log, 0, nk, r, 1), _tiled(dt, 0, nk, r, 1)
                    conv = np.concatenate([conv[:2 * key_dim], _tiled(conv[2 * key_dim:], 0, nk, r, dv)])
                    out_proj = _tiled(out_proj, 1, nk, r, dv)
                g[b + "attn_qkv.weight"] = qkv
                g[b + "attn_gate.weight"] = zw
                g[b + "ssm_beta.weight"] = bw
                g[b + "ssm_alpha.weight"] = aw
            g[b + "ssm_conv1d.weight"] = np.ascontiguousarray(conv)
            g[b + "ssm_a"] = (-np.exp(a_log.astype(np.float64))).astype(np.float32)
            g[b + "ssm_dt.bias"] = dt
            g[b + "ssm_norm.weight"] = hf[la + "norm.weight"]
            g[b + "ssm_out.weight"] = out_proj
        else:
            sa = p + "self_attn."
            g[b + "attn_q.weight"] = hf[sa + "q_proj.weight"]
            g[b + "attn_k.weight"] = hf[sa + "k_proj.weight"]
            g[b + "attn_v.weight"] = hf[sa + "v_proj.weight"]
            g[b + "attn_output.weight"] = hf[sa + "o_proj.weight"]
            g[b + "attn_q_norm.weight"] = hf[sa + "q_norm.weight"] + np.float32(1)
            g[b + "attn_k_norm.weight"] = hf[sa + "k_norm.weight"] + np.float32(1)
        m = p + "mlp."
        if "experts" in cfg:
            I = cfg["expert_ffn"]
            gate_up = hf[m + "experts.gate_up_proj"]
            g[b + "ffn_gate_inp.weight"] = hf[m + "gate.weight"]
            g[b + "ffn_gate_exps.weight"] = np.ascontiguousarray(gate_up[:, :I])
            g[b + "ffn_up_exps.weight"] = np.ascontiguousarray(gate_up[:, I:])
            g[b + "ffn_down_exps.weight"] = hf[m + "experts.down_proj"]
            g[b + "ffn_gate_shexp.weight"] = hf[m + "shared_expert.gate_proj.weight"]
            g[b + "ffn_up_shexp.weight"] = hf[m + "shared_expert.up_proj.weight"]
            g[b + "ffn_down_shexp.weight"] = hf[m + "shared_expert.down_proj.weight"]
            g[b + "ffn_gate_inp_shexp.weight"] = hf[m + "shared_expert_gate.weight"].reshape(-1)
        else:
            g[b + "ffn_gate.weight"] = hf[m + "gate_proj.weight"]
            g[b + "ffn_up.weight"] = hf[m + "up_proj.weight"]
            g[b + "ffn_down.weight"] = hf[m + "down_proj.weight"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in g.items()}


def write_gguf(cfg: dict, tensors: dict[str, np.ndarray], path: str) -> None:
    import gguf

    arch = cfg["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tessera-tiny-{arch}")
    w.add_uint32("general.quantization_version", 2)
    w.add_block_count(cfg["layers"])
    w.add_context_length(cfg["context_length"])
    w.add_embedding_length(cfg["hidden"])
    if "ffn" in cfg:
        w.add_feed_forward_length(cfg["ffn"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["partial_rotary_factor"]))
    if "mrope_sections" in cfg:
        w.add_rope_dimension_sections(cfg["mrope_sections"])
    w.add_layer_norm_rms_eps(cfg["rms_eps"])
    w.add_vocab_size(VOCAB_SIZE)
    if "experts" in cfg:
        w.add_expert_count(cfg["experts"])
        w.add_expert_used_count(cfg["experts_used"])
        w.add_expert_feed_forward_length(cfg["expert_ffn"])
        w.add_expert_shared_feed_forward_length(cfg["shared_ffn"])
    w.add_ssm_conv_kernel(cfg["conv_kernel"])
    w.add_ssm_state_size(cfg["lin_k_dim"])
    w.add_ssm_group_count(cfg["lin_k_heads"])
    w.add_ssm_time_step_rank(cfg["lin_v_heads"])
    w.add_ssm_inner_size(cfg["lin_v_dim"] * cfg["lin_v_heads"])
    w.add_full_attention_interval(cfg["full_attention_interval"])
    tokens, types, merges = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for name in sorted(tensors, key=_tensor_order):
        w.add_tensor(name, tensors[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _tensor_order(name: str):
    if name.startswith("blk."):
        layer, rest = name[4:].split(".", 1)
        return (1, int(layer), rest)
    return (0 if name.startswith("token_embd") else 2, 0, name)


# Fixed prompts (token ids): lengths 1, 7 and 70 (more than one 64-token GDN chunk).
def prompts() -> list[list[int]]:
    rng = np.random.default_rng(20261126)
    return [[72], [int(x) for x in rng.integers(0, 256, 7)], [int(x) for x in rng.integers(0, 256, 70)]]


GREEDY_STEPS = 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--only-gguf", action="store_true", help="write the GGUFs, skip reference.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import hybrid_reference as ref

    import gguf as gguf_pkg
    doc = {
        "generator": "tools/oracle/make_hybrid_fixtures.py (weights) + tools/oracle/hybrid_reference.py "
                     "(float64 numpy, token-by-token recurrent Gated DeltaNet)",
        "versions": {"numpy": np.__version__, "gguf": getattr(gguf_pkg, "__version__", "0.19.0")},
        "greedy_steps": GREEDY_STEPS,
        "fixtures": [],
    }
    for name, cfg in CONFIGS.items():
        path = os.path.join(args.out, f"tiny-{name}.gguf")
        write_gguf(cfg, hf_to_gguf(cfg, hf_weights(cfg)), path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        if args.only_gguf:
            continue
        model = ref.HybridModel.from_gguf(path)
        entry = {"arch": cfg["arch"], "file": os.path.relpath(path, REPO),
                 "layer_kinds": ["gdn" if model.recurrent[i] else "attention" for i in range(model.n_layer)],
                 "vocab_size": model.n_vocab, "prompts": []}
        for ids in prompts():
            model.stats = {}
            logits, state = model.prefill(ids, gdn="recurrent")
            chunked, _ = model.prefill(ids, gdn="chunked")
            diff_chunk = float(np.max(np.abs(chunked - logits)))
            assert diff_chunk < 1e-10, (name, len(ids), diff_chunk)
            tokens, margins = model.greedy(ids, GREEDY_STEPS)
            gap = model.stats.get("min_router_logit_gap")
            # The fixtures are chosen (seeds) so that no greedy step and no expert choice is a near
            # tie a float32 implementation could flip.
            assert min(margins) > 5e-3 and (gap is None or gap > 1e-3), (name, len(ids), min(margins), gap)
            top = np.sort(logits)[::-1]
            entry["prompts"].append({
                "ids": ids,
                "logits": [float(x) for x in logits],
                "greedy": tokens,
                "greedy_min_margin": float(min(margins)),
                "first_margin": float(top[0] - top[1]),
                "chunked_vs_recurrent_max_abs": diff_chunk,
                "min_router_logit_gap": gap,
            })
            print(f"  {name} prompt len {len(ids)}: greedy {tokens} min margin {min(margins):.3g} "
                  f"chunked-recurrent {diff_chunk:.2e}")
        doc["fixtures"].append(entry)
    if not args.only_gguf:
        with open(os.path.join(args.out, "reference.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {os.path.join(args.out, 'reference.json')}")


if __name__ == "__main__":
    main()
