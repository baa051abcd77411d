#!/usr/bin/env python3
"""Several workers in one pod (parallelism.workers > 1) render a valid, wired, fully scraped pod.

Runs in .venv-deploy, offline (helm-python-sdk, no cluster). The chart renders with
workers: 3, tensorParallel: 2, gpu: true and the ServiceMonitor on, and:
  * every manifest validates against the Kubernetes 1.37 schemas (strict) and keeps the pod's
    wiring (k8s_checks.check_pod_wiring: probes on named ports, loopback, drain, secrets, ...);
  * the pod has worker-0, worker-1, worker-2 after the router, each listening on its own loopback
    gRPC port and serving /metrics on its own named port (all distinct);
  * the router has exactly 3 --worker flags, in order the workers' --listen addresses;
  * each worker passes --tensor-parallel=2 and --device=cuda (worker.device "" picks cuda for
    GPU workers) and requests and limits 2 nvidia.com/gpu (6 a pod), the router none;
  * every worker's metrics port is scraped: a Service port, a ServiceMonitor endpoint as job
    tessera-worker with worker="i", and kept by deploy/prometheus/prometheus.yml's relabelling
    (applied here to the Service's port names) as job tessera-worker with a distinct worker="i".
Also: workers: 1 keeps the names "worker" / "worker-metrics" and no worker label, and bad values
(too many workers, worker ports colliding with the router's, ports past 65535) are refused.
"""
import pathlib
import re
import sys

import helm_python as helm
import yaml

import k8s_checks as k
from chart_render import CheckRun, count_unrefused, render
from k8s_checks import expect

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "tessera"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"

WORKERS, TP = 3, 2
VALUES = {"parallelism": {"workers": WORKERS, "tensorParallel": TP, "gpu": True},
          "serviceMonitor": {"enabled": True}}

BAD_VALUES = [
    ({"parallelism": {"workers": 9}}, "/parallelism/workers"),
    ({"parallelism": {"workers": 0}}, "/parallelism/workers"),
    # the workers' metrics ports would be 8000 and 8001, the router's gRPC and metrics ports.
    ({"parallelism": {"workers": 2}, "worker": {"metricsPort": 8000}}, "must differ"),
    # worker 2's step port would be the first metrics port.
    ({"parallelism": {"workers": 3}, "worker": {"grpcPort": 8100, "metricsPort": 8102}},
     "must differ"),
    ({"parallelism": {"workers": 4}, "worker": {"metricsPort": 65534}}, "at most 65535"),
    ({"parallelism": {"workers": 2, "gpu": True},
      "worker": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}, "per worker container"),
]




def pod_spec(docs):
    return k.one(docs, "Deployment")["spec"]["template"]["spec"]


def check_containers(docs):
    spec = pod_spec(docs)
    names = [c["name"] for c in spec["containers"]]
    expect(names == ["router"] + [f"worker-{i}" for i in range(WORKERS)],
           f"containers {names}")
    workers = k.workers_of(spec)
    listens = [k.flag(w, "listen") for w in workers]
    metrics = [(p["name"], p["containerPort"]) for w in workers for p in w.get("ports", [])]
    expect(len(metrics) == WORKERS, f"worker ports {metrics}: want one each")
    all_ports = [int(a.rsplit(":", 1)[1]) for a in listens] + [p for _, p in metrics]
    expect(len(set(all_ports)) == 2 * WORKERS, f"worker ports not distinct: {all_ports}")
    expect(len({n for n, _ in metrics}) == WORKERS and all(len(n) <= 15 for n, _ in metrics),
           f"worker port names {metrics}")
    for w, (name, port) in zip(workers, metrics):
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            expect(w[probe]["httpGet"]["port"] == name,
                   f"{w['name']}.{probe} probes {w[probe]['httpGet']['port']}, not {name}")
        expect(k.flag(w, "metrics-port") == str(port), f"{w['name']} --metrics-port")


def check_router_flags(docs):
    spec = pod_spec(docs)
    router = spec["containers"][0]
    dialled = k.flags(router, "worker")
    listens = [k.flag(w, "listen") for w in k.workers_of(spec)]
    expect(len(dialled) == WORKERS, f"router has {len(dialled)} --worker flags: {dialled}")
    expect(dialled == listens, f"router --worker {dialled} != workers' --listen {listens}")


def check_gpus(docs):
    spec = pod_spec(docs)
    total = 0
    for w in k.workers_of(spec):
        expect(k.flags(w, "tensor-parallel") == [str(TP)],
               f"{w['name']} --tensor-parallel {k.flags(w, 'tensor-parallel')}")
        # tessera-worker refuses --tensor-parallel > 1 without --device cuda (or emulated).
        expect(k.flags(w, "device") == ["cuda"], f"{w['name']} --device {k.flags(w, 'device')}")
        for kind in ("requests", "limits"):
            got = w["resources"].get(kind, {}).get("nvidia.com/gpu")
            expect(got == TP, f"{w['name']} {kind} nvidia.com/gpu {got}, want {TP}")
        total += w["resources"]["limits"]["nvidia.com/gpu"]
    expect(total == WORKERS * TP, f"the pod asks for {total} GPUs, want {WORKERS * TP}")
    expect("nvidia.com/gpu" not in str(spec["containers"][0].get("resources")),
           "the router asks for a GPU")


def relabel(rules, labels):
    """Prometheus' relabelling (the keep and replace actions prometheus.yml uses): the target's
    labels, or None when dropped."""
    labels = dict(labels)
    for rule in rules:
        value = ";".join(labels.get(s, "") for s in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep":
            if not match:
                return None
        elif action == "replace":
            if match:
                result = re.sub(r"\$\{?(\d+)\}?", lambda m: match.group(int(m.group(1))) or "",
                                str(rule.get("replacement", "$1")))
                if result:
                    labels[rule["target_label"]] = result
                else:
                    labels.pop(rule["target_label"], None)
        else:
            raise k.CheckFailed(f"relabel action {action} not simulated")
    return labels


def scraped_by_prometheus(port_names):
    """{Service port name: (job, worker label)} for the targets prometheus.yml keeps."""
    (job,) = yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
    kept = {}
    for name in port_names:
        labels = relabel(job["relabel_configs"], {
            "__meta_kubernetes_service_label_app_kubernetes_io_name": "tessera",
            "__meta_kubernetes_endpoint_port_name": name,
            "__meta_kubernetes_pod_name": "demo-tessera-0"})
        if labels is not None:
            kept[name] = (labels.get("job"), labels.get("worker"))
    return kept


def check_scraped(docs, workers):
    want = {name: ("tessera-worker", str(i) if workers > 1 else None)
            for i, name in enumerate(k.worker_port_names(workers))}
    service_ports = [p["name"] for p in k.one(docs, "Service")["spec"]["ports"]]
    expect(set(want) <= set(service_ports), f"Service ports {service_ports} miss worker ports")
    monitor = {}
    for endpoint in k.one(docs, "ServiceMonitor")["spec"]["endpoints"]:
        relabels = {r["targetLabel"]: r.get("replacement") for r in endpoint["relabelings"]}
        monitor[endpoint["port"]] = (relabels.get("job"), relabels.get("worker"))
    got = {name: monitor.get(name) for name in want}
    expect(got == want, f"ServiceMonitor scrapes the workers as {got}, want {want}")
    kept = scraped_by_prometheus(service_ports)
    got = {name: kept.get(name) for name in want}
    expect(got == want, f"prometheus.yml scrapes the workers as {got}, want {want}")
    expect(kept.get("metrics") == ("tessera-router", None), f"router target {kept.get('metrics')}")
    expect(set(kept) == set(want) | {"metrics"}, f"prometheus.yml keeps {sorted(kept)}")


def check_case(docs):
    k.validate_all(docs)
    k.check_pod_wiring(docs)
    check_containers(docs)
    check_router_flags(docs)
    check_gpus(docs)
    check_scraped(docs, WORKERS)


def check_one_worker(docs):
    k.validate_all(docs)
    k.check_pod_wiring(docs)
    spec = pod_spec(docs)
    expect([c["name"] for c in spec["containers"]] == ["router", "worker"],
           "workers: 1 renames the worker container")
    check_scraped(docs, 1)


def main():
    run = CheckRun()

    with helm.Chart.load(CHART) as chart:
        report = helm.lint(CHART, VALUES, strict=True)
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        run("helm lint --strict", lambda: expect(not problems, f"lint: {problems}"))
        docs = render(chart, VALUES)
        run("schemas + pod wiring", lambda: (k.validate_all(docs), k.check_pod_wiring(docs)))
        run(f"{WORKERS} worker containers, distinct ports", lambda: check_containers(docs))
        run(f"router: {WORKERS} --worker flags = the workers' ports",
            lambda: check_router_flags(docs))
        run(f"each worker: --tensor-parallel={TP}, --device=cuda, {TP} GPUs", lambda: check_gpus(docs))
        run("every worker metrics port scraped", lambda: check_scraped(docs, WORKERS))
        run("workers: 1 keeps worker / worker-metrics",
            lambda: check_one_worker(render(chart, {"serviceMonitor": {"enabled": True}})))
        run("workers: 8 (the most)", lambda: (
            k.validate_all(d := render(chart, {"parallelism": {"workers": 8},
                                               "serviceMonitor": {"enabled": True}})),
            k.check_pod_wiring(d), check_scraped(d, 8)))
        run.failures += count_unrefused(chart, BAD_VALUES)
    print(f"{run.failures} failed")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
