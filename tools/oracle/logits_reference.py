#!/usr/bin/env python3
"""Writes next-token logits and greedy continuations of the default model from HF transformers.

transformers loads the same GGUF (dequantizing every tensor to float) and runs its own llama
implementation, independent of ours; we run it in float64 so the reference carries no float32
rounding of its own. Prompt ids come from HF `tokenizers` loading the committed
tests/data/tokenizer/smollm2_hf/tokenizer.json (written by tokenizer_reference.py from the GGUF),
never from tessera's own tokenizer; they are recorded in the output with their text, and
llama_oracle_test checks that our tokenizer reproduces them.

Writes tests/data/logits/smollm2_reference.json (ids, greedy continuation, versions) and
tests/data/logits/prompt_<i>.f32 (logits after the prompt, little-endian float32 [vocab]).

Usage (venv from tools/oracle/README.md, plus torch and accelerate):
  python tools/oracle/logits_reference.py [--model-dir models]
  python tools/oracle/logits_reference.py --check-prompt-ids   # tokenizers only: re-derives the
      # prompt ids of the committed reference and fails on any difference (no torch needed)
"""
import argparse
import importlib.metadata
import json
import pathlib
import platform
import sys

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "logits"
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_TOKENIZER = ROOT / "tests" / "data" / "tokenizer" / "smollm2_hf" / "tokenizer.json"
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


def hf_prompt_ids():
    """name -> prompt ids from HF tokenizers (special tokens parsed, no BOS/EOS added)."""
    tok = Tokenizer.from_file(str(HF_TOKENIZER))
    return {name: tok.encode(text, add_special_tokens=False).ids for name, text in PROMPTS.items()}


def check_prompt_ids():
    reference = json.loads((OUT / "smollm2_reference.json").read_text())
    expected = hf_prompt_ids()
    for case in reference["cases"]:
        if case["text"] != PROMPTS[case["name"]] or case["prompt_ids"] != expected[case["name"]]:
            sys.exit(f"{case['name']}: committed prompt ids differ from HF tokenizers'")
    print(f"{len(reference['cases'])} committed prompts match HF tokenizers' ids")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=str(ROOT / "models"))
    parser.add_argument("--check-prompt-ids", action="store_true",
                        help="only check the committed prompt ids against HF tokenizers")
    args = parser.parse_args()
    if args.check_prompt_ids:
        check_prompt_ids()
        return
    import numpy as np  # the model run needs these; the id check does not
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    prompt_ids = hf_prompt_ids()
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, gguf_file=MODEL,
                                                 dtype=torch.float32).double().eval()
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    for index, (name, text) in enumerate(PROMPTS.items()):
        ids = prompt_ids[name]
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
        "prompt_ids": "HF tokenizers " + importlib.metadata.version("tokenizers") +
                      " on tests/data/tokenizer/smollm2_hf/tokenizer.json",
        "python": platform.python_version(),
        "cases": cases,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
