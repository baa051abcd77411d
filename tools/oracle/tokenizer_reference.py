#!/usr/bin/env python3
"""Regenerates the tokenizer oracle data in tests/data/tokenizer/ with HF `tokenizers`.

Reads the tokenizer metadata of a GGUF file (with the `gguf` package), rebuilds the same
tokenizer as a HF `tokenizers.Tokenizer`, and writes:

  tests/data/tokenizer/smollm2_hf/tokenizer.json         the HF tokenizer (FromHfJson test input)
  tests/data/tokenizer/smollm2_hf/tokenizer_config.json  BOS/EOS/PAD/UNK and add_bos/add_eos
  tests/data/tokenizer/smollm2_reference.json            corpus text -> reference ids

Why not `AutoTokenizer.from_pretrained(dir, gguf_file=...)`: in transformers 5.x that path needs
torch, and for `tokenizer.ggml.pre == "smollm"` it builds a plain GPT-2 ByteLevel pre-tokenizer,
dropping the Digits(individual_digits=True) stage that SmolLM2's published tokenizer.json (and
llama.cpp's "smollm" regex list) has, so "123" would not be split into digits. We therefore build
the pipeline explicitly with the shape HuggingFaceTB/SmolLM2-135M-Instruct publishes:
Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)],
ByteLevel decoder, control tokens as special added tokens. The ids are checked against a few ids
known from llama.cpp, then re-derived from the written tokenizer files loaded afresh (a new
`tokenizers.Tokenizer` and transformers' AutoTokenizer), which must agree on every case.

Usage (see tools/oracle/README.md):
  python tools/oracle/tokenizer_reference.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""

import argparse
import importlib.metadata
import json
import pathlib
import platform
import sys

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "tokenizer"

# GGUF token types (llama.cpp's llama_token_type).
CONTROL = 3
USER_DEFINED = 4

# Pre-tokenizer pipelines for the GGUF pre names this script knows (HF shapes).
PRE_TOKENIZERS = {
    "smollm": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]),
    "gpt2": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
}

# Ids for SmolLM2 produced by llama.cpp-compatible tokenizers (sanity check of the pipeline).
KNOWN_SMOLLM2_IDS = {
    "Hello, we can use": [19556, 28, 392, 416, 722],
    "The capital of France is": [504, 3575, 282, 4649, 314],
    "\n": [198],
    "Hello world! 123": [19556, 905, 17, 216, 33, 34, 35],
    "  multiple   spaces": [216, 2701, 256, 5600],
}


def field_value(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        if field.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if field.types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def build_tokenizer(reader):
    model = field_value(reader, "tokenizer.ggml.model")
    pre = field_value(reader, "tokenizer.ggml.pre")
    if model != "gpt2" or pre not in PRE_TOKENIZERS:
        sys.exit(f"unsupported tokenizer: model={model!r} pre={pre!r}")
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    types = field_value(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field_value(reader, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel()
    added = [AddedToken(t, special=(ty == CONTROL), normalized=False)
             for t, ty in zip(tokens, types) if ty in (CONTROL, USER_DEFINED)]
    tok.add_tokens(added)
    return tok, tokens


def tokenizer_config(reader, tokens):
    config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    for name, key in [("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                      ("pad_token", "padding_token_id"), ("unk_token", "unknown_token_id")]:
        token_id = field_value(reader, f"tokenizer.ggml.{key}")
        if token_id is not None:
            config[name] = tokens[token_id]
    config["add_bos_token"] = bool(field_value(reader, "tokenizer.ggml.add_bos_token", False))
    config["add_eos_token"] = bool(field_value(reader, "tokenizer.ggml.add_eos_token", False))
    return config


def encode(tok, text, parse_special):
    # encode_special_tokens=True makes HF treat special added tokens as plain text, which is
    # our EncodeOptions::parse_special = false. add_special_tokens=False: no BOS/EOS (the GGUF
    # says add_bos_token = false anyway, and our test encodes with add_special = false).
    tok.encode_special_tokens = not parse_special
    try:
        return tok.encode(text, add_special_tokens=False).ids
    finally:
        tok.encode_special_tokens = False


def cross_check_from_disk(hf_dir, cases):
    """Re-derives every case's ids from the tokenizer files just written, loaded afresh.

    The ids above come from the in-memory object built from the GGUF; these checks load
    tokenizer.json from disk with no shared state: once as a new `tokenizers.Tokenizer`, once
    through transformers' AutoTokenizer (its own loading of tokenizer.json and
    tokenizer_config.json, and its own special-token splitting). A serialization or wrapper
    difference fails the run. Returns the transformers version.
    """
    fresh = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    from transformers import AutoTokenizer  # required: the cross-check is not optional
    auto = AutoTokenizer.from_pretrained(str(hf_dir))
    for case in cases:
        text = case["text"]
        if encode(fresh, text, parse_special=True) != case["ids"] or \
                encode(fresh, text, parse_special=False) != case["ids_no_special_parsing"]:
            sys.exit(f"tokenizer.json reloaded from disk disagrees on {text!r}")
        if auto(text, add_special_tokens=False)["input_ids"] != case["ids"] or \
                auto(text, add_special_tokens=False, split_special_tokens=True)["input_ids"] != \
                case["ids_no_special_parsing"]:
            sys.exit(f"transformers' AutoTokenizer disagrees on {text!r}")
    return importlib.metadata.version("transformers")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--corpus", default=str(DATA / "corpus.json"))
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.model)
    tok, tokens = build_tokenizer(reader)
    if field_value(reader, "tokenizer.ggml.pre") == "smollm":
        for text, expected in KNOWN_SMOLLM2_IDS.items():
            got = encode(tok, text, parse_special=True)
            if got != expected:
                sys.exit(f"pipeline check failed for {text!r}: {got} != {expected}")

    corpus = json.loads(pathlib.Path(args.corpus).read_text(encoding="utf-8"))
    cases = []
    for text in corpus:
        ids = encode(tok, text, parse_special=True)
        # False only where the vocab lacks a byte's symbol (the byte is dropped, see corpus).
        round_trips = tok.decode(ids, skip_special_tokens=False) == text
        cases.append({"text": text, "ids": ids,
                      "ids_no_special_parsing": encode(tok, text, parse_special=False),
                      "hf_round_trips": round_trips})
    hf_dir = DATA / "smollm2_hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    # Compact (not pretty-printed) to keep the committed file small.
    (hf_dir / "tokenizer.json").write_text(tok.to_str(pretty=False), encoding="utf-8")
    (hf_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(reader, tokens), indent=1) + "\n", encoding="utf-8")
    transformers_version = cross_check_from_disk(hf_dir, cases)
    reference = {
        "generator": "tools/oracle/tokenizer_reference.py",
        "model": pathlib.Path(args.model).name,
        "versions": {
            "python": platform.python_version(),
            "tokenizers": importlib.metadata.version("tokenizers"),
            "transformers": transformers_version,
            "gguf": importlib.metadata.version("gguf"),
        },
        "settings": {
            "add_special_tokens": False,
            "ids": "special tokens parsed (EncodeOptions{add_special=false, parse_special=true})",
            "ids_no_special_parsing": "encode_special_tokens=True "
                                      "(EncodeOptions{add_special=false, parse_special=false})",
        },
        "cases": cases,
    }
    out = DATA / "smollm2_reference.json"
    out.write_text(json.dumps(reference, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {out.relative_to(REPO)} and {hf_dir.relative_to(REPO)}/")


if __name__ == "__main__":
    main()
