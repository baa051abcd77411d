#!/usr/bin/env python3
"""The chart's inference-gateway option (inferencePool.enabled) renders a valid, wired pool.

Runs in .venv-deploy, offline. For each case the chart renders with helm (helm-python-sdk):
  * the tessera objects validate against the Kubernetes 1.37 schemas and keep the pod's wiring
    (k8s_checks.py); the endpoint picker's objects (Deployment, Service, ConfigMap, RBAC) validate
    against the same schemas;
  * the InferencePool validates against the upstream CRD's OpenAPI v3 schema (fixtures/, its
    source commit in fixtures/README.md), strict: unknown fields are errors;
  * the pool is wired (gateway_checks.py): its selector picks the tessera pods and nothing else,
    its target port is the router's `http` container port, its endpointPickerRef names the
    picker's Service and ext_proc port, and the picker's configuration reads the metric names the
    router exports (router/gateway_metrics.cc) for pods of the engine type the pods carry;
  * multi-GPU values (2 workers x tensorParallel 2) pass --tensor-parallel to each worker
    container and request tensorParallel GPUs on each, workers x tensorParallel per pod
    (check_multi_worker.py checks the several-worker pod itself in depth).
Then each deliberate break of a rendered pool (wrong port, wrong selector, a field the CRD does
not know, a picker reading other metric names) must be refused, so the checks can fail.
"""
import copy
import pathlib
import sys

import helm_python as helm
import yaml

import gateway_checks as g
import k8s_checks as k
from chart_render import CheckRun, count_unrefused, render
from k8s_checks import expect

CHART = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tessera"

POOL = {"inferencePool": {"enabled": True}}
EXISTING_EPP = {"inferencePool": {"enabled": True,
                                  "endpointPicker": {"create": False, "name": "shared-epp"}}}
MULTI_GPU = {"inferencePool": {"enabled": True},
             "parallelism": {"workers": 2, "tensorParallel": 2, "gpu": True}}




def check_case(docs, picker_rendered):
    tessera, picker, pool = g.split(docs)
    k.validate_all(tessera + picker)
    k.check_pod_wiring(tessera)
    g.validate_pool(pool)
    g.check_pool_wiring(pool, tessera, picker if picker_rendered else None)
    if not picker_rendered:
        expect(not picker, f"picker objects rendered although create=false: {picker}")
        expect(pool["spec"]["endpointPickerRef"]["name"] == "shared-epp", "endpointPickerRef")


def check_multi_gpu(docs):
    tessera, _, _ = g.split(docs)
    workers = k.workers_of(k.one(tessera, "Deployment")["spec"]["template"]["spec"])
    expect([w["name"] for w in workers] == ["worker-0", "worker-1"], "two worker containers")
    for worker in workers:
        expect(k.flag(worker, "tensor-parallel") == "2", f"{worker['name']} --tensor-parallel")
        for kind in ("requests", "limits"):
            got = worker["resources"][kind].get("nvidia.com/gpu")
            expect(got == 2, f"{worker['name']} {kind} nvidia.com/gpu {got} (tensorParallel 2)")


def breaks(docs):
    """(label, broken documents): each must fail check_case."""
    def with_pool(change):
        broken = copy.deepcopy(docs)
        change(next(d for d in broken if d["kind"] == "InferencePool"))
        return broken

    def with_config(change):
        broken = copy.deepcopy(docs)
        config_map = next(d for d in broken if d["kind"] == "ConfigMap")
        config = yaml.safe_load(config_map["data"]["config.yaml"])
        change(config)
        config_map["data"]["config.yaml"] = yaml.safe_dump(config)
        return broken

    def port(pool):
        pool["spec"]["targetPorts"][0]["number"] = 8001  # the metrics port, not the API
    def selector(pool):
        pool["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = "tessera-epp"
    def unknown_field(pool):
        pool["spec"]["targetPort"] = 8080  # v1alpha2's field name
    def failure_mode(pool):
        pool["spec"]["endpointPickerRef"]["failureMode"] = "Ignore"
    def picker_service(pool):
        pool["spec"]["endpointPickerRef"]["name"] = "demo-tessera"
    def metric_name(config):
        extractor = next(p for p in config["plugins"] if p["type"] == "core-metrics-extractor")
        extractor["parameters"]["engineConfigs"][0]["queuedRequestsSpec"] = \
            "tessera_requests_waiting"  # per worker, labelled: the picker would read one worker
    return [("target port 8001", with_pool(port)), ("selector", with_pool(selector)),
            ("unknown field", with_pool(unknown_field)),
            ("failureMode Ignore", with_pool(failure_mode)),
            ("picker Service", with_pool(picker_service)),
            ("queued metric name", with_config(metric_name))]


# Values the chart must refuse, with what the error names.
BAD_VALUES = [
    ({"inferencePool": {"enabled": True}, "router": {"httpPort": 0}}, "router.httpPort"),
    ({"inferencePool": {"enabled": True, "endpointPicker": {"create": False}}},
     "endpointPicker.name"),
    ({"parallelism": {"workers": 9}}, "workers"),
]


def main():
    run = CheckRun()

    with helm.Chart.load(CHART) as chart:
        pool_docs = render(chart, POOL)
        run("default off: no InferencePool",
            lambda: expect(not k.by_kind(render(chart, None), "InferencePool"), "rendered"))
        run("inferencePool.enabled", lambda: check_case(pool_docs, True))
        run("existing picker", lambda: check_case(render(chart, EXISTING_EPP), False))
        multi = render(chart, MULTI_GPU)
        run("multi-GPU", lambda: (check_case(multi, True), check_multi_gpu(multi)))
        for label, broken in breaks(pool_docs):
            try:
                check_case(broken, True)
                run.failures += 1
                print(f"FAIL break '{label}' passed the checks")
            except k.CheckFailed as e:
                print(f"PASS break '{label}' refused: {e}")
        run.failures += count_unrefused(chart, BAD_VALUES)
    print(f"{run.failures} failed")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
