"""Python helpers for driving tessera from scripts and tests (Debian's python3-grpcio).

generate_stubs: builds the tessera.v1 Python stubs from proto/ with the system protoc and
grpc_python_plugin, so a client needs nothing but our .proto files.
start_process: starts tessera-worker / tessera-router and waits for its
"NAME listening on HOST:PORT" line.
wait_ready: retries ModelInfo until the router has connected to its worker.
"""
import importlib
import os
import re
import subprocess
import sys
import time


def generate_stubs(repo, out_dir):
    """Returns the (tessera_pb2, tessera_pb2_grpc) modules generated into out_dir."""
    proto_root = os.path.join(repo, "proto")
    subprocess.run(
        ["protoc", f"--proto_path={proto_root}", f"--python_out={out_dir}",
         f"--grpc_python_out={out_dir}",
         "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
         os.path.join(proto_root, "tessera/v1/tessera.proto")],
        check=True)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("tessera.v1.tessera_pb2"),
            importlib.import_module("tessera.v1.tessera_pb2_grpc"))


def start_process(cmd, name, timeout_s=120):
    """Starts cmd and waits for its 'NAME listening on HOST:PORT' line; returns (proc, addr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{name} exited with {proc.wait()} before it was ready")
        match = re.search(name + r" listening on (\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError(f"{name} not ready after {timeout_s} s")


def wait_ready(stub, pb2, grpc, attempts):
    """ModelInfo once the router serves (UNAVAILABLE while it dials the worker), 0.1 s apart."""
    for _ in range(attempts):
        try:
            return stub.ModelInfo(pb2.ModelInfoRequest(), timeout=5)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.1)
    raise RuntimeError("the router never connected to the worker")


def parse_e2e_args():
    """The arguments every Python e2e test takes from CTest: --bin-dir, --model, --repo."""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--repo", default=os.getcwd())
    return parser.parse_args()


def import_openai():
    """The openai client (PyPI, pinned in scripts/install_python_test_deps.sh), or a clear exit."""
    try:
        import openai
    except ImportError:
        sys.exit("the openai package is missing: run scripts/install_python_test_deps.sh and "
                 "this test with .venv-e2e/bin/python")
    return openai


def make_certificate(directory):
    """A self-signed certificate for localhost and 127.0.0.1 (openssl): (cert path, key path)."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key
