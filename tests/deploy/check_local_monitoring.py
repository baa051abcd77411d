#!/usr/bin/env python3
"""The local monitoring recipe (deploy/local-monitoring/) is consistent and valid.

Runs in .venv-deploy, offline:
  * prometheus.yml passes `promtool check config` (which also checks the alert rules it loads);
    its one job is the router's (which deploy/prometheus/alerts.yml names, watching the workers
    behind it through tessera_worker_metrics_up), the target carries an `instance` and a `model`
    label, and its port is the router's metrics port that the recipe's `tessera serve` command
    passes (README.md), which opens no worker port (scraping both would count twice);
  * the Grafana datasource file parses and holds one datasource: the default, of the type the
    dashboard's DS_PROMETHEUS variable selects, at the address the recipe's Prometheus command
    listens on, with timeInterval equal to the scrape interval; every datasource reference in
    deploy/grafana/tessera.json goes through that variable or names the provisioned UID;
  * the dashboard provider file parses, loads files (type file), and its path, with
    $TESSERA_REPO set to this repository, is a directory whose only .json file is the dashboard;
    the recipe's Grafana command sets TESSERA_REPO to the repository and GF_PATHS_PROVISIONING
    to this folder's grafana/provisioning.
"""
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import yaml

from chart_render import CheckRun
from k8s_checks import expect

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOCAL = ROOT / "deploy" / "local-monitoring"
PROMETHEUS = LOCAL / "prometheus.yml"
PROVISIONING = LOCAL / "grafana" / "provisioning"
DATASOURCES = PROVISIONING / "datasources" / "prometheus.yaml"
PROVIDERS = PROVISIONING / "dashboards" / "tessera.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "tessera.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DS_VARIABLE = "${DS_PROMETHEUS}"


def readme_commands():
    """The shell commands of README.md's sh blocks, continuation lines joined, as word lists."""
    text = (LOCAL / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(shlex.split(line, comments=True))
    return commands


def command_with(word):
    found = [c for c in readme_commands() if word in c]
    expect(len(found) == 1, f"README.md: {len(found)} commands run {word}, want one")
    return found[0]


def option(words, name):
    """The value of `name VALUE` or `name=VALUE` among `words` (None when absent)."""
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def check_promtool():
    promtool = shutil.which("promtool")
    expect(promtool is not None, "promtool not found (Debian package prometheus)")
    result = subprocess.run([promtool, "check", "config", str(PROMETHEUS)],
                            capture_output=True, text=True)
    out = result.stdout + result.stderr
    expect(result.returncode == 0, f"promtool check config:\n{out}")
    expect("SUCCESS: 1 rule files found" in out and "alerts.yml" in out,
           f"prometheus.yml does not load the alert rules:\n{out}")


def check_scrape_targets():
    config = yaml.safe_load(PROMETHEUS.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    alerts = ALERTS.read_text()
    alert_jobs = set(re.findall(r'job="([^"]+)"', alerts))
    # One target: the router's /metrics carries the workers' series (tessera serve).
    expect(set(jobs) == {"tessera-router"} and "tessera-router" in alert_jobs,
           f"jobs {sorted(jobs)}, the alert rules name {sorted(alert_jobs)}")
    expect("tessera_worker_metrics_up == 0" in alerts,
           "the alert rules do not watch the workers behind the router (tessera_worker_metrics_up)")
    (static,) = jobs["tessera-router"]["static_configs"]
    (target,) = static["targets"]
    labels = static.get("labels", {})
    expect(labels.get("model"), "no model label (the dashboard filters on it)")
    expect(labels.get("instance"), "no instance label (the alert summaries name it)")
    host, port = target.rsplit(":", 1)
    expect(host == "127.0.0.1", f"scrapes {host}; tessera serve's metrics host is 127.0.0.1 by "
           "default")
    serve = command_with("serve")
    expect(port == option(serve, "--metrics-port"),
           f"prometheus.yml scrapes port {port}, README's tessera serve serves "
           f"{option(serve, '--metrics-port')}")
    expect(not any(w.startswith("--worker-metrics-port") for w in serve),
           "README's tessera serve opens worker ports: scraping them would count twice")


def check_datasource(dashboard):
    provisioned = yaml.safe_load(DATASOURCES.read_text())
    expect(provisioned.get("apiVersion") == 1, "datasources apiVersion")
    (source,) = provisioned["datasources"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    variable = variables.get("DS_PROMETHEUS", {})
    expect(variable.get("type") == "datasource", f"DS_PROMETHEUS variable {variable}")
    expect(source["type"] == variable["query"], f"datasource type {source['type']}, the "
           f"dashboard's variable selects {variable['query']}")
    expect(source.get("isDefault") is True, "not the default datasource: the variable has no "
           "saved value, so Grafana picks the default")
    prometheus = command_with("--config.file=deploy/local-monitoring/prometheus.yml")
    listen = option(prometheus, "--web.listen-address")
    expect(source["url"] == f"http://{listen}",
           f"datasource url {source['url']}, README's Prometheus listens on {listen}")
    scrape = yaml.safe_load(PROMETHEUS.read_text())["global"]["scrape_interval"]
    expect(source.get("jsonData", {}).get("timeInterval") == scrape,
           f"timeInterval {source.get('jsonData', {}).get('timeInterval')} != scrape {scrape}")
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                refs.append(node["datasource"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(dashboard)
    expect(refs, "the dashboard references no datasource")
    stray = [r for r in refs if r.get("uid") not in (DS_VARIABLE, source["uid"]) or
             r.get("type") != source["type"]]
    expect(not stray, f"datasource references neither {DS_VARIABLE} nor {source['uid']}: "
           f"{stray[:3]}")
    return len(refs)


def check_dashboard_provider():
    provisioned = yaml.safe_load(PROVIDERS.read_text())
    expect(provisioned.get("apiVersion") == 1, "dashboard providers apiVersion")
    (provider,) = provisioned["providers"]
    expect(provider.get("type") == "file", f"provider type {provider.get('type')}")
    raw = provider["options"]["path"]
    expect(raw.startswith("${TESSERA_REPO}/"), f"provider path {raw} not under $TESSERA_REPO")
    path = pathlib.Path(raw.replace("${TESSERA_REPO}", str(ROOT)))
    expect(path.is_dir(), f"{path} is not a directory")
    dashboards = sorted(p.name for p in path.glob("*.json"))
    expect(dashboards == [DASHBOARD.name] and path.resolve() == DASHBOARD.parent.resolve(),
           f"{raw} loads {dashboards}, want only {DASHBOARD.name}")
    dashboard = json.loads(DASHBOARD.read_text())
    expect(dashboard.get("uid") and dashboard.get("title"), "the dashboard has no uid or title")
    grafana = command_with("server")
    env = dict(w.split("=", 1) for w in grafana if re.fullmatch(r"[A-Z_]+=.*", w))
    expect(env.get("TESSERA_REPO") == "$PWD",
           f"README's Grafana command sets TESSERA_REPO={env.get('TESSERA_REPO')}, want $PWD "
           "(run from the repository root)")
    want = "$PWD/" + str(PROVISIONING.relative_to(ROOT))
    expect(env.get("GF_PATHS_PROVISIONING") == want,
           f"GF_PATHS_PROVISIONING={env.get('GF_PATHS_PROVISIONING')}, want {want}")


def main():
    run = CheckRun()
    dashboard = json.loads(DASHBOARD.read_text())
    run("promtool check config: local-monitoring/prometheus.yml", check_promtool)
    run("scrape jobs, labels and ports match the alert rules and tessera serve",
        check_scrape_targets)
    run("Grafana datasource: the one the dashboard's references resolve to",
        lambda: check_datasource(dashboard))
    run("Grafana dashboard provider: loads deploy/grafana/tessera.json only",
        check_dashboard_provider)
    print(f"{4 - run.failures} passed, {run.failures} failed")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
