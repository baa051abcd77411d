#!/usr/bin/env python3
"""The Grafana dashboard and the Prometheus files are well formed.

  * deploy/grafana/tessera.json is exactly what build_dashboard.py writes, parses, and has the
    expected rows and panels (the step-level efficiency row holds graph reuse, host processing
    per step and GPU busy), a DS_PROMETHEUS datasource variable and model/instance variables
    that every query uses;
  * every dashboard expression (variables resolved) passes `promtool check rules` as a
    recording rule, and so do the alert rules (deploy/prometheus/alerts.yml);
  * deploy/prometheus/prometheus.yml passes `promtool check config` with its
    kubernetes_sd_configs replaced by a static target: Debian's Prometheus is built without
    Kubernetes discovery, so the rest (relabel rules, rule_files) is what promtool can check.
The alert unit tests (alerts_test.yml) are their own CTest test.
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

import yaml

import dashboard_queries as dq

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
EXPECTED_ROWS = {
    "Latency": ["Time to first token", "Inter-token latency", "End-to-end request latency"],
    "Throughput and load": ["Tokens per second", "Requests running and waiting",
                            "Finished requests per second"],
    "KV cache": ["KV blocks used / capacity", "Prefix-cache hit rate", "Preemptions per second"],
    "Steps": ["Step time by kind", "Batch size", "Tokens per step and scheduler time"],
    "Step-level efficiency": ["Graph reuse ratio", "Host processing per step", "GPU busy"],
}


class Failed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failed(message)


def check_generated():
    result = subprocess.run([sys.executable, str(ROOT / "deploy/grafana/build_dashboard.py"),
                             "--check"], capture_output=True, text=True)
    expect(result.returncode == 0, result.stderr.strip())


def check_structure(dashboard):
    rows, current = {}, None
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            rows[current] = []
            continue
        expect(current is not None, f"panel {panel['title']} before the first row")
        rows[current].append(panel["title"])
        expect(panel["datasource"]["uid"] == "${DS_PROMETHEUS}", f"{panel['title']}: datasource")
        expect(panel.get("targets"), f"{panel['title']}: no query")
    expect(rows == EXPECTED_ROWS, f"rows/panels {rows}")
    ids = [p["id"] for p in dashboard["panels"]]
    expect(len(ids) == len(set(ids)), "duplicate panel ids")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    expect(set(variables) == {"DS_PROMETHEUS", "model", "instance"}, f"variables {variables}")
    expect(variables["DS_PROMETHEUS"]["type"] == "datasource" and
           variables["DS_PROMETHEUS"]["query"] == "prometheus", "DS_PROMETHEUS variable")
    for title, ref, expr in dq.queries(dashboard):
        expect('model=~"$model"' in expr and 'instance=~"$instance"' in expr,
               f"{title}/{ref}: not filtered by $model and $instance")
    for name, query in dq.variable_queries(dashboard).items():
        dq.parse_label_values(query)


def promtool(*args):
    result = subprocess.run([shutil.which("promtool") or "promtool", *args],
                            capture_output=True, text=True)
    expect(result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}")
    return result.stdout


def check_expressions(dashboard, tmp):
    rules = [{"record": f"tessera_dashboard:panel_{ref.lower()}_{i}", "expr": dq.resolve(expr)}
             for i, (title, ref, expr) in enumerate(dq.queries(dashboard))]
    path = tmp / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = promtool("check", "rules", str(path))
    expect(f"SUCCESS: {len(rules)} rules found" in out, out)
    out = promtool("check", "rules", str(PROMETHEUS_DIR / "alerts.yml"))
    expect("SUCCESS" in out, out)
    return len(rules)


def check_scrape_config(tmp):
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        expect(job.pop("kubernetes_sd_configs") == [{"role": "endpoints"}], "SD role")
        job["static_configs"] = [{"targets": ["127.0.0.1:8001"]}]
    config["rule_files"] = [str(PROMETHEUS_DIR / f) for f in config["rule_files"]]
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    promtool("check", "config", str(path))


def main():
    dashboard = dq.load()
    steps = [("tessera.json is generated", check_generated),
             ("rows, panels, variables", lambda: check_structure(dashboard))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        steps += [("promtool check rules: dashboard + alerts",
                   lambda: check_expressions(dashboard, tmp)),
                  ("promtool check config: prometheus.yml", lambda: check_scrape_config(tmp))]
        failures = 0
        for label, step in steps:
            try:
                result = step()
                print(f"PASS {label}" + (f" ({result} expressions)" if result else ""))
            except Failed as e:
                failures += 1
                print(f"FAIL {label}: {e}")
    print(f"{len(steps) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
