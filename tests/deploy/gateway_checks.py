"""Checks of the chart's inference-gateway objects (tests/deploy/check_inference_pool.py).

validate_pool: the InferencePool against the OpenAPI v3 schema of the upstream CRD
(fixtures/inference.networking.k8s.io_inferencepools.yaml), strict: every object schema that
lists properties gets additionalProperties: false unless it says otherwise, as an API server
with field validation Strict refuses unknown fields. The CRD's CEL rules (x-kubernetes-
validations) are not evaluated; check_pool_wiring covers what they and the schema cannot see.
"""
import pathlib
import re

import jsonschema
import yaml

from k8s_checks import CheckFailed, by_kind, expect, one

HERE = pathlib.Path(__file__).resolve().parent
CRD = HERE / "fixtures" / "inference.networking.k8s.io_inferencepools.yaml"
GATEWAY_METRICS = HERE.parents[1] / "router" / "gateway_metrics.cc"
POOL_API = "inference.networking.k8s.io/v1"
PICKER_COMPONENT = "endpoint-picker"


def split(docs):
    """(tessera objects, endpoint-picker objects, the one InferencePool)."""
    pools = [d for d in docs if d["kind"] == "InferencePool"]
    expect(len(pools) == 1, f"expected one InferencePool, found {len(pools)}")
    def component(d):
        return d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
    picker = [d for d in docs if d["kind"] != "InferencePool" and component(d) == PICKER_COMPONENT]
    tessera = [d for d in docs if d["kind"] != "InferencePool" and d not in picker]
    return tessera, picker, pools[0]


def _strict(schema):
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for value in schema.values():
            _strict(value)
    elif isinstance(schema, list):
        for value in schema:
            _strict(value)
    return schema


def pool_schema():
    crd = yaml.safe_load(CRD.read_text())
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    group, version = POOL_API.split("/")
    expect(crd["spec"]["group"] == group and version in versions,
           f"the CRD fixture does not serve {POOL_API}")
    schema = _strict(versions[version]["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: Kubernetes' own schema
    return schema


def validate_pool(pool):
    expect(pool["apiVersion"] == POOL_API, f"InferencePool apiVersion {pool['apiVersion']}")
    errors = sorted(jsonschema.Draft7Validator(pool_schema()).iter_errors(pool),
                    key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise CheckFailed(f"InferencePool: {'.'.join(map(str, e.path))}: {e.message}")


def exported_metrics():
    """The gauge names router/gateway_metrics.cc registers."""
    return set(re.findall(r'"(tessera_[a-z_]+)"', GATEWAY_METRICS.read_text()))


def _pods(tessera):
    template = one(tessera, "Deployment")["spec"]["template"]
    return template["metadata"]["labels"], template["spec"]


def check_pool_wiring(pool, tessera, picker):
    """The pool selects tessera's pods on the router's HTTP port and names the picker (when the
    chart rendered one, `picker` holds its objects)."""
    labels, spec = _pods(tessera)
    selector = pool["spec"]["selector"]["matchLabels"]
    expect(selector.items() <= labels.items(), f"InferencePool selector {selector} misses the pods")
    router = next(c for c in spec["containers"] if c["name"] == "router")
    http = [p["containerPort"] for p in router.get("ports", []) if p["name"] == "http"]
    ports = [p["number"] for p in pool["spec"]["targetPorts"]]
    expect(ports == http, f"InferencePool targetPorts {ports}, router http port {http}")
    expect(labels.get("inference.networking.k8s.io/engine-type") == "tessera",
           "pods lack inference.networking.k8s.io/engine-type: tessera")
    if picker is not None:
        check_picker(pool, picker, selector, "tessera")


def check_picker(pool, picker, pool_selector, engine):
    ref = pool["spec"]["endpointPickerRef"]
    service = one(picker, "Service")
    expect(ref["name"] == service["metadata"]["name"], f"endpointPickerRef {ref['name']}")
    by_port = {p["port"]: p for p in service["spec"]["ports"]}
    expect(ref["port"]["number"] in by_port, f"endpointPickerRef port {ref['port']}")
    deployment = one(picker, "Deployment")
    template = deployment["spec"]["template"]
    expect(service["spec"]["selector"].items() <= template["metadata"]["labels"].items(),
           "the picker's Service selects no picker pod")
    expect(not pool_selector.items() <= template["metadata"]["labels"].items(),
           "the InferencePool selects the picker's own pods")
    epp = template["spec"]["containers"][0]
    named = {p["name"]: p["containerPort"] for p in epp["ports"]}
    target = by_port[ref["port"]["number"]]["targetPort"]
    grpc_port = next(a for a in epp["args"] if a.startswith("--grpc-port="))
    expect(named.get(target) == int(grpc_port.split("=")[1]),
           f"the picker's Service port {target} is not its --grpc-port")
    expect(f"--pool-name={pool['metadata']['name']}" in epp["args"], "--pool-name")
    check_picker_config(one(picker, "ConfigMap"), engine)


def check_picker_config(config_map, engine):
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    plugins = {p["type"]: p for p in config["plugins"]}
    params = plugins["core-metrics-extractor"]["parameters"]
    engines = {e["name"]: e for e in params["engineConfigs"]}
    expect(params.get("defaultEngine") == engine and engine in engines,
           f"picker engine config for {engine!r}: {params}")
    specs = engines[engine]
    read = {specs["queuedRequestsSpec"], specs["runningRequestsSpec"], specs["kvUsageSpec"]}
    expect(read == exported_metrics(),
           f"the picker reads {sorted(read)}, the router exports {sorted(exported_metrics())}")
    sources = config["data"]["sources"]
    expect(any(s["pluginRef"] == "metrics-data-source" and
               {"pluginRef": "core-metrics-extractor"} in s["extractors"] for s in sources),
           "the metrics source does not feed the extractor")
    expect(plugins["metrics-data-source"]["parameters"]["path"] == "/metrics", "scrape path")
    scorers = {p["pluginRef"] for prof in config["schedulingProfiles"] for p in prof["plugins"]}
    expect(scorers <= plugins.keys(), f"profiles name plugins not declared: {scorers}")
    expect(by_kind([config_map], "ConfigMap"), "not a ConfigMap")
