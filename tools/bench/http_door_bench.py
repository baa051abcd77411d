#!/usr/bin/env python3
"""The OpenAI HTTP door's figures under hostile load (docs/perf/reliability.md, issue 23).

Starts one tessera-worker and one tessera-router (door defaults, but per-client and total
connection caps raised so one loopback client may hold --slow connections) and measures:
  1. latency of GET /health and of a short non-streaming completion, alone and while --slow
     connections trickle request heads one byte per second;
  2. the router's peak RSS while --bodies connections from 8 loopback addresses push --body-mb MiB
     bodies as fast as they can (the door's pending-body budget, 256 MiB by default and a quarter
     of it per client, refuses the excess with 503);
  3. the time from abandoning --abandoned non-streaming requests (their sockets closed) until the
     router runs none.
Loopback only; every loop bounded. Reuses the hostile suite's clients (tests/e2e).
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from hostile_http_support import (  # noqa: E402
    Router, SlowClients, request, slow_http_payload, start_worker)

COMPLETION = json.dumps({"prompt": "The capital of France is", "max_tokens": 8})


def timed(fn, times):
    worst = 0.0
    for _ in range(times):
        start = time.time()
        status = fn()
        worst = max(worst, time.time() - start)
        assert status == 200, status
    return worst


def latencies(router):
    health = timed(lambda: request(router, "GET", "/health", timeout=10)[0], 20)
    completion = timed(lambda: request(router, "POST", "/v1/completions", body=COMPLETION,
                                       headers={"Content-Type": "application/json"},
                                       timeout=30)[0], 5)
    return health, completion


def measure_slow(router, count):
    alone = latencies(router)
    slow = SlowClients(router.http, count, slow_http_payload())
    try:
        time.sleep(1.0)
        held = latencies(router)
        print(f"slow connections: {slow.open_count()}/{count} held (opened in "
              f"{slow.opened_s:.1f} s); /health max {alone[0]:.3f} s alone, {held[0]:.3f} s "
              f"held; 8-token completion max {alone[1]:.3f} s alone, {held[1]:.3f} s held")
    finally:
        slow.stop()


def push_body(router, mb, client, outcomes):
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {mb << 20}\r\n\r\n").encode()
    chunk = b"a" * (1 << 20)
    try:
        with socket.create_connection(router.http, timeout=20,
                                      source_address=(client, 0)) as sock:
            sock.sendall(head)
            for _ in range(mb - 1):  # all but the last MiB: the body stays pending
                sock.sendall(chunk)
            time.sleep(2)
            outcomes.append("held")
    except OSError as error:
        outcomes.append(type(error).__name__)


def measure_bodies(router, count, mb):
    base = router.rss_mb()
    outcomes, peak = [], base
    # From 8 loopback addresses: 8 clients, each allowed a quarter of the budget.
    threads = [threading.Thread(target=push_body,
                                args=(router, mb, f"127.0.0.{2 + i % 8}", outcomes))
               for i in range(count)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, router.rss_mb())
        time.sleep(0.05)
    refused = sum(1 for o in outcomes if o != "held")
    print(f"bodies: {count} x {mb} MiB pushed from 8 client addresses "
          f"({count * mb / 1024:.1f} GiB); router RSS "
          f"{base:.0f} MB before, peak {peak:.0f} MB (+{peak - base:.0f} MB); {refused} "
          f"connections cut by the door")


def measure_abandoned(router, count):
    body = json.dumps({"prompt": "Tell me a story", "max_tokens": 2000, "ignore_eos": True})
    socks = []
    for _ in range(count):
        sock = socket.create_connection(router.http, timeout=10)
        sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      f"application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        socks.append(sock)
    deadline = time.time() + 30
    while (router.metric("tessera_requests_running") or 0) < count and time.time() < deadline:
        time.sleep(0.05)
    running = router.metric("tessera_requests_running")
    for sock in socks:
        sock.close()
    closed = time.time()
    while (router.metric("tessera_requests_running") or 0) > 0 and time.time() < closed + 30:
        time.sleep(0.01)
    print(f"abandoned: {running:.0f} running non-streaming requests; none left "
          f"{time.time() - closed:.2f} s after their clients closed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models",
                                                        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--slow", type=int, default=900, help="slow connections (select(): "
                        "under 1,000)")
    parser.add_argument("--bodies", type=int, default=32)
    parser.add_argument("--body-mb", type=int, default=32)
    parser.add_argument("--abandoned", type=int, default=16)
    args = parser.parse_args()
    args.legacy = True  # no door flags: the defaults, not the hostile suite's small limits
    worker, addresses = start_worker(args.bin_dir, args.model)
    router = Router(args, addresses["listening"],
                    extra=["--http-max-connections", "4096",
                           "--http-max-connections-per-client", "4096"])
    try:
        measure_slow(router, args.slow)
        measure_bodies(router, args.bodies, args.body_mb)
        measure_abandoned(router, args.abandoned)
    finally:
        router.stop()
        worker.terminate()
        worker.wait(timeout=10)


if __name__ == "__main__":
    main()
