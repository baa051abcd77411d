#!/usr/bin/env python3
"""End-to-end: API key, router⇄worker secret and TLS.

1. `tessera serve --api-key K --tls-cert C --tls-key P --http-port -1` with a certificate this
   test makes with openssl: gRPC over TLS (Python grpcio, the certificate as root) refuses a
   missing or wrong key with UNAUTHENTICATED and serves the right one; a plaintext client gets
   nothing; the real `openai` client over HTTPS gets 401 (AuthenticationError) without or with a
   wrong key and a completion with the right one; /health stays open. (serve also gives its
   children a fresh router⇄worker secret: the router connecting at all proves it works.)
2. tessera-worker with --secret: a router without the secret never connects (and says the
   worker refused it); one with $TESSERA_WORKER_SECRET does.
Runs under .venv-e2e/bin/python (scripts/install_python_test_deps.sh). Exits non-zero on failure.
"""
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import (  # noqa: E402
    generate_stubs, start_process, parse_e2e_args, import_openai, make_certificate)

from e2e_checks import check

KEY = "test-key-1234"




def start_serve(bin_dir, model, cert, key):
    proc = subprocess.Popen(
        [os.path.join(bin_dir, "tessera"), "serve", "--model", model, "--port", "0",
         "--http-port", "-1", "--threads", "2", "--kv-cache-mb", "256", "--api-key", KEY,
         "--tls-cert", cert, "--tls-key", key], stdout=subprocess.PIPE, stderr=sys.stderr,
        text=True)
    addresses = {}
    deadline = time.time() + 180
    while time.time() < deadline and "listening" not in addresses:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tessera serve exited with {proc.wait()}")
        match = re.search(r"tessera serve: (http|listening) on (\S+)", line)
        if match:
            addresses[match.group(1)] = match.group(2)
    return proc, addresses["listening"], addresses["http"]


def check_grpc(grpc, pb2, pb2_grpc, addr, cert):
    with open(cert, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    stub = pb2_grpc.TesseraStub(grpc.secure_channel(addr, credentials))
    for metadata in (None, [("authorization", "Bearer wrong")], [("authorization", KEY)]):
        try:
            stub.ModelInfo(pb2.ModelInfoRequest(), timeout=10, metadata=metadata)
            raise AssertionError(f"ModelInfo answered with metadata {metadata}")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.UNAUTHENTICATED, error)
    good = [("authorization", f"Bearer {KEY}")]
    info = stub.ModelInfo(pb2.ModelInfoRequest(), timeout=10, metadata=good)
    text = "".join(r.text for r in stub.Generate(pb2.GenerateRequest(
        text="The capital of France is", max_tokens=4,
        sampling=pb2.SamplingParams(temperature=0)), timeout=60, metadata=good))
    check(text, "no text over TLS")
    plain = pb2_grpc.TesseraStub(grpc.insecure_channel(addr))
    try:
        plain.ModelInfo(pb2.ModelInfoRequest(), timeout=3, metadata=good)
        raise AssertionError("a plaintext client was served on the TLS port")
    except grpc.RpcError as error:
        check(error.code() in (grpc.StatusCode.UNAVAILABLE,
                                grpc.StatusCode.DEADLINE_EXCEEDED), error)
    print(f"grpc over TLS OK: {text!r}")
    return info.model_name


def check_http(openai, http_addr, cert, model):
    base = f"https://{http_addr}/v1"
    client = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0,
                           http_client=openai.DefaultHttpxClient(verify=cert))
    try:
        client.models.list()
        raise AssertionError("/v1/models answered a wrong key")
    except openai.AuthenticationError as error:
        check(error.status_code == 401, error)
        check(error.body["type"] == "authentication_error", error.body)
    context = ssl.create_default_context(cafile=cert)
    try:  # no key at all (the openai client always sends one)
        urllib.request.urlopen(f"https://{http_addr}/v1/models", context=context, timeout=10)
        raise AssertionError("/v1/models answered without a key")
    except urllib.error.HTTPError as error:
        check(error.code == 401, error)
    client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0,
                           http_client=openai.DefaultHttpxClient(verify=cert))
    completion = client.completions.create(model=model, prompt="The capital of France is",
                                           max_tokens=4, temperature=0)
    check(completion.usage.completion_tokens == 4, completion.usage)
    with urllib.request.urlopen(f"https://{http_addr}/health", context=context, timeout=10) as r:
        check(r.status == 200 and json.loads(r.read()) == {}, r.status)
    print(f"https OK: {completion.choices[0].text!r}")


def run_cli(bin_dir, args, env_key=None):
    env = dict(os.environ)
    env.pop("TESSERA_API_KEY", None)
    if env_key is not None:
        env["TESSERA_API_KEY"] = env_key
    return subprocess.run([os.path.join(bin_dir, "tessera")] + args, capture_output=True,
                          text=True, timeout=120, env=env)


def check_clients(bin_dir, addr, http_addr, cert):
    """`tessera generate --addr` and `tessera bench` reach the keyed TLS router with --api-key
    (or $TESSERA_API_KEY) and --tls-ca; without the key they fail with the server's reason, and
    bench over HTTP shows the server's error body."""
    ask = ["generate", "--addr", addr, "--prompt", "The capital of France is", "--max-tokens", "4",
           "--tls-ca", cert]
    done = run_cli(bin_dir, ask + ["--api-key", KEY])
    check(done.returncode == 0 and done.stdout.strip(), (done.returncode, done.stdout, done.stderr))
    done = run_cli(bin_dir, ask, env_key=KEY)
    check(done.returncode == 0, ("TESSERA_API_KEY", done.returncode, done.stderr))
    refused = run_cli(bin_dir, ask)
    check(refused.returncode == 1 and ("UNAUTHENTICATED" in refused.stderr.upper()
                                       or "api key" in refused.stderr.lower()),
          (refused.returncode, refused.stderr))
    bench = ["bench", "--addr", addr, "--api", "openai", "--http-addr", http_addr,
             "--concurrency", "1", "--num-requests", "1", "--prompt-tokens", "8",
             "--output-tokens", "4", "--tls-ca", cert]
    done = run_cli(bin_dir, bench + ["--api-key", KEY])
    check(done.returncode == 0, ("bench", done.returncode, done.stdout[-400:], done.stderr[-400:]))
    # A request the server refuses (a prompt past the context): bench shows the server's reason.
    too_long = bench[:bench.index("--prompt-tokens")] + ["--prompt-tokens", "9000",
                                                       "--output-tokens", "4", "--tls-ca", cert]
    done = run_cli(bin_dir, too_long + ["--api-key", KEY])
    output = done.stdout + done.stderr
    check(done.returncode != 0 and ("HTTP 400" in output and "leaves no room" in output),
          ("bench error body", done.returncode, done.stdout[-600:], done.stderr[-600:]))
    print(f"tessera generate/bench with --api-key and --tls-ca OK: {done.stderr.strip()[-120:]!r}")


def check_worker_secret(grpc, pb2, pb2_grpc, bin_dir, model):
    env = dict(os.environ, TESSERA_WORKER_SECRET="worker-s3cret")
    worker = subprocess.Popen([os.path.join(bin_dir, "tessera-worker"), "--model", model,
                               "--listen", "127.0.0.1:0", "--threads", "1",
                               "--kv-cache-mb", "64"], env=env, stdout=subprocess.PIPE,
                              stderr=sys.stderr, text=True)
    routers = []
    try:
        worker_addr = re.search(r"listening on (\S+)", worker.stdout.readline()).group(1)
        for secret, expect_connected in ((None, False), ("worker-s3cret", True)):
            router_env = dict(os.environ)
            router_env.pop("TESSERA_WORKER_SECRET", None)
            if secret:
                router_env["TESSERA_WORKER_SECRET"] = secret
            router = subprocess.Popen(
                [os.path.join(bin_dir, "tessera-router"), "--model", model, "--worker",
                 worker_addr, "--listen", "127.0.0.1:0", "--http-port", "0"], env=router_env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            routers.append(router)
            addr = re.search(r"listening on (\S+)", router.stdout.readline()).group(1)
            stub = pb2_grpc.TesseraStub(grpc.insecure_channel(addr))
            connected = False
            for _ in range(60 if expect_connected else 30):
                connected = stub.ServerStats(pb2.ServerStatsRequest(), timeout=5).worker_connected
                if connected:
                    break
                time.sleep(0.1)
            check(connected == expect_connected, (secret, connected))
            router.send_signal(signal.SIGTERM)
            _, err = router.communicate(timeout=60)
            if not expect_connected:
                check("refused us" in err and "worker secret" in err, err)
    finally:
        for proc in routers + [worker]:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    print("worker secret OK")


def main():
    args = parse_e2e_args()
    import grpc  # Debian python3-grpcio (the venv sees the system packages)
    openai = import_openai()
    with tempfile.TemporaryDirectory() as directory:
        pb2, pb2_grpc = generate_stubs(args.repo, directory)
        cert, key = make_certificate(directory)
        serve, addr, http_addr = start_serve(args.bin_dir, args.model, cert, key)
        try:
            model = check_grpc(grpc, pb2, pb2_grpc, addr, cert)
            check_http(openai, http_addr, cert, model)
            check_clients(args.bin_dir, addr, http_addr, cert)
        finally:
            serve.send_signal(signal.SIGTERM)
            code = serve.wait(timeout=90)
        check(code == 0, f"tessera serve exited with {code}")
        check_worker_secret(grpc, pb2, pb2_grpc, args.bin_dir, args.model)
    print("auth and TLS OK")


if __name__ == "__main__":
    main()
