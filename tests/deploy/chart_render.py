"""Rendering the Helm chart offline, shared by the chart checks (check_helm_chart.py,
check_inference_pool.py, check_multi_worker.py)."""
import helm_python as helm
import yaml

import k8s_checks as k


def render(chart, values):
    """Every manifest the chart renders with `values`, parsed, in file order."""
    docs = []
    for path, text in sorted(chart.render(values, name="demo", namespace="llm").items()):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def count_unrefused(chart, bad_values):
    """Renders each (values, fragment) pair of `bad_values`; each must fail with an error that
    names `fragment`. Prints a PASS/FAIL line per pair; returns how many failed."""
    failures = 0
    for values, fragment in bad_values:
        try:
            render(chart, values)
            failures += 1
            print(f"FAIL {values}: rendered, expected an error about {fragment!r}")
        except helm.HelmError as e:
            ok = fragment in str(e)
            failures += 0 if ok else 1
            print(f"{'PASS' if ok else 'FAIL'} {values} refused: {str(e).splitlines()[0][:160]}")
    return failures


class CheckRun:
    """Runs named checks, printing PASS/FAIL for each; `failures` counts the failed ones."""

    def __init__(self):
        self.failures = 0

    def __call__(self, label, check):
        try:
            check()
            print(f"PASS {label}")
        except k.CheckFailed as e:
            self.failures += 1
            print(f"FAIL {label}: {e}")
