#!/usr/bin/env python3
"""What hostile_http_test.py drives: the processes (one worker, routers with the door flags),
raw HTTP over sockets (plain and TLS, with deadlines) and slow clients (trickled heads and
ClientHellos). stdlib only; every loop bounded."""
import errno
import json
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import make_certificate  # noqa: E402,F401 (the suite's TLS router uses it)

from e2e_checks import check

KEY = "hostile-key-1234"
HEADER_TIMEOUT_S = 3
BODY_TIMEOUT_S = 3
MAX_BODY_MB = 1
FAST_S = 1.0          # what "answers at once" means
CLIENT_TIMEOUT_S = 2.5  # how long one measuring request may wait before it counts as failed
SLOW_CONNECTIONS = 130
STREAMS = 128
PROMPT = "The capital of France is"


def door_flags(legacy):
    if legacy:
        return []
    return ["--http-header-timeout", str(HEADER_TIMEOUT_S), "--http-body-timeout",
            str(BODY_TIMEOUT_S), "--http-max-body-mb", str(MAX_BODY_MB),
            "--http-keep-alive-timeout", "30", "--http-max-connections", "2048",
            "--http-max-connections-per-client", "512"]


# ---------------------------------------------------------------------------------------------
# Processes

def read_addresses(proc, name, timeout_s=120):
    """{'metrics': addr, 'http': addr, 'listening': addr} up to the 'NAME listening on' line."""
    addresses = {}
    deadline = time.time() + timeout_s
    while time.time() < deadline and "listening" not in addresses:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{name} exited with {proc.wait()} before it was ready")
        match = re.search(name + r" (metrics|http|listening) on (\S+)", line)
        if match:
            addresses[match.group(1)] = match.group(2)
    if "listening" not in addresses:
        proc.kill()
        raise RuntimeError(f"{name} not ready after {timeout_s} s")
    return addresses


def start_worker(bin_dir, model):
    proc = subprocess.Popen(
        [os.path.join(bin_dir, "tessera-worker"), "--model", model, "--listen", "127.0.0.1:0",
         "--threads", "2", "--kv-cache-mb", "512", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    return proc, read_addresses(proc, "tessera-worker")


class Router:
    """One tessera-router process and its addresses; `tls` is the client's SSLContext or None."""

    def __init__(self, args, worker_addr, api_key=None, cert=None, key=None, extra=()):
        cmd = [os.path.join(args.bin_dir, "tessera-router"), "--model", args.model, "--worker",
               worker_addr, "--listen", "127.0.0.1:0", "--http-port", "-1", "--metrics-port",
               "0", "--drain-timeout-s", "1"] + door_flags(args.legacy) + list(extra)
        if api_key:
            cmd += ["--api-key", api_key]
        if cert:
            cmd += ["--tls-cert", cert, "--tls-key", key]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
        addresses = read_addresses(self.proc, "tessera-router")
        self.http = parse_addr(addresses["http"])
        self.metrics = parse_addr(addresses["metrics"])
        self.key = api_key
        self.tls = ssl.create_default_context(cafile=cert) if cert else None
        self.wait_serving()

    def wait_serving(self, timeout_s=60):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                if request(self, "GET", "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the router never served /health")

    def auth(self):
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def alive(self):
        return self.proc.poll() is None

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        raise RuntimeError("no VmRSS")

    def metric(self, name):
        status, _, body = request_to(self.metrics, "GET", "/metrics", timeout=5)
        check(status == 200, status)
        match = re.search(r"^" + name + r"(?:\{[^}]*\})? (\S+)$", body.decode(), re.MULTILINE)
        return float(match.group(1)) if match else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def parse_addr(text):
    host, port = text.rsplit(":", 1)
    return host.strip("[]"), int(port)




# ---------------------------------------------------------------------------------------------
# Raw HTTP over sockets

def connect(addr, tls=None, timeout=CLIENT_TIMEOUT_S):
    sock = socket.create_connection(addr, timeout=timeout)
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname="localhost")
    return sock


class ResponseReader:
    """Reads HTTP responses off one socket, one at a time (Content-Length, chunked or close)."""

    def __init__(self, sock):
        self.sock, self.buffer, self.eof = sock, b"", False

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
        self.buffer += data
        return bool(data)

    def _until(self, marker):
        while marker not in self.buffer:
            if not self._fill():
                raise ConnectionError(f"closed before {marker!r}")
        head, self.buffer = self.buffer.split(marker, 1)
        return head

    def _take(self, n):
        while len(self.buffer) < n:
            if not self._fill():
                raise ConnectionError("closed inside a body")
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read(self):
        """(status line, {lowercase header: value}, body)."""
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = self._take(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._until(b"\r\n").split(b";")[0], 16)
                chunk = self._take(size + 2)[:size]
                if size == 0:
                    break
                body += chunk
        else:
            while self._fill():
                pass
            body, self.buffer = self.buffer, b""
        return head[0], headers, body

    def closed_within(self, seconds):
        """True once the peer closed (EOF or reset) within `seconds`; leftover bytes are read."""
        self.sock.settimeout(seconds)
        deadline = time.time() + seconds
        try:
            while time.time() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.time()))
                if not self._fill():
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True
        return False


def status_of(status_line):
    parts = status_line.split(" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def request_to(addr, method, path, headers=None, body=None, tls=None, timeout=CLIENT_TIMEOUT_S):
    """(status, headers, body) of one request on a fresh connection (Connection: close)."""
    payload = body.encode() if isinstance(body, str) else (body or b"")
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(payload)}")
    sock = connect(addr, tls, timeout)
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        status_line, response_headers, response_body = ResponseReader(sock).read()
        return status_of(status_line), response_headers, response_body
    finally:
        sock.close()


def request(router, method, path, headers=None, body=None, timeout=CLIENT_TIMEOUT_S):
    return request_to(router.http, method, path, headers, body, router.tls, timeout)


def timed_get(router, path, headers=None, addr=None):
    """(seconds, status or the error) of one GET."""
    start = time.time()
    try:
        if addr is None:
            status = request(router, "GET", path, headers)[0]
        else:
            status = request_to(addr, "GET", path, headers)[0]
    except (OSError, ConnectionError) as error:
        status = f"{type(error).__name__}"
    return time.time() - start, status


def answers_fast(label, router, path, times=5, headers=None, addr=None, spacing=0.2):
    """Asserts `times` GETs each answer 200 in < FAST_S; returns the slowest (s)."""
    worst = 0.0
    for _ in range(times):
        seconds, status = timed_get(router, path, headers, addr)
        worst = max(worst, seconds)
        check(status == 200 and seconds < FAST_S, f"{label}: {path} answered {status} after {seconds:.3f} s")
        time.sleep(spacing)
    return worst


class Checks:
    """Sub-checks of one probe: every one runs and reports; the probe fails if any failed."""

    def __init__(self):
        self.failures = []

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)
        return ok

    def error_object(self, body, status):
        try:
            assert_error_object(body, status)
        except AssertionError as error:
            self.failures.append(str(error))

    def done(self):
        check(not self.failures, "; ".join(self.failures))


def assert_error_object(body, status):
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"{status} body is not an OpenAI error object: {body[:200]!r}")
    check(error.get("type") == "invalid_request_error", f"{status} error type: {error}")
    for field in ("message", "param", "code"):
        check(field in error, f"{status} error object lacks {field}: {error}")


# ---------------------------------------------------------------------------------------------
# Slow clients

class SlowClients:
    """`count` connections, each sent one more byte of `payload` per second (from its connect on)
    by one thread; notes when the server closes each (EOF, reset, or a response: its status is
    kept)."""

    def __init__(self, addr, count, payload):
        self.payload, self.socks, self.closed, self.reasons = payload, [], {}, {}
        self.statuses, self.start, self.lock = [], time.time(), threading.Lock()
        self.next_byte, self.next_time = [], []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        for _ in range(count):  # each sends its first byte at once, as a real client would
            sock = socket.create_connection(addr, timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.send(payload[:1])
            sock.setblocking(False)
            with self.lock:
                self.socks.append(sock)
                self.next_byte.append(1)
                self.next_time.append(time.time() + 1.0)
        self.opened_s = time.time() - self.start

    def _run(self):
        while not self.stop_event.is_set():
            with self.lock:
                due = [(i, s) for i, s in enumerate(self.socks)
                       if i not in self.closed and self.next_time[i] <= time.time()]
            for i, sock in due:
                if self.next_byte[i] < len(self.payload):
                    self._send_one(i, sock, self.payload[self.next_byte[i]:self.next_byte[i] + 1])
                self.next_byte[i] += 1
                self.next_time[i] += 1.0
            self._poll(0.05)

    def _send_one(self, i, sock, byte):
        try:
            sock.send(byte)
        except OSError as error:
            self._close(i, f"send {errno.errorcode.get(error.errno, error.errno)}")

    def _close(self, i, reason):
        self.closed[i] = time.time() - self.start
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def _poll(self, seconds):
        with self.lock:
            live = {s: i for i, s in enumerate(self.socks) if i not in self.closed}
        if not live:
            time.sleep(seconds)
            return
        readable, _, _ = select.select(list(live), [], [], seconds)
        for sock in readable:
            self._read_one(live[sock], sock)

    def _read_one(self, i, sock):
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError as error:
            return self._close(i, f"recv {errno.errorcode.get(error.errno, error.errno)}")
        if data.startswith(b"HTTP/"):
            status = status_of(data.split(b"\r\n")[0].decode("latin-1"))
            self.statuses.append(status)
            self._close(i, f"status {status}")
        elif not data:
            self._close(i, "eof")
        else:
            self._close(i, f"{len(data)} bytes")

    def open_count(self):
        with self.lock:
            return len(self.socks) - len(self.closed)

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=5)
        for sock in self.socks:
            sock.close()


def slow_http_payload():
    return (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
            b"\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n")


def client_hello():
    """The bytes of a real TLS ClientHello (stdlib's MemoryBIO, nothing sent anywhere)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def slowloris(router, label, payload, routes, expect_closed=True):
    """Holds SLOW_CONNECTIONS trickling connections, measures `routes`, then (new doors) checks
    the server closed every one after the header timeout."""
    slow = SlowClients(router.http, SLOW_CONNECTIONS, payload)
    try:
        time.sleep(0.5)
        worst = {}
        for path, headers in routes:
            worst[path] = answers_fast(label, router, path, times=4, headers=headers,
                                       spacing=0.1)
        held = slow.open_count()
        print(f"  {label}: {held}/{SLOW_CONNECTIONS} slow connections held (opened in "
              f"{slow.opened_s:.1f} s) while "
              + ", ".join(f"{p} max {w:.3f} s" for p, w in worst.items()))
        if not expect_closed:
            return
        deadline = slow.start + slow.opened_s + HEADER_TIMEOUT_S + 3
        while time.time() < deadline and slow.open_count():
            time.sleep(0.1)
        closes = sorted(slow.closed.values())
        check(not slow.open_count(), f"{label}: {slow.open_count()} slow connections still open " \
            f"{HEADER_TIMEOUT_S + 3} s after the last opened (header timeout {HEADER_TIMEOUT_S} s)")
        statuses = sorted(set(s for s in slow.statuses))
        print(f"  {label}: all closed by the server after {closes[0]:.1f}-{closes[-1]:.1f} s "
              f"(statuses sent: {statuses or 'none'})")
        check(all(s == 408 for s in slow.statuses), f"{label}: statuses {statuses}")
    finally:
        slow.stop()
