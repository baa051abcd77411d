#!/usr/bin/python3
"""A staggered-arrival run that records a step trace: starts tessera-worker and tessera-router
(--trace-steps) on loopback, sends requests of different prompt lengths at staggered times
through the public gRPC API, shuts both down cleanly (SIGTERM: the router drains and closes the
trace) and renders the trace with plot_steps.py.

    tools/trace/staggered_run.py --bin-dir build-main/bin --trace /tmp/steps.jsonl \\
        --png docs/perf/batch-composition.png

Prompts are exact token counts (a text passage tokenized by the router, cut to length, sent as
token ids) and each starts with its own header, so no two share a prefix-cache block and every
prompt token is really computed. Greedy, ignore_eos, fixed max_tokens: the decode lengths are
the same on every run. Needs Debian's python3-grpcio, protoc and grpc_python_plugin (stubs are
generated from proto/ into a temp dir) and python3-matplotlib for the picture.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "pyclient"))
from tessera_process import generate_stubs, start_process, wait_ready  # noqa: E402

# Filler text for the prompts: plain prose, long enough to cut 600+ tokens from.
PASSAGE = (
    "The old lighthouse stood at the end of a narrow spit of rock, and for more than a century "
    "its keepers had written down the weather twice a day in a leather book. They noted the wind, "
    "the colour of the sea, the ships that passed and the birds that rested on the gallery rail. "
    "When the light was automated the books were carried to the town library, where a retired "
    "schoolteacher began to read them one winter and found that they told a story nobody had "
    "meant to tell: how the storms came earlier each decade, how the fishing boats grew larger "
    "and fewer, how the keepers' children learned to read by lamplight and then left for the "
    "cities. She copied the entries into a notebook of her own, adding the names of the ships "
    "from the harbour registers and the prices of fish from the market ledgers, until the "
    "notebook became three notebooks and the town began to ask her questions about its past. "
)

# (prompt tokens, max new tokens): short and long prompts; the long ones need several 256-token
# chunks, so they arrive while others decode and their chunks share steps with those decodes.
DEFAULT_REQUESTS = "40:48,520:40,120:48,380:40,24:48,600:32"


def make_prompts(stub, pb2, specs):
    """Token-id prompts of exactly the asked lengths, each opening with its own header."""
    prompts = []
    for index, (length, _) in enumerate(specs, 1):
        text = f"Request {index} of the trace demo, note {length * 7919 % 1000}. " + PASSAGE * 8
        ids = list(stub.Tokenize(pb2.TokenizeRequest(text=text)).token_ids)
        if len(ids) < length:
            raise RuntimeError(f"the passage gives only {len(ids)} tokens, {length} asked")
        prompts.append(ids[:length])
    return prompts


def run_client(stub, pb2, name, prompt, max_tokens, delay_s, t0, results):
    time.sleep(max(0.0, t0 + delay_s - time.monotonic()))
    sent = time.monotonic()
    first, tokens, last = None, 0, None
    request = pb2.GenerateRequest(
        request_id=name, token_ids=pb2.TokenIds(ids=prompt), max_tokens=max_tokens,
        ignore_eos=True, sampling=pb2.SamplingParams(temperature=0.0))
    for response in stub.Generate(request, timeout=300):
        if response.token_ids and first is None:
            first = time.monotonic()
        tokens += len(response.token_ids)
        last = response
    results[name] = {"arrive_s": sent - t0, "ttft_s": (first or sent) - sent,
                     "done_s": time.monotonic() - t0, "tokens": tokens,
                     "finish": pb2.FinishReason.Name(last.finish_reason) if last else "none"}


def send_staggered(stub, pb2, specs, interval_s):
    prompts = make_prompts(stub, pb2, specs)
    results, threads = {}, []
    t0 = time.monotonic()
    for index, ((length, max_tokens), prompt) in enumerate(zip(specs, prompts)):
        name = f"r{index + 1}-{length}"
        thread = threading.Thread(target=run_client, args=(
            stub, pb2, name, prompt, max_tokens, index * interval_s, t0, results))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    print(f"{'request':>10} {'arrive_s':>9} {'ttft_s':>7} {'done_s':>7} {'tokens':>6} finish")
    for name in sorted(results, key=lambda n: results[n]["arrive_s"]):
        r = results[name]
        print(f"{name:>10} {r['arrive_s']:9.3f} {r['ttft_s']:7.3f} {r['done_s']:7.3f} "
              f"{r['tokens']:6d} {r['finish']}")
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", default=os.path.join(REPO, "build-main", "bin"))
    parser.add_argument("--model", default=os.path.join(REPO, "models",
                                                        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--trace", required=True, help="step trace (JSONL) to write")
    parser.add_argument("--png", help="render the trace here (plot_steps.py)")
    parser.add_argument("--title", help="title of the picture")
    parser.add_argument("--requests", default=DEFAULT_REQUESTS,
                        help="comma-separated PROMPT_TOKENS:MAX_TOKENS, in arrival order")
    parser.add_argument("--interval-ms", type=float, default=150, help="time between arrivals")
    parser.add_argument("--max-num-batched-tokens", type=int, default=256)
    parser.add_argument("--kv-cache-mb", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="worker threads (0 = all)")
    args = parser.parse_args()
    specs = [tuple(int(v) for v in item.split(":")) for item in args.requests.split(",")]

    import grpc  # Debian python3-grpcio
    worker = router = None
    with tempfile.TemporaryDirectory() as stubs_dir:
        pb2, pb2_grpc = generate_stubs(REPO, stubs_dir)
        try:
            worker, worker_addr = start_process(
                [os.path.join(args.bin_dir, "tessera-worker"), "--model", args.model,
                 "--listen", "127.0.0.1:0", "--kv-cache-mb", str(args.kv_cache_mb),
                 "--threads", str(args.threads)], "tessera-worker")
            router, router_addr = start_process(
                [os.path.join(args.bin_dir, "tessera-router"), "--model", args.model,
                 "--worker", worker_addr, "--listen", "127.0.0.1:0", "--http-port", "0",
                 "--trace-steps", args.trace,
                 "--max-num-batched-tokens", str(args.max_num_batched_tokens)], "tessera-router")
            channel = grpc.insecure_channel(router_addr)
            stub = pb2_grpc.TesseraStub(channel)
            wait_ready(stub, pb2, grpc, attempts=300)  # the router may still be dialing
            send_staggered(stub, pb2, specs, args.interval_ms / 1000)
        finally:
            for proc in (router, worker):  # router first: it drains and closes the trace
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=60)
    if args.png:
        plot = [sys.executable, os.path.join(HERE, "plot_steps.py"), args.trace, "-o", args.png,
                "--check"]
        subprocess.run(plot + (["--title", args.title] if args.title else []), check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
