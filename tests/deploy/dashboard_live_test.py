#!/usr/bin/env python3
"""End to end: every Grafana dashboard query returns data from a real Prometheus scraping a live
tessera, through the shipped scrape config.

  1. tessera-worker and tessera-router run as real processes on loopback, each with
     --metrics-port, as the two containers of a pod do.
  2. The real Prometheus (Debian `prometheus`) runs deploy/prometheus/prometheus.yml's scrape job
     and relabel rules and alerts.yml, with one change: Debian builds Prometheus without
     Kubernetes discovery, so the targets come from static_configs that carry the __meta_kubernetes_*
     labels Kubernetes would attach to the pod's endpoints (ports "metrics" and
     "worker-metrics"), plus a decoy endpoint the keep rules must drop.
  3. `tessera bench` sends concurrent requests with a shared prefix.
  4. The dashboard's variable queries must list the pod's model and instance; each dashboard
     query, with the variables set to them, must return at least one finite sample. On the CPU
     backend the step-level row is known exactly: graph reuse ratio 0 (no graphs), GPU busy 0,
     host processing per step > 0; those values are asserted too. The panels that follow the
     load (throughput, running requests, finished requests, KV blocks used, host time per step)
     must not be flat over the bench: at least two different values. Every alert rule must
     evaluate without error on the live series, and none may fire on this healthy pod.

Missing binaries (tessera, prometheus) FAIL the test with the reason; nothing is skipped.
"""
import argparse
import json
import math
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

import dashboard_queries as dq

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
POD = "tessera-0"
MODEL_LABEL = "SmolLM2-135M-Instruct.Q4_1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode()


class Processes:
    """Children started by this test, stopped (SIGTERM, then SIGKILL) at exit."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.children = []

    def start(self, name, cmd):
        log = open(self.log_dir / f"{name}.log", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        self.children.append((name, proc, log))
        return proc

    def wait_for_line(self, name, pattern, timeout_s=120):
        """The first match of `pattern` in the child's output, waiting for it."""
        proc = next(p for n, p, _ in self.children if n == name)
        path = self.log_dir / f"{name}.log"
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            match = re.search(pattern, path.read_text())
            if match:
                return match
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}): {self.tail(name)}")
            time.sleep(0.1)
        raise RuntimeError(f"{name}: no line matching {pattern!r} in {timeout_s} s")

    def tail(self, name):
        return (self.log_dir / f"{name}.log").read_text()[-2000:]

    def stop_all(self):
        for _, proc, _ in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
        for _, proc, log in reversed(self.children):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def start_tessera(procs, bin_dir, model):
    procs.start("worker", [str(bin_dir / "tessera-worker"), "--model", model,
                           "--listen", "127.0.0.1:0", "--metrics-port", "0", "--threads", "2",
                           "--kv-cache-mb", "256"])
    worker_metrics = procs.wait_for_line("worker", r"tessera-worker metrics on (\S+)").group(1)
    worker_addr = procs.wait_for_line("worker", r"tessera-worker listening on (\S+)").group(1)
    # A small batch so that concurrent requests queue (requests_waiting moves).
    procs.start("router", [str(bin_dir / "tessera-router"), "--model", model,
                           "--worker", worker_addr, "--listen", "127.0.0.1:0",
                           "--metrics-port", "0", "--http-port", "0", "--max-num-seqs", "4"])
    router_metrics = procs.wait_for_line("router", r"tessera-router metrics on (\S+)").group(1)
    router_addr = procs.wait_for_line("router", r"tessera-router listening on (\S+)").group(1)
    for _ in range(300):
        try:
            if http_get(f"http://{router_metrics}/readyz")[0] == 200:
                return router_addr, router_metrics, worker_metrics
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the router never became ready (/readyz)")


def k8s_target(address, port_name, pod, app="tessera"):
    """A static target with the meta labels Kubernetes endpoints discovery would attach."""
    return {"targets": [address], "labels": {
        "__meta_kubernetes_service_label_app_kubernetes_io_name": app,
        "__meta_kubernetes_endpoint_port_name": port_name,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_namespace": "llm",
        "__meta_kubernetes_service_name": "demo-tessera" if app == "tessera" else app,
        "__meta_kubernetes_pod_label_tessera_model": MODEL_LABEL}}


def prometheus_config(router_metrics, worker_metrics, decoy):
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config["global"].update({"scrape_interval": "1s", "scrape_timeout": "1s",
                             "evaluation_interval": "1s"})
    config["rule_files"] = [str(PROMETHEUS_DIR / f) for f in config["rule_files"]]
    (job,) = config["scrape_configs"]
    job.pop("kubernetes_sd_configs")
    job["static_configs"] = [k8s_target(router_metrics, "metrics", POD),
                             k8s_target(worker_metrics, "worker-metrics", POD),
                             # Another app's metrics port: the keep rules must drop it.
                             k8s_target(decoy, "metrics", "other-0", app="other")]
    return config


class Prometheus:
    def __init__(self, procs, binary, tmp, config):
        self.address = f"127.0.0.1:{free_port()}"
        path = tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        procs.start("prometheus", [binary, f"--config.file={path}",
                                   f"--storage.tsdb.path={tmp / 'data'}",
                                   f"--web.listen-address={self.address}", "--log.level=warn"])
        for _ in range(300):
            try:
                if http_get(f"http://{self.address}/-/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready: {procs.tail('prometheus')}")

    def api(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        status, body = http_get(f"http://{self.address}/api/v1/{path}?{query}", timeout=20)
        reply = json.loads(body)
        if reply.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body[:500]}")
        return reply["data"]

    def values(self, promql):
        return [float(s["value"][1]) for s in self.api("query", query=promql)["result"]]


def check_targets(prom):
    """Exactly the pod's two endpoints survive relabeling, with the labels the dashboard uses."""
    deadline = time.time() + 30
    while time.time() < deadline:
        active = prom.api("targets", state="active")["activeTargets"]
        if len(active) == 2 and all(t["health"] == "up" for t in active):
            break
        time.sleep(0.5)
    labels = sorted((t["labels"]["job"], t["labels"]["instance"], t["labels"]["model"],
                     t["labels"]["namespace"], t["labels"]["service"], t["health"])
                    for t in active)
    want = sorted((job, POD, MODEL_LABEL, "llm", "demo-tessera", "up")
                  for job in ("tessera-router", "tessera-worker"))
    if labels != want:
        raise AssertionError(f"targets after relabeling: {labels}, want {want}")


def run_bench(bin_dir, router_addr, log_dir):
    cmd = [str(bin_dir / "tessera"), "bench", "--addr", router_addr, "--concurrency", "8",
           "--num-requests", "24", "--prompt-tokens", "48", "--shared-prefix-tokens", "32",
           "--output-tokens", "12"]
    with open(log_dir / "bench.log", "w") as log:
        result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=240)
    if result.returncode != 0:
        raise RuntimeError(f"tessera bench failed: {(log_dir / 'bench.log').read_text()[-2000:]}")


def check_variables(prom, dashboard):
    """The variable queries, as Grafana runs them (label values of a series selector)."""
    found = {}
    for name, query in dq.variable_queries(dashboard).items():
        selector, label = dq.parse_label_values(query)
        selector = dq.resolve(selector, model=dq.grafana_escape(MODEL_LABEL), instance=POD)
        found[name] = prom.api(f"label/{label}/values", **{"match[]": selector})
    want = {"model": [MODEL_LABEL], "instance": [POD]}
    if found != want:
        raise AssertionError(f"dashboard variables {found}, want {want}")


def expr_by_title(dashboard, title, ref):
    return next(e for t, r, e in dq.queries(dashboard) if t == title and r == ref)


def check_queries(prom, dashboard, rate_interval):
    """Each query returns a finite sample; returns the failures as text."""
    failures, passed = [], 0
    for title, ref, expr in dq.queries(dashboard):
        promql = dq.resolve(expr, model=dq.grafana_escape(MODEL_LABEL), instance=POD,
                            rate_interval=rate_interval)
        values = prom.values(promql)
        if any(math.isfinite(v) for v in values):
            passed += 1
            print(f"PASS {title}/{ref}: {['%.4g' % v for v in values]}")
        else:
            failures.append(f"{title}/{ref} returned {values or 'no data'}: {promql}")
            print(f"FAIL {failures[-1]}")
    # The step-level row on the CPU backend: its values are known, not just present.
    exact = [("Graph reuse ratio", "A", lambda v: v == 0, "== 0 (no CUDA graphs on cpu)"),
             ("GPU busy", "A", lambda v: v == 0, "== 0 on cpu"),
             ("Host processing per step", "A", lambda v: 0 < v < 10, "in (0, 10) s"),
             ("Tokens per second", "B", lambda v: v > 0, "> 0 generated tokens/s"),
             ("Prefix-cache hit rate", "A", lambda v: 0 < v <= 1, "in (0, 1] (shared prefix)")]
    for title, ref, ok, rule in exact:
        promql = dq.resolve(expr_by_title(dashboard, title, ref), model=dq.grafana_escape(MODEL_LABEL),
                            instance=POD, rate_interval=rate_interval)
        values = prom.values(promql)
        if values and all(ok(v) for v in values):
            passed += 1
            print(f"PASS {title}/{ref} {rule}: {values}")
        else:
            failures.append(f"{title}/{ref}: {values}, want {rule}")
            print(f"FAIL {failures[-1]}")
    return passed, failures


# Panels whose series must move with the load: over the bench (and a little idle time before
# it), each must hold at least two different finite values, so a panel stuck at one value (a
# gauge never updated, a counter never incremented) fails even though it "returns data".
LOAD_FOLLOWING = [("Tokens per second", "A"), ("Tokens per second", "B"),
                  ("Requests running and waiting", "A"), ("Finished requests per second", "A"),
                  ("KV blocks used / capacity", "A"), ("Host processing per step", "A")]


def check_non_flat(prom, dashboard, start, end):
    """Each LOAD_FOLLOWING query over [start, end] at 1 s steps; returns (passed, failures)."""
    failures, passed = [], 0
    for title, ref in LOAD_FOLLOWING:
        promql = dq.resolve(expr_by_title(dashboard, title, ref),
                            model=dq.grafana_escape(MODEL_LABEL), instance=POD, rate_interval="5s")
        series = prom.api("query_range", query=promql, start=f"{start:.3f}", end=f"{end:.3f}",
                          step="1")["result"]
        values = [float(v) for s in series for _, v in s["values"] if math.isfinite(float(v))]
        if len(set(values)) >= 2:
            passed += 1
            print(f"PASS {title}/{ref} follows the load: {min(values):.4g} .. {max(values):.4g} "
                  f"over {len(values)} samples")
        else:
            failures.append(f"{title}/{ref} is flat under load: {sorted(set(values))}")
            print(f"FAIL {failures[-1]}")
    return passed, failures


def check_alert_rules(prom):
    """Every alert rule evaluated without error on the live series; none fires."""
    deadline = time.time() + 20
    while True:
        rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
        evaluated = all(r.get("lastEvaluation", "").startswith("20") for r in rules)
        if evaluated or time.time() > deadline:
            break
        time.sleep(0.5)
    bad = [f"{r['name']}: health {r['health']} {r.get('lastError', '')} state {r['state']}"
           for r in rules if r["health"] != "ok" or r["state"] != "inactive"]
    if len(rules) != 6 or bad:
        raise AssertionError(f"{len(rules)} alert rules; problems: {bad}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True, type=pathlib.Path)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    prometheus = shutil.which("prometheus")
    missing = [str(p) for p in (args.bin_dir / "tessera", args.bin_dir / "tessera-router",
                                args.bin_dir / "tessera-worker") if not p.exists()]
    if prometheus is None or missing or not pathlib.Path(args.model).exists():
        print(f"FAIL missing: {missing + ([] if prometheus else ['prometheus'])} "
              f"model {args.model} (scripts/install_deps.sh, scripts/build.sh, "
              "scripts/fetch_model.sh)\n0 passed, 1 failed")
        return 1
    dashboard = dq.load()
    with tempfile.TemporaryDirectory(prefix="tessera_dashboard_") as tmp:
        tmp = pathlib.Path(tmp)
        procs = Processes(tmp)
        try:
            router_addr, router_metrics, worker_metrics = start_tessera(
                procs, args.bin_dir, args.model)
            decoy = f"127.0.0.1:{free_port()}"
            prom = Prometheus(procs, prometheus, tmp,
                              prometheus_config(router_metrics, worker_metrics, decoy))
            check_targets(prom)
            time.sleep(2)  # idle samples before the load, for the non-flat check
            started = time.time()
            run_bench(args.bin_dir, router_addr, tmp)
            bench_s = time.time() - started
            time.sleep(3)  # the last scrapes after the final requests
            # Rate windows (Grafana's $__rate_interval) that span the whole bench, however slow
            # the machine: a scrape every second gives each window enough samples.
            rate_interval = f"{int(bench_s) + 15}s"
            print(f"bench: {bench_s:.1f} s; queries use [{rate_interval}] windows")
            check_variables(prom, dashboard)
            passed, failures = check_queries(prom, dashboard, rate_interval)
            moving, flat = check_non_flat(prom, dashboard, started - 2, time.time())
            passed += moving
            failures += flat
            check_alert_rules(prom)
            passed += 3  # targets, variables, alert rules
        except (AssertionError, RuntimeError, OSError, subprocess.SubprocessError) as e:
            print(f"FAIL {e}")
            for name in ("worker", "router", "prometheus"):
                if (tmp / f"{name}.log").exists():
                    print(f"--- {name} log tail ---\n{procs.tail(name)}")
            print("0 passed, 1 failed")
            return 1
        finally:
            procs.stop_all()
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
