#!/usr/bin/env python3
"""End-to-end: tessera-localai driven the way LocalAI drives an external gRPC backend.

Stubs come from proto/localai/backend.proto (system protoc + grpc_python_plugin, Debian's
python3-grpcio). The test first asserts that our proto's package, service, RPC names and field
numbers are LocalAI's wire facts, then: spawns `tessera-localai --addr=127.0.0.1:PORT`, polls
Health until "OK" (before any model), LoadModel (ModelPath + Model, ContextSize, Threads),
Predict and PredictStream (raw prompt and UseTokenizerTemplate + Messages), TokenizeString,
Status, concurrent PredictStream calls (their token streams must overlap in time: batched, not
serialized), Free, an UNIMPLEMENTED RPC, and a second backend with LOCALAI_GRPC_AUTH_TOKEN set
(no / wrong / right `authorization: Bearer` metadata). Exits non-zero with the reason on failure.
"""
import importlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import parse_e2e_args  # noqa: E402

WIRE_FACTS = {
    "Reply": {"message": 1, "tokens": 2, "prompt_tokens": 3, "timing_prompt_processing": 4,
              "timing_token_generation": 5},
    "PredictOptions": {"Prompt": 1, "Seed": 2, "Threads": 3, "Tokens": 4, "TopK": 5, "Repeat": 6,
                       "Batch": 7, "NKeep": 8, "Temperature": 9, "Penalty": 10,
                       "StopPrompts": 13, "IgnoreEOS": 14, "FrequencyPenalty": 17,
                       "PresencePenalty": 18, "TopP": 32, "UseTokenizerTemplate": 43,
                       "Messages": 44, "MinP": 53},
    "ModelOptions": {"Model": 1, "ContextSize": 2, "Seed": 3, "NBatch": 4, "NGPULayers": 12,
                     "Threads": 15, "ModelFile": 21, "ModelPath": 59},
    "Message": {"role": 1, "content": 2},
    "Result": {"message": 1, "success": 2},
    "TokenizationResponse": {"length": 1, "tokens": 2},
    "StatusResponse": {"state": 1, "memory": 2},
    "HealthMessage": {},
}
STATES = {"UNINITIALIZED": 0, "BUSY": 1, "READY": 2, "ERROR": -1}
RPCS = {"Health": ("HealthMessage", "Reply"), "Predict": ("PredictOptions", "Reply"),
        "LoadModel": ("ModelOptions", "Result"), "PredictStream": ("PredictOptions", "Reply"),
        "TokenizeString": ("PredictOptions", "TokenizationResponse"),
        "Status": ("HealthMessage", "StatusResponse")}


def generate_stubs(repo, out_dir):
    proto_root = os.path.join(repo, "proto")
    subprocess.run(
        ["protoc", f"--proto_path={proto_root}", f"--python_out={out_dir}",
         f"--grpc_python_out={out_dir}",
         "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
         os.path.join(proto_root, "localai/backend.proto")], check=True)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("localai.backend_pb2"),
            importlib.import_module("localai.backend_pb2_grpc"))


def check_wire_facts(pb2):
    assert pb2.DESCRIPTOR.package == "backend", pb2.DESCRIPTOR.package
    for message, fields in WIRE_FACTS.items():
        descriptor = pb2.DESCRIPTOR.message_types_by_name[message]
        for name, number in fields.items():
            assert descriptor.fields_by_name[name].number == number, (message, name)
    state = pb2.StatusResponse.DESCRIPTOR.enum_types_by_name["State"]
    assert {v.name: v.number for v in state.values} == STATES, state.values
    service = pb2.DESCRIPTOR.services_by_name["Backend"]
    assert service.full_name == "backend.Backend"
    for rpc, (request, response) in RPCS.items():
        method = service.methods_by_name[rpc]
        assert (method.input_type.name, method.output_type.name) == (request, response), rpc
    print("wire facts OK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(bin_dir, token=None):
    env = dict(os.environ)
    env.pop("LOCALAI_GRPC_AUTH_TOKEN", None)
    if token is not None:
        env["LOCALAI_GRPC_AUTH_TOKEN"] = token
    port = free_port()
    proc = subprocess.Popen([os.path.join(bin_dir, "tessera-localai"), f"--addr=127.0.0.1:{port}",
                             "--kv-cache-mb", "256"], env=env, stdout=subprocess.DEVNULL,
                            stderr=sys.stderr)
    return proc, f"127.0.0.1:{port}"


def wait_health(grpc, stub, pb2, metadata=None):
    """Polls Health as LocalAI does until it answers "OK"."""
    for _ in range(300):
        try:
            reply = stub.Health(pb2.HealthMessage(), timeout=2, metadata=metadata)
            assert reply.message == b"OK", reply
            return
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.1)
    raise AssertionError("Health never answered")


def stream(stub, pb2, **fields):
    replies = list(stub.PredictStream(pb2.PredictOptions(**fields), timeout=120))
    return b"".join(r.message for r in replies).decode(), replies


def check_predict(stub, pb2):
    prompt = "The capital of France is"
    fields = dict(Prompt=prompt, Tokens=8, Temperature=0, IgnoreEOS=True, Seed=1)
    text, replies = stream(stub, pb2, **fields)
    whole = stub.Predict(pb2.PredictOptions(**fields), timeout=120)
    assert whole.message.decode() == text, (whole.message, text)
    assert whole.tokens == replies[-1].tokens == 8, (whole.tokens, replies[-1].tokens)
    counts = [r.tokens for r in replies]
    assert counts == sorted(counts), counts
    prompt_ids = stub.TokenizeString(pb2.PredictOptions(Prompt=prompt), timeout=30)
    assert prompt_ids.length == len(prompt_ids.tokens) > 0, prompt_ids
    assert all(r.prompt_tokens == prompt_ids.length for r in replies), replies[0]
    assert replies[-1].timing_prompt_processing > 0 and replies[-1].timing_token_generation > 0
    chat, _ = stream(stub, pb2, UseTokenizerTemplate=True, Tokens=24, Temperature=0,
                     Messages=[pb2.Message(role="user", content="What is the capital of France?")])
    assert "Paris" in chat, chat
    stopped, _ = stream(stub, pb2, Prompt=prompt, Tokens=32, Temperature=0, IgnoreEOS=True,
                        StopPrompts=[text[3:6]])
    assert stopped == text[:text.find(text[3:6])], (stopped, text)
    print(f"predict OK: {text!r}; chat {chat!r}")


def check_concurrent(stub, pb2):
    """Four streams at once: every stream's first token comes before any stream's last."""
    spans, errors = [None] * 4, []

    def run(i):
        try:
            first = last = None
            for reply in stub.PredictStream(pb2.PredictOptions(
                    Prompt=f"Story number {i}:", Tokens=24, Temperature=0, IgnoreEOS=True),
                    timeout=180):
                now = time.monotonic()
                if reply.tokens > 0 and first is None:
                    first = now
                last = now
            spans[i] = (first, last)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    busy = False
    while any(t.is_alive() for t in threads):
        busy |= stub.Status(pb2.HealthMessage(), timeout=5).state == pb2.StatusResponse.BUSY
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert not errors, errors
    assert busy, "Status never said BUSY during four streams"
    assert max(s[0] for s in spans) < min(s[1] for s in spans), f"serialized: {spans}"
    print("concurrent OK (streams overlapped)")


def check_auth(grpc, pb2, pb2_grpc, bin_dir):
    proc, addr = spawn(bin_dir, token="s3cret")
    try:
        stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
        wait_health(grpc, stub, pb2, metadata=[("authorization", "Bearer s3cret")])
        for metadata in (None, [("authorization", "Bearer wrong")]):
            try:
                stub.Health(pb2.HealthMessage(), timeout=5, metadata=metadata)
                raise AssertionError(f"Health answered with metadata {metadata}")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        try:
            stub.LoadModel(pb2.ModelOptions(Model="x"), timeout=5)
            raise AssertionError("LoadModel answered without a token")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    print("auth OK")


def main():
    args = parse_e2e_args()
    import grpc  # Debian python3-grpcio

    with tempfile.TemporaryDirectory() as stubs_dir:
        pb2, pb2_grpc = generate_stubs(args.repo, stubs_dir)
        check_wire_facts(pb2)
        proc, addr = spawn(args.bin_dir)
        try:
            stub = pb2_grpc.BackendStub(grpc.insecure_channel(addr))
            wait_health(grpc, stub, pb2)
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            assert status.state == pb2.StatusResponse.UNINITIALIZED, status
            model = os.path.abspath(args.model)
            result = stub.LoadModel(pb2.ModelOptions(
                Model=os.path.basename(model), ModelPath=os.path.dirname(model),
                ContextSize=2048, Threads=2), timeout=300)
            assert result.success, result.message
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            assert status.state == pb2.StatusResponse.READY, status
            assert status.memory.total > 0 and "tessera-worker" in status.memory.breakdown, status
            check_predict(stub, pb2)
            check_concurrent(stub, pb2)
            try:
                stub.Embedding(pb2.PredictOptions(Prompt="x"), timeout=5)
                raise AssertionError("Embedding answered")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error
            assert stub.Free(pb2.HealthMessage(), timeout=60).success
            status = stub.Status(pb2.HealthMessage(), timeout=5)
            assert status.state == pb2.StatusResponse.UNINITIALIZED, status
        finally:
            proc.terminate()
            code = proc.wait(timeout=60)
        assert code == 0, f"tessera-localai exited with {code}"
        check_auth(grpc, pb2, pb2_grpc, args.bin_dir)
    print("localai backend OK")


if __name__ == "__main__":
    main()
