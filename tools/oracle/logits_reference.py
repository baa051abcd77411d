#!/usr/bin/env python3
"""Writes next-token logits and greedy continuations of the default model from HF transformers.

transformers loads the same GGUF (dequantizing every tensor to float) and runs its own llama
implementation, independent of ours; we run it in float64 so the reference carries no float32
rounding of its own. Prompts are token ids from our tokenizer (checked against HF separately),
recorded in the output with their text.

Writes tests/data/logits/smollm2_reference.json (ids, greedy continuation, versions) and
tests/data/logits/prompt_<i>.f32 (logits after the prompt, little-endian float32 [vocab]).

Usage (venv from tools/oracle/README.md, plus torch and accelerate):
  python tools/oracle/logits_reference.py [--model-dir models] [--tokenizer build/bin/tessera]
"""
import argparse
import json
import pathlib
import platform
import subprocess

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "logits"
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
NUM_GREEDY = 16

PROMPTS = {
    "chat_france": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                   "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                   "<|im_end|>\n<|im_start|>assistant\n",
    "raw_story": "Once upon a time, in a small village by the sea,",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "numbers": "The first ten prime numbers are 2, 3, 5, 7,",
    "single": "The",
}


def tokenize(tessera, text):
    out = subprocess.run([tessera, "tokenize", str(ROOT / "models" / MODEL), text],
                         check=True, capture_output=True, text=True).stdout
    return [int(t) for t in out.split()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=str(ROOT / "models"))
    parser.add_argument("--tokenizer", default=str(ROOT / "build" / "bin" / "tessera"))
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, gguf_file=MODEL,
                                                 dtype=torch.float32).double().eval()
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    for index, (name, text) in enumerate(PROMPTS.items()):
        ids = tokenize(args.tokenizer, text)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].numpy()
            logits.astype(np.float32).tofile(OUT / f"prompt_{index}.f32")
            sequence = list(ids)
            for _ in range(NUM_GREEDY):
                step = model(torch.tensor([sequence])).logits[0, -1].numpy()
                sequence.append(int(np.argmax(step)))
        top2 = np.sort(logits)[-2:]
        cases.append({"name": name, "text": text, "prompt_ids": ids,
                      "greedy_ids": sequence[len(ids):], "logits_file": f"prompt_{index}.f32",
                      "top1_margin": float(top2[1] - top2[0])})
    (OUT / "smollm2_reference.json").write_text(json.dumps({
        "generator": "tools/oracle/logits_reference.py",
        "implementation": f"transformers {transformers.__version__} (float64), "
                          f"torch {torch.__version__}",
        "python": platform.python_version(),
        "cases": cases,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
