#!/usr/bin/env python3
"""End-to-end: a Python gRPC client (Debian's python3-grpcio) streams a completion from
tessera-router + tessera-worker running as real processes on loopback.

Stubs are generated from proto/ at test time with the system protoc and grpc_python_plugin, so
the test proves the public API works for a non-C++ client built only from our .proto files.
Exits non-zero (with the reason) on any failure.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import generate_stubs, start_process, wait_ready, parse_e2e_args  # noqa: E402

from e2e_checks import check


def main():
    args = parse_e2e_args()

    import grpc  # Debian python3-grpcio
    with tempfile.TemporaryDirectory() as stubs_dir:
        pb2, pb2_grpc = generate_stubs(args.repo, stubs_dir)
        worker, worker_addr = start_process(
            [os.path.join(args.bin_dir, "tessera-worker"), "--model", args.model,
             "--listen", "127.0.0.1:0", "--threads", "2", "--kv-cache-mb", "256"],
            "tessera-worker")
        router = None
        try:
            router, router_addr = start_process(
                [os.path.join(args.bin_dir, "tessera-router"), "--model", args.model,
                 "--worker", worker_addr, "--listen", "127.0.0.1:0", "--http-port", "0"],
                "tessera-router")
            channel = grpc.insecure_channel(router_addr)
            stub = pb2_grpc.TesseraStub(channel)
            info = wait_ready(stub, pb2, grpc, attempts=100)
            request = pb2.GenerateRequest(
                request_id="py-1",
                chat=pb2.Chat(messages=[pb2.ChatMessage(role="user",
                                                        content="What is the capital of France?")]),
                sampling=pb2.SamplingParams(temperature=0.0), max_tokens=24, logprobs=True)
            text, token_ids, last = "", [], None
            for response in stub.Generate(request, timeout=120):
                check(response.request_id == "py-1", response.request_id)
                text += response.text
                token_ids += list(response.token_ids)
                check(len(response.logprobs) == len(response.token_ids))
                last = response
            check(last is not None and last.finish_reason in (
                pb2.FINISH_REASON_EOS, pb2.FINISH_REASON_LENGTH), last)
            check(last.usage.completion_tokens == len(token_ids), (last.usage, len(token_ids)))
            check(last.usage.prompt_tokens > 0)
            check("Paris" in text, f"unexpected answer: {text!r}")
            detok = stub.Detokenize(pb2.DetokenizeRequest(token_ids=token_ids,
                                                          skip_special_tokens=True))
            check(detok.text.startswith(text), (detok.text, text))
            print(f"python client OK: {info.model_name}: {text!r} "
                  f"({len(token_ids)} tokens, finish {pb2.FinishReason.Name(last.finish_reason)})")
        finally:
            for proc in (router, worker):
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=30)


if __name__ == "__main__":
    main()
