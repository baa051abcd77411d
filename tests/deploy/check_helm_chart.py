#!/usr/bin/env python3
"""The Helm chart (deploy/helm/tessera) lints and renders offline, and what it renders is valid.

Runs in .venv-deploy (deploy/scripts/install_tools.sh): Helm v4 through helm-python-sdk's bundled
library, no cluster and no network. For the default values (CPU) and the values files in
deploy/helm/ci/ (GPU + KEDA + ServiceMonitor; HPA + PVC subPath):
  * `helm lint --strict` reports no warning or error;
  * every rendered manifest validates against the Kubernetes 1.37 schemas (strict), the custom
    resources structurally (k8s_checks.py), and the pod's wiring holds (loopback router -> worker,
    probes on /healthz and /readyz, ports, drain within the grace period, read-only model ...);
  * per-case expectations (the GPU reaches the worker only, the GPU values pass --device=cuda
    and the default no --device, the init container fetches the model, ...);
and bad values are refused with a message that names the problem. An API key / worker secret
named by a Secret reach the containers as env (secretKeyRef), never as args. With
tls.existingSecret the router alone mounts the Secret read-only and gets --tls-cert/--tls-key
naming files in that mount which a `kubectl create secret tls` Secret (made here from a fresh
openssl certificate) has; without it no container has TLS flags or the volume.
"""
import pathlib
import subprocess
import sys
import tempfile

import helm_python as helm
import yaml

import k8s_checks as k
from chart_render import count_unrefused, render
from k8s_checks import expect

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "tessera"
CI_VALUES = DEPLOY / "helm" / "ci"
VENV_BIN = pathlib.Path(sys.executable).parent
TLS_SECRET = "tessera-tls"
TLS_DIR = "/etc/tessera/tls"   # where the chart mounts tls.existingSecret (deploy/README.md)




def containers(deployment):
    spec = deployment["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec["containers"]}, spec


def check_default(docs):
    kinds = sorted(d["kind"] for d in docs)
    expect(kinds == ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"],
           f"default kinds {kinds}")
    deployment = k.one(docs, "Deployment")
    by_name, spec = containers(deployment)
    expect(deployment["spec"]["replicas"] == 1, "default replicas")
    expect("nvidia.com/gpu" not in str(spec), "the CPU default asks for a GPU")
    expect("runtimeClassName" not in spec, "runtimeClassName set by default")
    volumes = {v["name"]: v for v in spec["volumes"]}
    expect(volumes["model"]["persistentVolumeClaim"] == {"claimName": "tessera-models",
                                                         "readOnly": True}, "model PVC")
    expect(spec["terminationGracePeriodSeconds"] == 50, "default grace = 5 + 30 + 15")
    expect(by_name["worker"]["startupProbe"]["failureThreshold"] *
           by_name["worker"]["startupProbe"]["periodSeconds"] >= 300,
           "worker startup probe allows less than 5 minutes of model load")
    expect(k.flag(by_name["worker"], "threads") == "4", "worker --threads")
    expect(k.flag(by_name["router"], "http-port") == "8080", "router --http-port")
    service = {p["name"]: p for p in k.one(docs, "Service")["spec"]["ports"]}
    expect(service["http"]["port"] == 8080 and service["http"]["targetPort"] == "http",
           f"Service port http {service.get('http')}")
    expect(all("env" not in c for c in by_name.values()), "env set although no Secret is named")
    expect(all(k.flag(c, "device") is None for c in by_name.values()),
           "--device passed by default (the worker's own default, auto, should apply)")
    check_no_tls(spec)


def check_no_tls(spec):
    """No container gets TLS flags or the TLS volume."""
    for c in spec["containers"]:
        expect(not [a for a in c.get("args", []) if a.startswith("--tls")],
               f"{c['name']}: TLS flags without tls.existingSecret")
        expect("tls" not in {m["name"] for m in c["volumeMounts"]}, f"{c['name']} mounts tls")
    expect("tls" not in {v["name"] for v in spec["volumes"]}, "tls volume without a Secret")


def check_gpu(docs):
    kinds = sorted(d["kind"] for d in docs)
    expect(kinds == ["Deployment", "PodDisruptionBudget", "ScaledObject", "Service",
                     "ServiceAccount", "ServiceMonitor"], f"GPU kinds {kinds}")
    deployment = k.one(docs, "Deployment")
    by_name, spec = containers(deployment)
    expect("replicas" not in deployment["spec"], "replicas set although KEDA scales")
    limits = by_name["worker"]["resources"]["limits"]
    expect(limits.get("nvidia.com/gpu") == 1, f"worker GPU limit {limits}")
    expect(spec["runtimeClassName"] == "nvidia", "runtimeClassName")
    expect(spec["tolerations"][0]["key"] == "nvidia.com/gpu", "GPU toleration")
    expect(spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}, "GPU node selector")
    expect(by_name["worker"]["image"] == "tessera:cuda", "worker image")
    expect(by_name["router"]["image"] == "tessera:cpu", "router image")
    expect("--kv-cache-mb=16384" in by_name["worker"]["args"], "worker extra args")
    expect(k.flags(by_name["worker"], "device") == ["cuda"],
           f"worker --device {k.flags(by_name['worker'], 'device')}, want exactly cuda")
    expect(k.flag(by_name["router"], "device") is None, "router given --device")
    init = spec["initContainers"]
    expect([c["name"] for c in init] == ["fetch-model"], "init container")
    env = {e["name"]: e["value"] for e in init[0]["env"]}
    expect(env["MODEL_PATH"] == "/models/Qwen3-8B-Q8_0.gguf", "init container target path")
    expect(env["MODEL_URL"].endswith("/Qwen3-8B-Q8_0.gguf"), "init container URL")
    volumes = {v["name"]: v for v in spec["volumes"]}
    expect("emptyDir" in volumes["model"], "downloaded model volume")
    expect(volumes["shm"]["emptyDir"]["sizeLimit"] == "8Gi", "shm size")
    expect(deployment["spec"]["template"]["metadata"]["labels"]["tessera/model"] ==
           "Qwen3-8B-Q8_0", "tessera/model label")


def check_hpa(docs):
    deployment = k.one(docs, "Deployment")
    by_name, spec = containers(deployment)
    hpa = k.one(docs, "HorizontalPodAutoscaler")
    expect((hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6), "HPA range")
    expect(spec["terminationGracePeriodSeconds"] == 60, "explicit grace")
    mount = [m for m in by_name["worker"]["volumeMounts"] if m["name"] == "model"][0]
    expect(mount.get("subPath") == "smollm2", "PVC subPath")
    expect(by_name["worker"]["args"][-2:] == ["--max-num-seqs=64", "--activations=int8"],
           "worker extra args go last")


def check_secrets(docs):
    by_name, _ = containers(k.one(docs, "Deployment"))
    router_env = k.env_of(by_name["router"])
    expect(router_env.get("TESSERA_API_KEY", {}).get("valueFrom") ==
           {"secretKeyRef": {"name": "tessera-api-key", "key": "api-key"}},
           f"router TESSERA_API_KEY {router_env.get('TESSERA_API_KEY')}")
    want = {"secretKeyRef": {"name": "tessera-link", "key": "token"}}
    for name, c in by_name.items():
        got = k.env_of(c).get("TESSERA_WORKER_SECRET", {}).get("valueFrom")
        expect(got == want, f"{name} TESSERA_WORKER_SECRET {got}")
    expect(k.flag(by_name["router"], "http-port") == "0", "router --http-port=0 (off)")
    expect("http" not in {p["name"] for p in k.one(docs, "Service")["spec"]["ports"]},
           "Service port http although httpPort is 0")


def kubectl_tls_secret():
    """The Secret deploy/README.md's `kubectl create secret tls` makes (client-side dry run, on
    a throwaway self-signed certificate)."""
    with tempfile.TemporaryDirectory() as tmp:
        crt, key = f"{tmp}/tls.crt", f"{tmp}/tls.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=tessera", "-keyout", key, "-out", crt],
                       check=True, capture_output=True)
        made = subprocess.run([str(VENV_BIN / "kubectl"), "create", "secret", "tls", TLS_SECRET,
                               f"--cert={crt}", f"--key={key}", "--dry-run=client", "-o", "yaml"],
                              capture_output=True, text=True)
    expect(made.returncode == 0, f"kubectl create secret tls: {made.stderr.strip()}")
    return yaml.safe_load(made.stdout)


def check_tls(docs):
    by_name, spec = containers(k.one(docs, "Deployment"))
    router = by_name["router"]
    cert, key = k.flags(router, "tls-cert"), k.flags(router, "tls-key")
    expect(cert == [f"{TLS_DIR}/tls.crt"] and key == [f"{TLS_DIR}/tls.key"],
           f"router --tls-cert {cert} --tls-key {key}")
    mounts = [m for m in router["volumeMounts"] if m["name"] == "tls"]
    expect(mounts == [{"name": "tls", "mountPath": TLS_DIR, "readOnly": True}],
           f"router tls mount {mounts}")
    volumes = {v["name"]: v for v in spec["volumes"]}
    expect(volumes.get("tls", {}).get("secret") == {"secretName": TLS_SECRET,
                                                     "defaultMode": 0o440},
           f"tls volume {volumes.get('tls')}")
    expect(spec["securityContext"].get("fsGroup"), "0440 files without an fsGroup to read them")
    for name, c in by_name.items():
        if name != "router":
            expect(not [a for a in c["args"] if a.startswith("--tls")], f"{name}: TLS flags")
            expect("tls" not in {m["name"] for m in c["volumeMounts"]}, f"{name} mounts tls")
    # The flags name files that a `kubectl create secret tls` Secret holds (no items: remap).
    secret = kubectl_tls_secret()
    k.validate_all([secret])
    files = {pathlib.PurePosixPath(p).name for p in cert + key}
    expect(secret["type"] == "kubernetes.io/tls" and files <= set(secret["data"]),
           f"the router reads {sorted(files)}, the Secret has {sorted(secret['data'])}")


def check_api_key_only(docs):
    by_name, _ = containers(k.one(docs, "Deployment"))
    expect(list(k.env_of(by_name["router"])) == ["TESSERA_API_KEY"],
           f"router env {list(k.env_of(by_name['router']))}")
    expect("env" not in by_name["worker"], "worker env without a worker secret")


SECRET_VALUES = {"apiKey": {"existingSecret": "tessera-api-key"},
                 "workerSecret": {"existingSecret": "tessera-link", "key": "token"},
                 "router": {"httpPort": 0}}

CASES = [("default (CPU)", None, check_default),
         ("gpu-values.yaml", CI_VALUES / "gpu-values.yaml", check_gpu),
         ("hpa-values.yaml", CI_VALUES / "hpa-values.yaml", check_hpa),
         ("API key + worker secret, no HTTP port", SECRET_VALUES, check_secrets),
         ("API key only", {"apiKey": {"existingSecret": "tessera-api-key"}}, check_api_key_only),
         ("TLS from a kubernetes.io/tls Secret", {"tls": {"existingSecret": TLS_SECRET}},
          check_tls)]

# Values the chart must refuse, and a fragment of the error each must carry.
BAD_VALUES = [
    ({"bogus": 1}, "bogus"),
    ({"worker": {"threads": -1}}, "threads"),
    ({"router": {"image": {"repository": "tessera", "tag": ""}}}, "tag"),
    ({"model": {"source": "s3"}}, "source"),
    ({"apiKey": {"existingSecret": "tessera-api-key", "key": ""}}, "/apiKey/key"),
    ({"router": {"httpPort": -1}}, "/router/httpPort"),
    ({"terminationGracePeriodSeconds": 20}, "terminationGracePeriodSeconds=20"),
    ({"model": {"pvc": {"claimName": ""}}}, "model.pvc.claimName"),
    ({"model": {"source": "download"}}, "model.download.url"),
    ({"worker": {"metricsPort": 8001}}, "must differ"),
    ({"router": {"httpPort": 8002}}, "must differ"),
    ({"worker": {"device": "gpu"}}, "/worker/device"),
    ({"parallelism": {"tensorParallel": 2}, "worker": {"device": "auto"}},
     "needs worker.device cuda"),
    ({"parallelism": {"gpu": True}, "worker": {"device": "cpu"}}, "worker.device=cpu"),
    ({"tls": {"secretName": TLS_SECRET}}, "/tls"),
    ({"tls": {"existingSecret": TLS_SECRET}, "podSecurityContext": {"fsGroup": None}},
     "podSecurityContext.fsGroup"),
    ({"tls": {"existingSecret": TLS_SECRET}, "inferencePool": {"enabled": True}},
     "inferencePool.enabled"),
]


def lint(values):
    report = helm.lint(CHART, values, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    expect(not problems, f"helm lint --strict: {problems}")


def main():
    failures = 0
    with helm.Chart.load(CHART) as chart:
        for label, values_file, check in CASES:
            values = values_file
            if isinstance(values_file, pathlib.Path):
                values = yaml.safe_load(values_file.read_text())
            try:
                lint(values)
                docs = render(chart, values)
                k.validate_all(docs)
                k.check_pod_wiring(docs)
                check(docs)
                print(f"PASS {label}: lint, {len(docs)} manifests valid and wired")
            except k.CheckFailed as e:
                failures += 1
                print(f"FAIL {label}: {e}")
        failures += count_unrefused(chart, BAD_VALUES)
    print(f"{len(CASES) + len(BAD_VALUES) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
