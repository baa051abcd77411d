#!/usr/bin/env python3
"""Checks the hybrid numpy reference against HF transformers' own Qwen3-Next / Qwen3.5 modules.

For each fixture of make_hybrid_fixtures.py, builds the transformers model (Qwen3NextForCausalLM,
Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM) from the *HF-layout* weights the fixture was converted
from (same seeds), runs it in float64 on the prompts of tests/data/hybrid/reference.json (whole
prompt at once: transformers' chunked gated-delta-rule path, no cache) and compares its next-token
logits with the committed numpy reference logits (computed from the GGUF, token by token), and its
16 greedy tokens (full recompute each step) with the committed ones. This covers the numpy forward
and the HF -> GGUF conversion conventions together. Prints one line per fixture and exits non-zero
past --tol.

Note: transformers computes its RMS norms, the gated delta rule and the router softmax in float32
even in a float64 model, so agreement is at the float32 level (~1e-6), not 1e-12.

Needs torch + transformers (tools/oracle/requirements.txt).
Run: tools/oracle/.venv/bin/python tools/oracle/hybrid_hf_check.py
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hybrid_fixtures as mk  # noqa: E402


def hf_model(cfg: dict):
    import torch
    import transformers

    common = dict(
        vocab_size=mk.VOCAB_SIZE, hidden_size=cfg["hidden"], num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"], head_dim=cfg["head_dim"],
        rms_norm_eps=cfg["rms_eps"], hidden_act="silu", max_position_embeddings=cfg["context_length"],
        linear_conv_kernel_dim=cfg["conv_kernel"], linear_key_head_dim=cfg["lin_k_dim"],
        linear_value_head_dim=cfg["lin_v_dim"], linear_num_key_heads=cfg["lin_k_heads"],
        linear_num_value_heads=cfg["lin_v_heads"], tie_word_embeddings=cfg["tied"],
        layer_types=["linear_attention" if mk.is_recurrent(cfg, i) else "full_attention"
                     for i in range(cfg["layers"])],
    )
    rope = {"rope_type": "default", "rope_theta": cfg["rope_theta"],
            "partial_rotary_factor": cfg["partial_rotary_factor"]}
    moe = dict(num_experts=cfg.get("experts"), num_experts_per_tok=cfg.get("experts_used"),
               moe_intermediate_size=cfg.get("expert_ffn"),
               shared_expert_intermediate_size=cfg.get("shared_ffn"))
    if cfg["arch"] == "qwen3next":
        conf = transformers.Qwen3NextConfig(**common, **moe, intermediate_size=cfg["ffn"],
                                            decoder_sparse_step=1, mlp_only_layers=[],
                                            norm_topk_prob=True, rope_parameters=rope)
        cls = transformers.Qwen3NextForCausalLM
    elif cfg["arch"] == "qwen35":
        rope["mrope_section"] = cfg["mrope_sections"][:3]
        rope["mrope_interleaved"] = True
        conf = transformers.Qwen3_5TextConfig(**common, intermediate_size=cfg["ffn"], rope_parameters=rope)
        cls = transformers.Qwen3_5ForCausalLM
    else:
        rope["mrope_section"] = cfg["mrope_sections"][:3]
        rope["mrope_interleaved"] = True
        conf = transformers.Qwen3_5MoeTextConfig(**common, **moe, rope_parameters=rope)
        cls = transformers.Qwen3_5MoeForCausalLM
    conf._attn_implementation = "eager"
    conf._experts_implementation = "eager"  # the grouped_mm path refuses float64
    torch.manual_seed(0)
    model = cls(conf).to(torch.float64).eval()
    weights = {k: torch.from_numpy(v.astype(np.float64)) for k, v in mk.hf_weights(cfg).items()}
    own = model.state_dict()
    missing = [k for k in own if k not in weights and not (cfg["tied"] and k == "lm_head.weight")]
    unexpected = [k for k in weights if k not in own]
    if missing or unexpected:
        raise SystemExit(f"{cfg['arch']}: state dict mismatch: missing {missing} unexpected {unexpected}")
    for k, v in weights.items():
        if tuple(own[k].shape) != tuple(v.shape):
            raise SystemExit(f"{cfg['arch']}: {k} shape {tuple(v.shape)} != HF {tuple(own[k].shape)}")
    model.load_state_dict(weights, strict=False)
    if cfg["tied"]:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def main() -> int:
    import torch
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", default=os.path.join(mk.OUT_DIR, "reference.json"))
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    ref = json.load(open(args.reference))
    torch.set_grad_enabled(False)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    ok = True
    for fx in ref["fixtures"]:
        cfg = mk.CONFIGS[fx["arch"]]
        model = hf_model(cfg)
        worst, greedy_ok = 0.0, True
        for p in fx["prompts"]:
            ids = list(p["ids"])
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1].numpy()
            diff = float(np.max(np.abs(logits - np.asarray(p["logits"]))))
            worst = max(worst, diff)
            seq, toks = list(ids), []
            for _ in range(len(p["greedy"])):
                nxt = int(torch.argmax(model(torch.tensor([seq]), use_cache=False).logits[0, -1]))
                toks.append(nxt)
                seq.append(nxt)
            if toks != p["greedy"]:
                greedy_ok = False
                print(f"  {fx['arch']} len {len(ids)}: HF greedy {toks} != reference {p['greedy']}")
        print(f"{fx['arch']}: max |HF - numpy| next-token logit {worst:.3e} over prompts "
              f"{[len(p['ids']) for p in fx['prompts']]}; greedy 16 tokens {'equal' if greedy_ok else 'DIFFER'}")
        ok = ok and worst <= args.tol and greedy_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
