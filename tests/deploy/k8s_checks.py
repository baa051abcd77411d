"""Checks shared by the chart and plain-manifest tests (tests/deploy/).

validate_all: every document against the Kubernetes 1.37 JSON schemas of kubernetes-validate,
strict (unknown fields are errors). The two custom resources the chart can emit have no schema
there; they are checked structurally instead, against the objects they point at
(CUSTOM_RESOURCES). check_pod_wiring: the cross-references a schema cannot see (probe and Service
ports exist, selectors match the pod, the drain fits in the grace period, ...).
"""
import kubernetes_validate

KUBERNETES_VERSION = "1.37"
# Custom resources without a schema in kubernetes-validate: (apiVersion, kind) -> checker.
CUSTOM_RESOURCES = {("monitoring.coreos.com/v1", "ServiceMonitor"),
                    ("keda.sh/v1alpha1", "ScaledObject")}


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def name_of(doc):
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def validate_all(docs):
    """Schema-validates every document; returns the custom resources left for structural checks."""
    custom = []
    for doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in CUSTOM_RESOURCES:
            custom.append(doc)
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise CheckFailed(f"{name_of(doc)}: {path}: {e.message}") from None
        except kubernetes_validate.SchemaNotFoundError:
            raise CheckFailed(f"{name_of(doc)}: no Kubernetes {KUBERNETES_VERSION} schema for "
                              f"{key}") from None
    return custom


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind):
    found = by_kind(docs, kind)
    expect(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0]


def container_ports(pod_spec):
    return {p["name"]: (c["name"], p["containerPort"])
            for c in pod_spec["containers"] for p in c.get("ports", [])}


def check_probes(container, ports):
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        expect(probe in container, f"container {container['name']}: no {probe}")
        http = container[probe].get("httpGet")
        expect(http is not None, f"{container['name']}.{probe}: not an httpGet probe")
        expect(http["port"] in ports, f"{container['name']}.{probe}: port {http['port']} is not "
               "a named container port")
        want = "/readyz" if probe == "readinessProbe" else "/healthz"
        expect(http["path"] == want, f"{container['name']}.{probe}: path {http['path']}, "
               f"want {want}")


def flags(container, name):
    """Every value of --name=VALUE in the container's args, in order."""
    return [a.split("=", 1)[1] for a in container.get("args", []) if a.startswith(f"--{name}=")]


def flag(container, name):
    """The value of --name=VALUE in the container's args (None when absent)."""
    found = flags(container, name)
    return found[0] if found else None


def worker_names(count):
    """The worker containers' names: "worker" alone, or worker-0 .. worker-(count-1)."""
    return ["worker"] if count == 1 else [f"worker-{i}" for i in range(count)]


def worker_port_names(count):
    """Their metrics ports' names (at most 15 characters, as Kubernetes requires)."""
    return ["worker-metrics"] if count == 1 else [f"worker{i}-metrics" for i in range(count)]


def workers_of(pod_spec):
    """The worker containers, in order (the router's --worker flags follow the same order)."""
    names = [c["name"] for c in pod_spec["containers"] if c["name"] != "router"]
    expect(names == worker_names(len(names)), f"worker containers {names}")
    by_name = {c["name"]: c for c in pod_spec["containers"]}
    return [by_name[n] for n in names]


def check_pod_wiring(docs):
    """Cross-reference checks over one release's documents; returns the Deployment."""
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    labels = pod["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    expect(selector.items() <= labels.items(), "Deployment selector does not match its pods")
    containers = {c["name"]: c for c in spec["containers"]}
    expect(spec["containers"][0]["name"] == "router", f"containers: {sorted(containers)}")
    workers = workers_of(spec)
    expect(1 <= len(workers) <= 8, f"{len(workers)} worker containers")
    ports = container_ports(spec)
    expect(len(ports) == sum(len(c.get("ports", [])) for c in spec["containers"]),
           "two container ports share a name")
    expect(set(ports) == expected_ports(containers["router"], len(workers)),
           f"ports: {sorted(ports)}")
    check_containers(spec, containers, ports)
    check_loopback(containers["router"], workers, ports)
    check_drain(spec, containers["router"], workers)
    check_secrets(containers["router"], workers)
    check_service(docs, labels, ports)
    check_custom_resources(docs, deployment, len(workers))
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        expect(pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(),
               "PodDisruptionBudget selects no pod of the Deployment")
    for hpa in by_kind(docs, "HorizontalPodAutoscaler"):
        expect(hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"],
               "HPA targets another Deployment")
        metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
        expect(metric == "tessera_requests_waiting", f"HPA scales on {metric}")
    return deployment


def expected_ports(router, workers):
    """The named ports: the HTTP API's only while the router's --http-port is not 0, and one
    metrics port per worker."""
    http = flag(router, "http-port")
    expect(http is not None, "router without --http-port (it would default to 8080)")
    return ({"grpc", "metrics"} | set(worker_port_names(workers)) |
            ({"http"} if http != "0" else set()))


def check_containers(spec, containers, ports):
    """Probes, security context, the read-only model, /dev/shm, the GPU on the worker only."""
    expect(spec["securityContext"].get("runAsNonRoot") is True, "pod may run as root")
    for c in containers.values():
        check_probes(c, {n for n, (owner, _) in ports.items() if owner == c["name"]})
        ctx = c["securityContext"]
        expect(ctx.get("readOnlyRootFilesystem") is True, f"{c['name']}: writable root fs")
        expect(ctx.get("allowPrivilegeEscalation") is False, f"{c['name']}: privilege escalation")
        model_mounts = [m for m in c["volumeMounts"] if m["name"] == "model"]
        expect(model_mounts and model_mounts[0].get("readOnly") is True,
               f"{c['name']}: the model is not mounted read-only")
    volumes = {v["name"]: v for v in spec["volumes"]}
    expect(volumes["shm"]["emptyDir"].get("medium") == "Memory", "/dev/shm is not in memory")
    for worker in workers_of(spec):
        expect("/dev/shm" in {m["mountPath"] for m in worker["volumeMounts"]},
               f"{worker['name']} does not mount /dev/shm")
    expect("nvidia.com/gpu" not in str(containers["router"].get("resources")),
           "the router asks for a GPU")


def check_loopback(router, workers, ports):
    """The router dials, in order, the port each worker listens on, on 127.0.0.1 (one --worker
    per worker container, none twice); flags match the ports."""
    listens = [flag(w, "listen") for w in workers]
    for w, listen in zip(workers, listens):
        expect(listen is not None and listen.startswith("127.0.0.1:"),
               f"{w['name']} --listen {listen} is not loopback")
    expect(len(set(listens)) == len(listens), f"workers share a --listen address: {listens}")
    expect(flags(router, "worker") == listens,
           f"router --worker {flags(router, 'worker')} != the workers' --listen {listens}")
    expect(flag(router, "listen") == f"0.0.0.0:{ports['grpc'][1]}", "router --listen vs port grpc")
    expect(flag(router, "metrics-port") == str(ports["metrics"][1]), "router --metrics-port")
    if "http" in ports:
        expect(flag(router, "http-port") == str(ports["http"][1]), "router --http-port vs port http")
    for worker, name in zip(workers, worker_port_names(len(workers))):
        expect(ports[name][0] == worker["name"], f"port {name} is {ports[name][0]}'s")
        expect(flag(worker, "metrics-port") == str(ports[name][1]),
               f"{worker['name']} --metrics-port {flag(worker, 'metrics-port')} vs port {name}")
        expect(flag(router, "model") == flag(worker, "model"),
               f"router and {worker['name']} load different models")


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def check_secrets(router, workers):
    """Secrets come from Secrets through the environment: never in args, never as plain values;
    the router and its workers read the same worker secret (or none has one)."""
    for c in (router, *workers):
        for arg in c.get("args", []):
            expect(not arg.startswith(("--api-key", "--worker-secret", "--secret")),
                   f"{c['name']}: a secret on the command line ({arg.split('=')[0]})")
        for name, e in env_of(c).items():
            if name in ("TESSERA_API_KEY", "TESSERA_WORKER_SECRET"):
                expect("secretKeyRef" in e.get("valueFrom", {}),
                       f"{c['name']}: {name} is not read from a Secret")
    router_secret = env_of(router).get("TESSERA_WORKER_SECRET")
    for worker in workers:
        expect("TESSERA_API_KEY" not in env_of(worker), f"{worker['name']} gets the API key")
        worker_secret = env_of(worker).get("TESSERA_WORKER_SECRET")
        expect(router_secret == worker_secret, f"router and {worker['name']} read different "
               f"worker secrets: {router_secret} vs {worker_secret}")


def check_drain(spec, router, workers):
    """The grace period covers the router's preStop sleep plus its drain timeout."""
    drain = float(flag(router, "drain-timeout-s"))
    sleep = 0
    if "lifecycle" in router:
        sleep = int(router["lifecycle"]["preStop"]["exec"]["command"][1])
    grace = spec["terminationGracePeriodSeconds"]
    expect(grace >= sleep + drain, f"terminationGracePeriodSeconds {grace} < preStop {sleep} + "
           f"drain {drain}")
    for worker in workers:
        expect("preStop" in worker.get("lifecycle", {}),
               f"{worker['name']} has no preStop (drain would break)")


def check_service(docs, pod_labels, ports):
    service = one(docs, "Service")
    expect(service["spec"]["selector"].items() <= pod_labels.items(),
           "Service selector does not match the pods")
    names = {p["name"]: p for p in service["spec"]["ports"]}
    expect(set(names) == set(ports), f"Service ports {sorted(names)}, pod ports {sorted(ports)}")
    for name, port in names.items():
        expect(port["targetPort"] in ports, f"Service port {name}: unknown targetPort")


def check_custom_resources(docs, deployment, workers=1):
    service = one(docs, "Service")
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for monitor in by_kind(docs, "ServiceMonitor"):
        spec = monitor["spec"]
        expect(spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items(),
               "ServiceMonitor selects no tessera Service")
        jobs, scraped = set(), {}
        for endpoint in spec["endpoints"]:
            expect(endpoint["port"] in service_ports, f"ServiceMonitor port {endpoint['port']}")
            expect(endpoint["path"] == "/metrics", "ServiceMonitor path")
            relabel = {r["targetLabel"]: r for r in endpoint["relabelings"]}
            expect({"job", "instance", "model"} <= relabel.keys(), "ServiceMonitor relabelings")
            jobs.add(relabel["job"]["replacement"])
            scraped[endpoint["port"]] = (relabel["job"]["replacement"],
                                         relabel.get("worker", {}).get("replacement"))
        expect(jobs == {"tessera-router", "tessera-worker"}, f"ServiceMonitor jobs {jobs}")
        # Every worker's port, as job tessera-worker; with several, worker="i" tells them apart
        # (one pod = one instance: without it their series would collide).
        want = {name: ("tessera-worker", str(i) if workers > 1 else None)
                for i, name in enumerate(worker_port_names(workers))}
        got = {port: scraped.get(port) for port in want}
        expect(got == want, f"ServiceMonitor scrapes the workers as {got}, want {want}")
    for scaled in by_kind(docs, "ScaledObject"):
        spec = scaled["spec"]
        expect(spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"],
               "ScaledObject targets another Deployment")
        expect(spec["minReplicaCount"] <= spec["maxReplicaCount"], "ScaledObject replica range")
        trigger = spec["triggers"][0]
        expect(trigger["type"] == "prometheus", "ScaledObject trigger type")
        expect("tessera_requests_waiting" in trigger["metadata"]["query"], "ScaledObject query")
        float(trigger["metadata"]["threshold"])  # KEDA wants a number in a string
