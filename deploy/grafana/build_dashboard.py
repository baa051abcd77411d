#!/usr/bin/env python3
"""Writes deploy/grafana/tessera.json, the tessera Grafana dashboard, from the panel table below.

Keeping the panels as data (title, unit, PromQL) makes every query reviewable in one place;
tests/deploy/check_dashboard.py checks that tessera.json is exactly what this script writes,
lints every expression with promtool, and tests/deploy/dashboard_live_test.py runs each one
against a real Prometheus scraping a live tessera.

  python3 deploy/grafana/build_dashboard.py          # rewrite tessera.json
  python3 deploy/grafana/build_dashboard.py --check  # exit 1 if tessera.json differs
"""
import argparse
import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent / "tessera.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
S = '{model=~"$model", instance=~"$instance"}'          # every query's selector
SD = '{model=~"$model", instance=~"$instance", kind="decode"}'
W = "[$__rate_interval]"


def rate(metric, by="", selector=S):
    group = f" by ({by})" if by else ""
    return f"sum{group} (rate({metric}{selector}{W}))"


def quantile(q, histogram, by=""):
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, {rate(histogram + '_bucket', labels)})"


def mean(histogram, by=""):
    return f"{rate(histogram + '_sum', by)} / {rate(histogram + '_count', by)}"


def quantiles(histogram, by="", qs=(0.5, 0.9, 0.99)):
    prefix = f"{{{{{by}}}}} " if by else ""
    return [(quantile(q, histogram, by), f"{prefix}p{int(q * 100)}") for q in qs]


# (row title, [(panel title, unit, description, [(expr, legend), ...]), ...])
ROWS = [
    ("Latency", [
        ("Time to first token", "s", "Arrival to first generated token (router).",
         quantiles("tessera_time_to_first_token_seconds")),
        ("Inter-token latency", "s", "Time between consecutive tokens of a request (router).",
         quantiles("tessera_inter_token_latency_seconds")),
        ("End-to-end request latency", "s", "Arrival to the end of requests that ran.",
         quantiles("tessera_e2e_request_latency_seconds")),
    ]),
    ("Throughput and load", [
        ("Tokens per second", "tokens/s", "Prompt tokens admitted and tokens generated.",
         [(rate("tessera_prompt_tokens_total"), "prompt"),
          (rate("tessera_generation_tokens_total"), "generation")]),
        ("Requests running and waiting", "short",
         "Requests holding a worker slot, and requests queued for admission.",
         [(f"sum (tessera_requests_running{S})", "running"),
          (f"sum (tessera_requests_waiting{S})", "waiting")]),
        ("Finished requests per second", "reqps", "Requests that ended, by status.",
         [(rate("tessera_requests_total", "status"), "{{status}}")]),
    ]),
    ("KV cache", [
        ("KV blocks used / capacity", "short", "Logical KV blocks in use and usable.",
         [(f"sum (tessera_kv_blocks_used{S})", "used"),
          (f"sum (tessera_kv_blocks_capacity{S})", "capacity")]),
        ("Prefix-cache hit rate", "percentunit",
         "Looked-up prompt tokens served from cached KV blocks.",
         [(f"{rate('tessera_prefix_cache_hits_total')} / "
           f"{rate('tessera_prefix_cache_queries_total')}", "hit rate")]),
        ("Preemptions per second", "ops",
         "Running requests preempted for KV space (recomputed later).",
         [(rate("tessera_preemptions_total"), "preemptions")]),
    ]),
    ("Steps", [
        ("Step time by kind", "s", "Worker: plan received to result ready, by batch kind.",
         quantiles("tessera_step_seconds", by="kind", qs=(0.5, 0.99))),
        ("Batch size", "short", "Sequences per forward step (worker).",
         [(mean("tessera_batch_size"), "mean")] + quantiles("tessera_batch_size", qs=(0.99,))),
        ("Tokens per step and scheduler time", "short",
         "Tokens scheduled per step (router); the scheduler's wall time per step is on the "
         "right axis.",
         [(mean("tessera_step_tokens"), "tokens/step mean"),
          (mean("tessera_scheduler_seconds"), "scheduler s/step")]),
    ]),
    ("Step-level efficiency", [
        ("Graph reuse ratio", "percentunit",
         "CUDA-graph replays / decode steps. 0 on the CPU backend, which captures no graphs; "
         "misses by reason on the second query.",
         [(f"sum by (instance) (rate(tessera_graph_replays_total{S}{W})) / "
           f"sum by (instance) (rate(tessera_step_seconds_count{SD}{W}))", "{{instance}}"),
          (rate("tessera_graph_misses_total", "reason"), "misses/s {{reason}}")]),
        ("Host processing per step", "s",
         "Worker: plan received to last kernel launch, per step (mean and p99).",
         [(mean("tessera_hostproc_seconds", "instance"), "{{instance}} mean"),
          (quantile(0.99, "tessera_hostproc_seconds", "instance"), "{{instance}} p99")]),
        ("GPU busy", "percentunit",
         "Device time over wall time, ~1 s windows. 0 on the CPU backend.",
         [(f"avg by (instance) (tessera_gpu_busy_ratio{S})", "{{instance}}")]),
    ]),
]


def panel(panel_id, title, unit, description, targets, x, y):
    overrides = []
    if title.startswith("Tokens per step"):
        overrides.append({
            "matcher": {"id": "byName", "options": "scheduler s/step"},
            "properties": [{"id": "unit", "value": "s"},
                           {"id": "custom.axisPlacement", "value": "right"}]})
    return {
        "id": panel_id, "type": "timeseries", "title": title, "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10}},
                        "overrides": overrides},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                    "tooltip": {"mode": "multi"}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": legend, "range": True}
                    for i, (expr, legend) in enumerate(targets)],
    }


def variable(name, label, query):
    return {
        "name": name, "label": label, "type": "query", "datasource": DATASOURCE,
        "query": {"query": query, "refId": name}, "definition": query,
        "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2, "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def dashboard():
    panels, y, next_id = [], 0, 1
    for row_title, row_panels in ROWS:
        panels.append({"id": next_id, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id, y = next_id + 1, y + 1
        for i, (title, unit, description, targets) in enumerate(row_panels):
            panels.append(panel(next_id, title, unit, description, targets, 8 * i, y))
            next_id += 1
        y += 8
    return {
        "uid": "tessera-overview", "title": "tessera", "tags": ["tessera", "llm"],
        "description": "tessera router and worker: latency, throughput, KV cache, steps, and "
                       "the step-level efficiency row (graph reuse, host processing, GPU busy).",
        "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
        "refresh": "30s", "time": {"from": "now-1h", "to": "now"}, "timezone": "",
        "templating": {"list": [
            {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}, "hide": 0, "refresh": 1},
            variable("model", "Model", "label_values(tessera_requests_running, model)"),
            variable("instance", "Instance",
                     'label_values(tessera_requests_running{model=~"$model"}, instance)'),
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def render():
    return json.dumps(dashboard(), indent=2) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run deploy/grafana/build_dashboard.py", file=sys.stderr)
            return 1
        print(f"{OUT.name} matches build_dashboard.py")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
