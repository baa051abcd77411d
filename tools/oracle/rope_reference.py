#!/usr/bin/env python3
"""Writes reference RoPE cos/sin tables for scaled RoPE (linear, YaRN, Llama 3 frequency factors).

The reference is HF transformers' RoPE initialisation (`ROPE_INIT_FUNCTIONS['linear' | 'yarn' |
'llama3']` in transformers.modeling_rope_utils), an implementation independent of ours and of
ggml: it yields each pair's inverse frequency (float32, as HF computes it) and the cos/sin
magnitude ("attention_factor"). We evaluate angle = pos * inv_freq, cos and sin in float64, so
the reference adds no float32 rounding of its own beyond HF's inv_freq.

Each case is described the way a GGUF describes it (llama.cpp keys: rope.scaling.type / factor /
original_context_length / attn_factor / yarn_beta_fast / yarn_beta_slow, and the rope_freqs
tensor), which the C++ tests map to our RopeParams:
  * linear: HF divides inv_freq by `factor`; GGUF rope.scaling.type = linear, factor.
  * yarn: HF's inv_freq ramp and attention_factor; GGUF rope.scaling.type = yarn with the same
    factor, original context and betas. When the GGUF carries rope.scaling.attn_factor = a,
    llama.cpp multiplies YaRN's own magnitude (1 + 0.1 ln factor) by a, so HF gets
    attention_factor = a * (1 + 0.1 ln factor).
  * llama3: HF rescales inv_freq (wavelength bands); llama.cpp's converter stores the same
    rescaling as rope_freqs.weight, a per-pair divisor. We derive the divisors from HF's own
    output (default inv_freq / llama3 inv_freq, rounded to float32 as a GGUF stores them) and
    check that dividing the angles by them reproduces HF's llama3 rotation.

As a sanity check the script also evaluates a float64 numpy port of ggml's rope_yarn /
ggml_rope_yarn_corr_dims formulas for every case and asserts that it agrees with HF (this
guards the mapping between HF's and llama.cpp's parameter conventions, not our C++).

Writes tests/data/rope/rope_reference.json; checked by cpu_rope_scaling_test (kernel) and
rope_scaling_test (ModelConfig -> runner table).

Usage (venv from tools/oracle/README.md):
  python tools/oracle/rope_reference.py
"""
import json
import math
import pathlib
import platform
import re

import numpy as np
import torch
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "rope" / "rope_reference.json"

# name, rope_dim, theta, HF rope parameters, GGUF-side description, positions (last = max - 1).
CASES = [
    {"name": "linear_f2_smollm2", "rope_dim": 64, "theta": 100000.0,
     "hf": {"rope_type": "linear", "factor": 2.0},
     "gguf": {"type": "linear", "factor": 2.0},
     "positions": [0, 1, 2, 3, 17, 255, 1000, 8191]},
    {"name": "linear_f4_llama2", "rope_dim": 128, "theta": 10000.0,
     "hf": {"rope_type": "linear", "factor": 4.0},
     "gguf": {"type": "linear", "factor": 4.0},
     "positions": [0, 1, 5, 97, 4096, 16383]},
    {"name": "yarn_f4_qwen25", "rope_dim": 128, "theta": 1000000.0,
     "hf": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
     "gguf": {"type": "yarn", "factor": 4.0, "original_context_length": 32768},
     "positions": [0, 1, 3, 100, 5000, 32768, 40000]},
    {"name": "yarn_f8_betas_attn", "rope_dim": 64, "theta": 10000.0,
     "hf": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
            "beta_fast": 16.0, "beta_slow": 2.0,
            "attention_factor": 0.75 * (1.0 + 0.1 * math.log(8.0))},
     "gguf": {"type": "yarn", "factor": 8.0, "original_context_length": 2048,
              "yarn_beta_fast": 16.0, "yarn_beta_slow": 2.0, "attn_factor": 0.75},
     "positions": [0, 1, 2, 31, 2047, 9000, 16383]},
    {"name": "llama3_f8_llama31", "rope_dim": 128, "theta": 500000.0,
     "hf": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
     "gguf": {"type": "none", "rope_freqs": True},
     "positions": [0, 1, 7, 300, 8191, 20000, 32767]},
]


def hf_inv_freq(case):
    """HF's (inv_freq float32 tensor as float64 array, attention_factor) for a case."""
    params = dict(case["hf"], rope_theta=case["theta"])
    max_pos = params.get("original_max_position_embeddings", 4096) * int(params["factor"])
    config = LlamaConfig(hidden_size=case["rope_dim"] * 4, num_attention_heads=4,
                         head_dim=case["rope_dim"], max_position_embeddings=max_pos,
                         rope_parameters=params)
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu")
    return inv_freq.to(torch.float64).numpy(), float(attention_factor)


def hf_default_inv_freq(case):
    """HF's unscaled inv_freq (what llama3 starts from), float32 values as float64."""
    config = LlamaConfig(hidden_size=case["rope_dim"] * 4, num_attention_heads=4,
                         head_dim=case["rope_dim"],
                         rope_parameters={"rope_type": "default", "rope_theta": case["theta"]})
    inv_freq, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return inv_freq.to(torch.float64).numpy()


def ggml_port(case, freq_factors):
    """float64 port of ggml's rope_yarn / corr dims: (angles [pairs] per unit position, mscale)."""
    dim, theta, gguf = case["rope_dim"], case["theta"], case["gguf"]
    pairs = np.arange(dim // 2, dtype=np.float64)
    extrap = theta ** (-2.0 * pairs / dim) / freq_factors
    kind = gguf["type"]
    freq_scale = 1.0 / gguf["factor"] if kind in ("linear", "yarn") else 1.0
    interp = freq_scale * extrap
    mscale = gguf.get("attn_factor", 1.0)
    if kind != "yarn":
        return interp, mscale
    n_ctx = gguf["original_context_length"]

    def corr_dim(n_rot):
        return dim * math.log(n_ctx / (n_rot * 2 * math.pi)) / (2 * math.log(theta))
    low = max(0.0, math.floor(corr_dim(gguf.get("yarn_beta_fast", 32.0))))
    high = min(dim - 1.0, math.ceil(corr_dim(gguf.get("yarn_beta_slow", 1.0))))
    mix = 1.0 - np.clip((pairs - low) / max(0.001, high - low), 0.0, 1.0)
    return interp * (1 - mix) + extrap * mix, mscale * (1.0 + 0.1 * math.log(1.0 / freq_scale))


def build_case(case):
    inv_freq, attention_factor = hf_inv_freq(case)
    out = {"name": case["name"], "rope_dim": case["rope_dim"], "theta": case["theta"],
           "hf_rope_parameters": case["hf"], "gguf": dict(case["gguf"]),
           "hf_attention_factor": attention_factor, "positions": case["positions"]}
    freq_factors = np.ones(case["rope_dim"] // 2)
    if case["gguf"].get("rope_freqs"):
        ratio = hf_default_inv_freq(case) / inv_freq
        freq_factors = ratio.astype(np.float32).astype(np.float64)
        out["gguf"]["rope_freqs"] = [float(f) for f in freq_factors.astype(np.float32)]
    rows = []
    for pos in case["positions"]:
        angle = pos * inv_freq
        cs = np.stack([np.cos(angle), np.sin(angle)], axis=1) * attention_factor
        rows.append([float(f"{v:.10g}") for v in cs.reshape(-1)])
    out["cos_sin"] = rows

    # HF's f32 inv_freq alone puts ~6e-8 * pos of error in the angle; a convention mismatch
    # (ramp direction, magnitude, factor inversion) would be off by far more, even at pos 1.
    port_angle, port_mscale = ggml_port(case, freq_factors)
    worst = 0.0
    for pos, row in zip(case["positions"], rows):
        port = np.stack([np.cos(pos * port_angle), np.sin(pos * port_angle)], axis=1) * port_mscale
        diff = float(np.max(np.abs(port.reshape(-1) - np.array(row))))
        assert diff <= 1e-6 + 1e-7 * pos, f"{case['name']}: ggml port vs HF {diff} at {pos}"
        worst = max(worst, diff)
    out["ggml_port_max_abs_diff"] = worst
    print(f"{case['name']:22s} attention_factor {attention_factor:.6f}  "
          f"ggml-port vs HF max |diff| {worst:.2e}")
    return out


def main():
    OUT.parent.mkdir(parents=True, exist_ok=True)
    cases = [build_case(c) for c in CASES]
    text = json.dumps({
        "generator": "tools/oracle/rope_reference.py",
        "implementation": f"transformers {transformers.__version__} ROPE_INIT_FUNCTIONS "
                          f"(inv_freq float32), cos/sin evaluated in float64; "
                          f"torch {torch.__version__}, numpy {np.__version__}",
        "python": platform.python_version(),
        "layout": "cos_sin[p] = [cos_0, sin_0, cos_1, sin_1, ...] at positions[p], "
                  "times hf_attention_factor",
        "cases": cases,
    }, indent=1)
    # One line per list of numbers keeps the file small and diffable.
    text = re.sub(r"\[\s*([-0-9.eE+,\s]+?)\s*\]",
                  lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)
    OUT.write_text(text + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
