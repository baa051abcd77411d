#!/usr/bin/python3
"""Time to first token on a hybrid model with a shared system prompt: cold vs a prefix hit.

Starts tessera-worker (cpu) and tessera-router on a hybrid GGUF (e.g. one made by
`tessera-make-tiny-model --arch qwen35 ...`) and sends, one at a time over gRPC Generate, prompts
of a --system-tokens shared prefix followed by a different --question-tokens question each:
  request 1: nothing cached (cold);
  request 2: the prefix's blocks are cached but carry no state snapshot: it runs cold once more
             and saves the recurrent state at the end of the shared blocks;
  requests 3..: hit the shared blocks and restore that snapshot (docs/design/hybrid-models.md).
Then the same requests on a worker started with --state-snapshot-mb 0 (every one cold).
Prints the TTFT of each request and the medians; loopback only, every loop bounded.

  /usr/bin/python3 tools/bench/hybrid_prefix_ttft.py --model /tmp/h.gguf  (Debian python3-grpcio)
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "pyclient"))
from tessera_process import generate_stubs, start_process, wait_ready  # noqa: E402


def tokens(seed, count, vocab):
    """Ordinary token ids (ids 0-2 are the fixtures' special tokens)."""
    return [3 + (seed * 7919 + i * 104729) % (vocab - 3) for i in range(count)]


def ttft(stub, pb2, ids):
    """Seconds from sending a greedy request to its first streamed token."""
    request = pb2.GenerateRequest(max_tokens=2, ignore_eos=True)
    request.token_ids.ids.extend(ids)
    request.sampling.temperature = 0.0
    start = time.perf_counter()
    first = None
    for response in stub.Generate(request, timeout=600):
        if first is None and len(response.token_ids) > 0:
            first = time.perf_counter() - start
    return first


def serve_and_measure(args, pb2, pb2_grpc, worker_flags):
    worker, worker_addr = start_process(
        [os.path.join(args.bin_dir, "tessera-worker"), "--model", args.model, "--listen",
         "127.0.0.1:0", "--device", "cpu", "--threads", str(args.threads)] + worker_flags,
        "tessera-worker")
    router, router_addr = start_process(
        [os.path.join(args.bin_dir, "tessera-router"), "--model", args.model, "--worker",
         worker_addr, "--listen", "127.0.0.1:0", "--http-port", "-1"], "tessera-router")
    try:
        channel = grpc.insecure_channel(router_addr)
        stub = pb2_grpc.TesseraStub(channel)
        info = wait_ready(stub, pb2, grpc, attempts=600)
        vocab = info.vocab_size
        system = tokens(1, args.system_tokens, vocab)
        times = []
        for q in range(args.requests):
            times.append(ttft(stub, pb2, system + tokens(100 + q, args.question_tokens, vocab)))
        return times
    finally:
        for proc in (router, worker):
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("--question-tokens", type=int, default=20)
    ap.add_argument("--requests", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as stubs:
        pb2, pb2_grpc = generate_stubs(ROOT, stubs)
        with_snapshots = serve_and_measure(args, pb2, pb2_grpc, [])
        without = serve_and_measure(args, pb2, pb2_grpc, ["--state-snapshot-mb", "0"])
    print(f"# {args.model}: {args.system_tokens}-token shared prefix + "
          f"{args.question_tokens}-token question, one request at a time")
    print(" request  ttft_ms(snapshots)  ttft_ms(--state-snapshot-mb 0)")
    for i, (a, b) in enumerate(zip(with_snapshots, without)):
        print(f" {i + 1:7d}  {a * 1e3:18.1f}  {b * 1e3:29.1f}")
    hits = with_snapshots[2:]
    cold = without[2:]
    print(f"median of requests 3..{args.requests}: hit {statistics.median(hits) * 1e3:.1f} ms, "
          f"cold {statistics.median(cold) * 1e3:.1f} ms, "
          f"{statistics.median(cold) / statistics.median(hits):.1f}x")


if __name__ == "__main__":
    main()
