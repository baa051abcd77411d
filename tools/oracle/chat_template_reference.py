#!/usr/bin/env python3
"""Renders conversations with Hugging Face's own chat-template code, as a reference for
tessera's ChatTemplate (tests/unit/chat/chat_template_oracle_test.cc).

For each template in tests/data/chat/ that tessera supports and each conversation below, this
calls transformers' `apply_chat_template` (jinja2 with HF's settings) with and without the
generation prompt, and writes the results to tests/data/chat/chat_template_reference.json.
The SmolLM2 template is read from the model's GGUF when it is present (and must equal the
checked-in copy byte for byte).

Needs: transformers, tokenizers, jinja2 (and gguf to read the model), e.g. in
/tmp/oracle-venv:  /tmp/oracle-venv/bin/python tools/oracle/chat_template_reference.py
"""

import json
import pathlib
import sys

import transformers
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "chat"
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = DATA / "chat_template_reference.json"

TEMPLATES = ["smollm2_instruct.jinja", "chatml.jinja", "qwen2_5_instruct.jinja",
             "chatml_default_system_respelled.jinja"]

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke."}],
    [{"role": "system", "content": "Answer in French."},
     {"role": "user", "content": "Good morning"},
     {"role": "assistant", "content": "Bonjour"}],
    [{"role": "user", "content": "  leading and trailing spaces \n\n"}],
    [{"role": "user", "content": "Ünïcödé ✓ 日本語 and 'quotes' \"double\" {{ braces }} {% tags %}"}],
    [{"role": "user", "content": ""}],
    [{"role": "system", "content": ""}],
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
]


def check_smollm2_copy():
    """The checked-in SmolLM2 template must be the model's exact bytes."""
    if not MODEL.exists():
        print(f"note: {MODEL} missing; using the checked-in template only", file=sys.stderr)
        return
    import gguf  # only needed for this check
    reader = gguf.GGUFReader(str(MODEL))
    from_model = reader.fields["tokenizer.chat_template"].contents()
    checked_in = (DATA / "smollm2_instruct.jinja").read_text(encoding="utf-8")
    if from_model != checked_in:
        sys.exit("tests/data/chat/smollm2_instruct.jinja differs from the model's template")


def main():
    check_smollm2_copy()
    # Any tokenizer object gives access to apply_chat_template; the vocabulary is irrelevant
    # because we only render text (tokenize=False).
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    cases = []
    for name in TEMPLATES:
        source = (DATA / name).read_text(encoding="utf-8")
        for messages in CONVERSATIONS:
            for add_generation_prompt in (True, False):
                expected = tokenizer.apply_chat_template(
                    messages, chat_template=source, tokenize=False,
                    add_generation_prompt=add_generation_prompt)
                cases.append({"template": name, "messages": messages,
                              "add_generation_prompt": add_generation_prompt,
                              "expected": expected})
    doc = {"generator": f"tools/oracle/chat_template_reference.py, transformers "
                        f"{transformers.__version__}", "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
