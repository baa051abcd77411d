#!/usr/bin/env python3
"""llama.cpp side of docs/perf/cpu.md: the same three measurements as tessera-engine-bench.

Uses llama-cpp-python's low-level API (llama_batch / llama_decode) so several sequences can
decode in one batch. Prompt ids are the synthetic ones of tools/bench/engine_bench.cc.

  prefill  — one prompt of --prompt-tokens tokens in one llama_decode, tokens/s
  decode   — one sequence, --decode-tokens greedy steps after a 16-token prompt, tokens/s
  batch N  — N sequences decoding together (one llama_decode of N tokens per step), aggregate

Usage: python tools/bench/llama_cpp_bench.py [--model PATH] [--threads 2] [--repeats 3]
(llama-cpp-python built from PyPI; see docs/perf/cpu.md for the build flags used.)
"""
import argparse
import ctypes
import json
import statistics
import time

import llama_cpp as L
import numpy as np


def synthetic_prompt(length, seed):
    return [100 + (seed * 7919 + i * 104729) % 40000 for i in range(length)]


class Engine:
    def __init__(self, model_path, threads, n_ctx, n_seq):
        L.llama_backend_init()
        self.model = L.llama_model_load_from_file(model_path.encode(),
                                                  L.llama_model_default_params())
        params = L.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = 1024
        params.n_seq_max = n_seq
        params.kv_unified = True  # one KV pool shared by all sequences, like ours
        params.n_threads = params.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, params)
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.batch = L.llama_batch_init(1024, 0, n_seq)

    def decode(self, entries):
        """entries: list of (token, pos, seq_id, wants_logits)."""
        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits
        b.n_tokens = len(entries)
        status = L.llama_decode(self.ctx, b)
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}")

    def argmax(self, batch_index):
        """Greedy token from the logits of entry `batch_index` of the last decode."""
        ptr = L.llama_get_logits_ith(self.ctx, batch_index)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))))

    def clear(self):
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)


def run_sequences(engine, num_seqs, prompt_len, steps):
    engine.clear()
    entries = []
    for s in range(num_seqs):
        ids = synthetic_prompt(prompt_len, s + 1)
        entries += [(t, p, s, p == prompt_len - 1) for p, t in enumerate(ids)]
    start = time.perf_counter()
    engine.decode(entries)
    prefill = time.perf_counter() - start
    last = [engine.argmax(s * prompt_len + prompt_len - 1) for s in range(num_seqs)]
    start = time.perf_counter()
    for step in range(steps):
        engine.decode([(last[s], prompt_len + step, s, True) for s in range(num_seqs)])
        last = [engine.argmax(s) for s in range(num_seqs)]
    return prefill, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    engine = Engine(a.model, a.threads, n_ctx=2048, n_seq=a.batch)
    prefill, decode, batched = [], [], []
    for _ in range(a.repeats):
        seconds, _ = run_sequences(engine, 1, a.prompt_tokens, 0)
        prefill.append(a.prompt_tokens / seconds)
        _, seconds = run_sequences(engine, 1, 16, a.decode_tokens)
        decode.append(a.decode_tokens / seconds)
        _, seconds = run_sequences(engine, a.batch, 16, a.decode_tokens)
        batched.append(a.batch * a.decode_tokens / seconds)
    result = {"engine": f"llama.cpp (llama-cpp-python {L.__version__})", "threads": a.threads,
              "prefill_tok_s": round(statistics.median(prefill), 1),
              "decode_tok_s": round(statistics.median(decode), 1), "batch": a.batch,
              "batch_decode_tok_s": round(statistics.median(batched), 1)}
    print(f"prefill {a.prompt_tokens} tokens: {result['prefill_tok_s']} tok/s")
    print(f"decode 1 sequence: {result['decode_tok_s']} tok/s")
    print(f"decode {a.batch} sequences: {result['batch_decode_tok_s']} tok/s aggregate")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
