"""The PromQL queries of deploy/grafana/tessera.json, with Grafana's variables resolved.

Shared by check_dashboard.py (promtool lint) and dashboard_live_test.py (a real Prometheus).
"""
import json
import pathlib
import re

DASHBOARD = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "tessera.json"


def load():
    return json.loads(DASHBOARD.read_text())


def queries(dashboard):
    """(panel title, refId, expr) for every target of every panel."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["refId"], target["expr"]


def variable_queries(dashboard):
    """{name: query} for the dashboard's query variables (label_values(...))."""
    return {v["name"]: v["query"]["query"] for v in dashboard["templating"]["list"]
            if v["type"] == "query"}


def resolve(expr, model=".*", instance=".*", rate_interval="1m"):
    """expr with $model/$instance (regex values, as Grafana's multi-value "All") and the range
    variables replaced; fails on any Grafana variable left over."""
    out = (expr.replace("$__rate_interval", rate_interval).replace("$model", model)
           .replace("$instance", instance))
    left = re.findall(r"\$\w+", out)
    if left:
        raise ValueError(f"unresolved Grafana variables {left} in {expr}")
    return out


def parse_label_values(query):
    """label_values(METRIC{...}, LABEL) -> (series selector, label)."""
    match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
    if not match:
        raise ValueError(f"not a label_values() query: {query}")
    return match.group(1), match.group(2)


def grafana_escape(value):
    """A single variable value as Grafana's Prometheus datasource puts it into a regex matcher:
    regex metacharacters get a backslash, itself escaped for the PromQL string."""
    return re.sub(r"([\\^$*+?.()|\[\]{}])", r"\\\\\1", value)
