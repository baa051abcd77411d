#!/usr/bin/env python3
"""End-to-end: the HTTP doors under hostile clients (issue 23), loopback only, every loop bounded.

One tessera-worker (with a metrics port) and, one after another, three tessera-routers on it:
  A  --api-key KEY, plain HTTP, metrics port: keyed slowloris, metrics-port slowloris, 128 held
     streams, header and body caps, abandoned non-streaming requests, exclusive port, bearer
     scheme, pipelining and HTTP/1.0;
  B  no key, plain HTTP: slowloris, then the 60,000-deep prompt (last: today it kills B);
  C  no key, TLS (a certificate made by openssl): 130 trickled ClientHellos.
The routers run with small door limits (--http-header-timeout 3 --http-body-timeout 3
--http-max-body-mb 1) so the suite takes well under 2 minutes on 2 cores.

Each probe prints PASS/FAIL and what it measured (docs/perf/reliability.md quotes these
numbers); the exit status is 1 when any probe failed. `--legacy` leaves out the door flags a
router before issue 23 does not know, so the suite can show which probes fail on such a binary.
stdlib only (runs under /usr/bin/python3 or .venv-e2e).
"""
import argparse
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_http_support import (  # noqa: E402
    KEY, HEADER_TIMEOUT_S, MAX_BODY_MB, FAST_S, SLOW_CONNECTIONS, STREAMS, PROMPT, start_worker,
    Router, parse_addr, make_certificate, connect, ResponseReader, status_of, request,
    answers_fast, Checks, assert_error_object, SlowClients, slow_http_payload, client_hello,
    slowloris)

from e2e_checks import check


# ---------------------------------------------------------------------------------------------
# Probes (each raises AssertionError with what it saw)

def probe_crash(ctx):
    """1. A prompt nested 60,000 single-element arrays deep is a 400, and the router lives."""
    router = ctx["router"]
    depth = 60000
    body = ('{"prompt":' + "[" * depth + '"hi"' + "]" * depth + ',"max_tokens":1}')
    start = time.time()
    try:
        status, _, response = request(router, "POST", "/v1/completions",
                                      headers=dict(router.auth(),
                                                   **{"Content-Type": "application/json"}),
                                      body=body, timeout=10)
    except (OSError, ConnectionError) as error:
        status, response = type(error).__name__, b""
    seconds = time.time() - start
    time.sleep(0.5)
    check(router.alive(), f"the router died (exit {router.proc.poll()}) on a {len(body)} B body")
    check(status == 400, f"{depth}-deep prompt answered {status}: {response[:200]!r}")
    assert_error_object(response, 400)
    print(f"  {depth}-deep prompt ({len(body)} B): 400 in {seconds:.3f} s: "
          f"{json.loads(response)['error']['message'][:100]!r}")
    answers_fast("after the deep prompt", router, "/health", times=2)


def probe_slowloris_http(ctx):
    """2. 130 connections trickling a request head: /health and /v1/models stay fast; the slow
    connections are closed after the header timeout."""
    router = ctx["router"]
    slowloris(router, "no key", slow_http_payload(), [("/health", None), ("/v1/models", None)])


def probe_slowloris_keyed(ctx):
    """3. The same with --api-key: /health needs no key, /v1/models gets the key."""
    router = ctx["router"]
    slowloris(router, "--api-key", slow_http_payload(),
              [("/health", None), ("/v1/models", router.auth())])


def probe_streams(ctx):
    """4. 128 legitimate streams held open: /health still answers at once."""
    router = ctx["router"]
    body = json.dumps({"prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True,
                       "stream": True, "temperature": 0}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n")
    head += "".join(f"{k}: {v}\r\n" for k, v in router.auth().items()) + "\r\n"
    socks, stop, started = [], threading.Event(), []

    def drain(sock):
        first = True
        while not stop.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            if first:
                started.append(data.split(b"\r\n")[0])
                first = False

    threads = []
    try:
        for _ in range(STREAMS):
            sock = connect(router.http, router.tls, timeout=5)
            sock.sendall(head.encode() + body)
            socks.append(sock)
            threads.append(threading.Thread(target=drain, args=(sock,), daemon=True))
            threads[-1].start()
        deadline = time.time() + 20
        while time.time() < deadline and len(started) < STREAMS:
            time.sleep(0.1)
        time.sleep(0.5)
        running = router.metric("tessera_requests_running")
        worst = answers_fast(f"{STREAMS} streams", router, "/health", times=5)
        ok = sum(1 for line in started if b" 200" in line)
        print(f"  {ok}/{STREAMS} streams answered 200 ({running:.0f} running); "
              f"/health max {worst:.3f} s")
        check(ok == STREAMS, f"only {ok}/{STREAMS} streams started: {set(started)}")
    finally:
        stop.set()
        for sock in socks:
            sock.close()
        for thread in threads:
            thread.join(timeout=2)
        wait_idle(router, 15)


def wait_idle(router, timeout_s):
    """Seconds until tessera_requests_running is 0 (None if not within timeout_s)."""
    start = time.time()
    while time.time() - start < timeout_s:
        try:
            if router.metric("tessera_requests_running") == 0:
                return time.time() - start
        except (OSError, ConnectionError, AssertionError):
            pass
        time.sleep(0.1)
    return None


def probe_metrics(ctx):
    """5. 8 slow connections on each metrics port: /healthz on each still answers at once."""
    router, worker_metrics = ctx["router"], ctx["worker_metrics"]
    payload = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"
    held = [SlowClients(router.metrics, 8, payload), SlowClients(worker_metrics, 8, payload)]
    try:
        time.sleep(0.5)
        worst = [answers_fast(f"{name} metrics port", router, "/healthz", times=4, addr=addr,
                              spacing=0.1)
                 for name, addr in (("router", router.metrics), ("worker", worker_metrics))]
        print(f"  8+8 slow metrics connections: /healthz max router {worst[0]:.3f} s, "
              f"worker {worst[1]:.3f} s")
    finally:
        for slow in held:
            slow.stop()


def send_head(router, head, timeout=FAST_S):
    """Sends a request head; returns (status or error, headers, body, seconds, reader)."""
    start = time.time()
    sock = connect(router.http, router.tls, timeout=timeout)
    reader = ResponseReader(sock)
    try:
        sock.sendall(head)
        status_line, headers, body = reader.read()
        return status_of(status_line), headers, body, time.time() - start, reader
    except (OSError, ConnectionError) as error:
        return type(error).__name__, {}, b"", time.time() - start, reader


def big_body_head(path, length, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def probe_bodies(ctx):
    """6. A 1 GiB Content-Length: 401 at once without a key, 413 at once with one (and on
    /tokenize); four such bodies being sent at once grow the router < 100 MB."""
    router, checks = ctx["router"], Checks()
    gib = 1 << 30
    key = "".join(f"{k}: {v}\r\n" for k, v in router.auth().items())
    status, headers, body, seconds, reader = send_head(router, big_body_head(
        "/v1/completions", gib))
    reader.sock.close()
    print(f"  1 GiB unauthenticated: {status} in {seconds:.3f} s")
    if checks.expect(status == 401 and seconds < FAST_S, f"unauthenticated 1 GiB: {status}"):
        checks.expect(headers.get("www-authenticate", "").lower().startswith("bearer"),
                      f"401 without WWW-Authenticate: {headers}")
    for path, length in (("/v1/completions", gib), ("/tokenize", 2 * MAX_BODY_MB << 20)):
        status, _, body, seconds, reader = send_head(router, big_body_head(path, length, key))
        closed = status == 413 and reader.closed_within(FAST_S)
        reader.sock.close()
        print(f"  {path} Content-Length {length} with the key: {status} in {seconds:.3f} s")
        if checks.expect(status == 413 and seconds < FAST_S, f"{path} {length} B: {status}"):
            checks.error_object(body, 413)
            checks.expect(closed, f"{path}: the connection stayed open after 413")
    growth = flood_rss(router, lambda: big_body_head("/v1/completions", gib), 4, 64 << 20)
    print(f"  4 x 1 GiB bodies sent at once (64 MiB each at most): router RSS +{growth:.1f} MB")
    checks.expect(growth < 100, f"4 hostile bodies grew the router by {growth:.1f} MB")
    checks.done()


def flood_rss(router, head_fn, connections, limit_bytes, seconds=4.0, chunk=b"a" * 65536):
    """Peak router RSS growth (MB) while `connections` clients each send head_fn() then up to
    limit_bytes of filler as fast as the server takes it (at most `seconds`)."""
    baseline, peak = router.rss_mb(), [router.rss_mb()]
    stop = threading.Event()

    def flood():
        try:
            sock = connect(router.http, router.tls, timeout=1)
        except OSError:
            return
        sent, deadline = 0, time.time() + seconds
        try:
            sock.sendall(head_fn())
            while sent < limit_bytes and time.time() < deadline and not stop.is_set():
                sent += sock.send(chunk)
        except OSError:
            pass
        finally:
            sock.close()

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        peak.append(router.rss_mb())
        time.sleep(0.05)
    stop.set()
    time.sleep(0.3)
    peak.append(router.rss_mb())
    return max(peak) - baseline


def probe_headers(ctx):
    """7. 200 header fields or one 80 KB header: 431 and closed; an 80 MB header flood is cut
    (RSS < +50 MB); a 9 KB request target: 414; each error an OpenAI error object."""
    router, checks = ctx["router"], Checks()
    many = "".join(f"X-Field-{i}: {i}\r\n" for i in range(200))
    huge = "X-Huge: " + "a" * (80 * 1024) + "\r\n"
    for label, fields in (("200 header fields", many), ("one 80 KB header", huge)):
        head = f"GET /health HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n".encode()
        status, _, body, seconds, reader = send_head(router, head)
        closed = status == 431 and reader.closed_within(FAST_S)
        reader.sock.close()
        print(f"  {label}: {status} in {seconds:.3f} s")
        if checks.expect(status == 431, f"{label}: {status}"):
            checks.error_object(body, 431)
            checks.expect(closed, f"{label}: the connection stayed open after 431")
    head = f"GET /health?pad={'a' * 9216} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    status, _, body, seconds, reader = send_head(router, head)
    reader.sock.close()
    print(f"  9 KB request target: {status} in {seconds:.3f} s: {body[:120]!r}")
    if checks.expect(status == 414, f"9 KB target: {status}"):
        checks.error_object(body, 414)
    growth = flood_rss(router, lambda: b"GET /health HTTP/1.1\r\nHost: localhost\r\n",
                       1, 80 << 20, seconds=5.0,
                       chunk=(b"X-Flood: " + b"a" * 1013 + b"\r\n") * 64)
    print(f"  80 MB header flood: router RSS +{growth:.1f} MB")
    checks.expect(growth < 50, f"an 80 MB header flood grew the router by {growth:.1f} MB")
    checks.done()


def probe_abandoned(ctx):
    """8. 16 non-streaming completions whose clients leave after 1 s are cancelled within 5 s:
    tessera_requests_running back to 0 and tessera_kv_blocks_used near idle."""
    router = ctx["router"]
    idle_blocks = router.metric("tessera_kv_blocks_used")
    body = json.dumps({"prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True,
                       "temperature": 0}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n")
    head += "".join(f"{k}: {v}\r\n" for k, v in router.auth().items()) + "\r\n"
    socks = []
    for _ in range(16):
        sock = connect(router.http, router.tls, timeout=5)
        sock.sendall(head.encode() + body)
        socks.append(sock)
    time.sleep(1.0)
    running = router.metric("tessera_requests_running")
    busy_blocks = router.metric("tessera_kv_blocks_used")
    for sock in socks:
        sock.close()
    cancel_s = wait_idle(router, 5.0)
    blocks = router.metric("tessera_kv_blocks_used")
    print(f"  16 abandoned completions ({running:.0f} running, KV {idle_blocks:.0f} -> "
          f"{busy_blocks:.0f} blocks): cancelled in "
          f"{'%.2f s' % cancel_s if cancel_s is not None else 'more than 5 s'}, "
          f"KV now {blocks:.0f} blocks")
    check(running > 0, "the abandoned completions never ran")
    check(cancel_s is not None, "abandoned completions still running 5 s after their clients left")
    check(blocks <= idle_blocks + 2, f"KV blocks {blocks:.0f}, idle {idle_blocks:.0f}")


def probe_ports(ctx):
    """9. A second SO_REUSEPORT socket cannot bind the router's HTTP port."""
    router = ctx["router"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind(router.http)
        except OSError as error:
            check(error.errno == errno.EADDRINUSE, error)
            print(f"  SO_REUSEPORT bind of {router.http[0]}:{router.http[1]}: EADDRINUSE")
            return
        raise AssertionError(f"a second socket bound the HTTP port {router.http[1]} "
                             "(the server set SO_REUSEPORT)")
    finally:
        sock.close()


def probe_auth(ctx):
    """10. `bearer KEY` (lowercase scheme) is accepted; a 401 carries WWW-Authenticate: Bearer."""
    router = ctx["router"]
    status = request(router, "GET", "/v1/models", {"Authorization": f"bearer {router.key}"})[0]
    check(status == 200, f"lowercase bearer scheme: {status}")
    status, headers, body = request(router, "GET", "/v1/models", {"Authorization": "Bearer no"})
    check(status == 401, status)
    challenge = headers.get("www-authenticate", "")
    check(challenge.lower().startswith("bearer"), f"401 without WWW-Authenticate: {headers}")
    print(f"  lowercase bearer: 200; 401 WWW-Authenticate: {challenge!r}")


def probe_protocol(ctx):
    """11. Two pipelined requests answered in order on one connection; HTTP/1.0 gets HTTP/1.0."""
    router, checks = ctx["router"], Checks()
    key = "".join(f"{k}: {v}\r\n" for k, v in router.auth().items())
    sock = connect(router.http, router.tls)
    answers = []
    try:
        sock.sendall(f"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n{key}\r\n"
                     "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        reader = ResponseReader(sock)
        for _ in range(2):
            answers.append(reader.read())
    except (OSError, ConnectionError) as error:
        checks.expect(False, f"pipelined: {len(answers)} of 2 answered, then "
                             f"{type(error).__name__}: {error}")
    finally:
        sock.close()
    if len(answers) == 2:
        (first, _, body1), (second, _, body2) = answers
        checks.expect(status_of(first) == 200 and json.loads(body1).get("object") == "list",
                      f"pipelined first: {first} {body1[:80]!r}")
        checks.expect(status_of(second) == 200 and json.loads(body2) == {},
                      f"pipelined second: {second} {body2[:80]!r}")
    sock = connect(router.http, router.tls)
    try:
        sock.sendall(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        line = ResponseReader(sock).read()[0]
    finally:
        sock.close()
    print(f"  pipelined: {len(answers)}/2 answered in order; HTTP/1.0 -> {line!r}")
    checks.expect(line.startswith("HTTP/1.0 "), f"HTTP/1.0 request answered {line!r}")
    checks.done()


def probe_tls(ctx):
    """12. 130 connections trickling a ClientHello: /health over TLS still answers at once."""
    router = ctx["router"]
    slow = SlowClients(router.http, SLOW_CONNECTIONS, client_hello())
    try:
        time.sleep(0.5)
        worst = answers_fast("TLS", router, "/health", times=4, spacing=0.1)
        print(f"  TLS: {slow.open_count()}/{SLOW_CONNECTIONS} trickled ClientHellos held, "
              f"/health max {worst:.3f} s")
        deadline = slow.start + slow.opened_s + HEADER_TIMEOUT_S + 3
        while time.time() < deadline and slow.open_count():
            time.sleep(0.1)
        print(f"  TLS: {slow.open_count()} trickling connections still open after "
              f"{time.time() - slow.start:.1f} s")
    finally:
        slow.stop()


# ---------------------------------------------------------------------------------------------

def run_probe(results, number, probe, ctx):
    name = probe.__name__[len("probe_"):]
    start = time.time()
    try:
        if not ctx["router"].alive():
            raise AssertionError(f"the router is not running (exit {ctx['router'].proc.poll()})")
        probe(ctx)
        verdict, why = "PASS", ""
    except AssertionError as error:
        verdict, why = "FAIL", str(error)
    except Exception as error:  # a probe's own fault still reports, and the suite goes on
        verdict, why = "FAIL", f"{type(error).__name__}: {error}"
    results.append((number, name, verdict))
    print(f"{verdict} {number:2d} {name} ({time.time() - start:.1f} s){': ' + why if why else ''}",
          flush=True)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--repo", default=os.getcwd())
    parser.add_argument("--legacy", action="store_true",
                        help="start the routers without the door flags (a router before "
                             "issue 23), to see which probes fail there")
    parser.add_argument("--only", default="", help="comma-separated probe numbers to run")
    return parser.parse_args()


KEYED = [(10, probe_auth), (11, probe_protocol), (9, probe_ports), (3, probe_slowloris_keyed),
         (5, probe_metrics), (4, probe_streams), (7, probe_headers), (6, probe_bodies),
         (8, probe_abandoned)]
OPEN = [(2, probe_slowloris_http), (1, probe_crash)]
TLS = [(12, probe_tls)]


def run_router(args, results, probes, worker, **router_args):
    only = {int(n) for n in args.only.split(",") if n}
    probes = [(n, p) for n, p in probes if not only or n in only]
    if not probes:
        return
    router = Router(args, worker[1]["listening"], **router_args)
    ctx = {"router": router, "worker_metrics": parse_addr(worker[1]["metrics"])}
    try:
        for number, probe in probes:
            run_probe(results, number, probe, ctx)
    finally:
        router.stop()


def main():
    args = parse_args()
    started = time.time()
    results = []
    worker = start_worker(args.bin_dir, args.model)
    try:
        with tempfile.TemporaryDirectory() as directory:
            run_router(args, results, KEYED, worker, api_key=KEY)
            run_router(args, results, OPEN, worker)
            cert, key = make_certificate(directory)
            run_router(args, results, TLS, worker, cert=cert, key=key)
    finally:
        worker[0].send_signal(signal.SIGTERM)
        try:
            worker[0].wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker[0].kill()
    failed = [f"{n} {name}" for n, name, verdict in sorted(results) if verdict == "FAIL"]
    print(f"hostile HTTP suite: {len(results) - len(failed)}/{len(results)} passed in "
          f"{time.time() - started:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
