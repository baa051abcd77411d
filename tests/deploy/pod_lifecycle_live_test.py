#!/usr/bin/env python3
"""The chart's pod, run as real processes: its flags start the real binaries, its probes answer,
and its termination sequence drains a running request.

The chart is rendered (Helm SDK, offline) with free loopback ports (the OpenAI HTTP port too) and
a worker secret from a Secret; the router and worker containers' exact `command` + `args` are run
(only the model path and 0.0.0.0 are replaced by the local model and 127.0.0.1), with their `env`
resolved against a stand-in for that Secret. Then, as the kubelet would:
  * startup/readiness/liveness: each container's probe paths answer 200 on its named port (the
    router is ready only if it and its worker were given the same worker secret);
  * the router's named port `http` serves the OpenAI API (/health, /v1/models answer 200);
  * termination: while `tessera generate` streams a long completion (1500 tokens: several seconds past the probe, even on a fast CPU), both preStop hooks start
    at once; the router gets SIGTERM when its hook ends, the worker when its hook ends. The
    router's /readyz must turn 503, the request must finish by length, the worker's hook must
    outlast the router, both must exit 0, all within terminationGracePeriodSeconds.
"""
import argparse
import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import helm_python as helm
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tessera"
# A stand-in for the cluster's Secrets: (secret name, key) -> value.
SECRETS = {("t-link", "worker-secret"): "pod-lifecycle-link-secret"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def render_pod():
    ports = {"router": {"grpcPort": free_port(), "httpPort": free_port(),
                        "metricsPort": free_port()},
             "worker": {"grpcPort": free_port(), "metricsPort": free_port(), "threads": 2,
                        "args": ["--kv-cache-mb=256"]}}
    values = {**ports, "router": {**ports["router"], "preStopSleepSeconds": 1,
                                  "drainTimeoutSeconds": 30},
              "workerSecret": {"existingSecret": "t-link"}}
    with helm.Chart.load(CHART) as chart:
        text = chart.render(values, name="t", namespace="t")["tessera/templates/deployment.yaml"]
    spec = yaml.safe_load(text)["spec"]["template"]["spec"]
    return spec, {c["name"]: c for c in spec["containers"]}


def local_command(container, bin_dir, model):
    out = []
    for arg in container["command"] + container["args"]:
        arg = re.sub(r"^--model=.*", f"--model={model}", arg).replace("0.0.0.0", "127.0.0.1")
        out.append(str(bin_dir / arg) if arg.startswith("tessera-") else arg)
    return out


def local_env(container):
    """The process environment: ours without TESSERA_* plus the container's env, secretKeyRefs
    looked up in SECRETS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        env[e["name"]] = SECRETS[(ref["name"], ref["key"])] if ref else e["value"]
    return env


def named_port(container, name):
    return next(p["containerPort"] for p in container["ports"] if p["name"] == name)


def probe_port(container, probe):
    name = container[probe]["httpGet"]["port"]
    return next(p["containerPort"] for p in container["ports"] if p["name"] == name)


def wait_probes(container, timeout_s=120):
    deadline = time.time() + timeout_s
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        port, path = probe_port(container, probe), container[probe]["httpGet"]["path"]
        while status(port, path) != 200:
            if time.time() > deadline:
                raise AssertionError(f"{container['name']} {probe} {path} never answered 200")
            time.sleep(0.2)


def terminate(name, proc, container, events):
    """The kubelet's order for one container: preStop hook, then SIGTERM, then wait."""
    hook = container["lifecycle"]["preStop"]["exec"]["command"]
    subprocess.run(hook, check=True, timeout=120)
    events.append((time.time(), f"{name} preStop done"))
    proc.terminate()
    code = proc.wait(timeout=60)
    events.append((time.time(), f"{name} exited {code}"))


def worker_outlasted_router(events):
    """The worker's hook ends only after the router's hook and once the router has stopped
    serving: the hook polls the router's metrics port, which the router closes as it exits, so
    the router's exit may be observed up to one poll (1 s) after the hook ended. A hook aimed at
    the wrong port would end at once, before the router's 1 s preStop sleep. The worker exits
    last."""
    at = {e: t for t, e in events}
    needed = ("router preStop done", "worker preStop done", "router exited 0", "worker exited 0")
    if any(e not in at for e in needed):
        return False
    return (at["router preStop done"] < at["worker preStop done"] and
            at["router exited 0"] <= at["worker preStop done"] + 1.5 and
            at["worker exited 0"] >= at["router exited 0"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True, type=pathlib.Path)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    spec, containers = render_pod()
    router, worker = containers["router"], containers["worker"]
    grace = spec["terminationGracePeriodSeconds"]
    procs, failures = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, c in (("worker", worker), ("router", router)):
                procs[name] = subprocess.Popen(local_command(c, args.bin_dir, args.model),
                                               env=local_env(c),
                                               stdout=open(f"{tmp}/{name}.log", "w"),
                                               stderr=subprocess.STDOUT)
            wait_probes(worker)
            wait_probes(router)
            print("PASS the chart's flags and env start both binaries; every probe answers 200")
            http = named_port(router, "http")
            for path in ("/health", "/v1/models"):
                code = status(http, path)
                if code != 200:
                    raise AssertionError(f"router port http {path}: {code}, want 200")
            print(f"PASS the router's port http ({http}) serves the OpenAI API")
            generate = subprocess.Popen(
                [str(args.bin_dir / "tessera"), "generate", "--addr",
                 f"127.0.0.1:{named_port(router, 'grpc')}", "--prompt",
                 "Tell me a long story about the sea.", "--max-tokens", "1500", "--ignore-eos"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(2)  # the request is running
            running_at_termination = generate.poll() is None
            events, start = [], time.time()
            threads = [threading.Thread(target=terminate, args=(n, procs[n], containers[n], events))
                       for n in ("router", "worker")]
            for t in threads:
                t.start()
            time.sleep(1.5)  # past the router's 1 s preStop sleep: draining
            draining = status(probe_port(router, "readinessProbe"), "/readyz")
            output = generate.communicate(timeout=120)[0]
            for t in threads:
                t.join(timeout=120)
            took = time.time() - start
            log = [f"{t - start:5.1f}s {e}" for t, e in sorted(events)]
            print("\n".join(log))
            order = [e for _, e in sorted(events)]
            checks = [
                (running_at_termination, "the request ended before termination began"),
                (draining == 503, f"router /readyz while draining: {draining}, want 503"),
                (generate.returncode == 0 and "finish: length" in output,
                 f"the running request did not finish: {output[-300:]}"),
                (worker_outlasted_router(events), f"termination order {log}"),
                (took < grace, f"termination took {took:.1f} s, grace {grace} s"),
            ]
            for ok, message in checks:
                if not ok:
                    failures.append(message)
                    print(f"FAIL {message}")
            if not failures:
                print(f"PASS drain: the request finished, router then worker exited 0 in "
                      f"{took:.1f} s (grace {grace} s)")
        except (AssertionError, OSError, subprocess.SubprocessError) as e:
            failures.append(str(e))
            print(f"FAIL {e}")
        finally:
            for name, proc in procs.items():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if failures:
                for name in procs:
                    print(f"--- {name} ---\n{pathlib.Path(tmp, name + '.log').read_text()[-1500:]}")
    print(f"{3 - min(len(failures), 3)} passed, {min(len(failures), 3)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
