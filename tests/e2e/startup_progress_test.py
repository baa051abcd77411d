#!/usr/bin/env python3
"""End to end: a worker's long start-up shows its progress and readiness follows it.

tessera-worker on the emulated device with eager graph capture (86 graphs for --max-num-seqs 4
and the default token buckets: a start-up long enough to watch) serves /metrics, /healthz and
/readyz from before the model loads. While it starts: /healthz is 200, /readyz is 503 saying the
phase with its percentage, counts, rate and ETA ("starting up: capturing CUDA graphs: 3% (3 of
86, 0.2/s, ETA 400 s)"), and stderr (not a terminal) carries the capture's structured progress
lines (phases shorter than 1 s, like this tiny model's upload, print none). The
worker is stopped before it finishes capturing. Bounded waits; loopback only.
"""
import argparse
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from e2e_checks import check


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--repo")
    args = parser.parse_args()
    worker = subprocess.Popen(
        [f"{args.bin_dir}/tessera-worker", "--device", "emulated", "--emulated-memory-mb", "1024",
         "--model", args.model, "--listen", "127.0.0.1:0", "--metrics-port", "0",
         "--cuda-graphs", "eager", "--max-num-seqs", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = worker.stdout.readline()
        match = re.match(r"tessera-worker metrics on 127\.0\.0\.1:(\d+)", first)
        check(match, f"first line {first!r}: the metrics server must start before the load")
        port = int(match.group(1))
        status, body = get(port, "/healthz")
        check(status == 200, (status, body))
        capture = re.compile(r"starting up: capturing CUDA graphs: \d+% \((\d+) of (\d+)"
                             r", [0-9.]+/s, ETA \d+ s\)")
        seen = None
        deadline = time.time() + 120
        while seen is None and time.time() < deadline and worker.poll() is None:
            status, body = get(port, "/readyz")
            check(status == 503, f"ready before the start-up ended: {status} {body!r}")
            found = capture.search(body)
            if found and int(found.group(1)) >= 1:
                seen = body.strip()
            time.sleep(0.2)
        check(seen, f"/readyz never showed the capture's progress; last: {status} {body!r}")
        print(f"/readyz during start-up: 503 {seen!r}")
    finally:
        worker.terminate()
        try:
            _, err = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, err = worker.communicate()
    lines = [l for l in err.splitlines() if "progress phase=" in l]
    print("\n".join(lines))
    # The capture runs for minutes here: past the 1 s quiet period, its progress is logged. (The
    # tiny upload ends within it and prints nothing, so an error after it stays one line.)
    check(any(re.fullmatch(r'tessera-worker: progress phase="capturing CUDA graphs" done=\d+ '
                           r'total=86 percent=\d+ rate="[0-9.]+/s" eta_s=-?\d+', l)
              for l in lines), lines)
    check(not any("\r" in l for l in err.splitlines()), "terminal rewrites in a pipe")
    print("startup progress OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
