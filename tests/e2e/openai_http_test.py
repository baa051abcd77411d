#!/usr/bin/env python3
"""End-to-end: the real `openai` Python client (PyPI, pinned in scripts/install_python_test_deps.sh,
run from .venv-e2e) against `tessera serve --http-port -1`, checked against the gRPC API of the
same server (stubs generated from proto/ at test time, Debian's python3-grpcio).

Covers: /v1/models, completions and chat completions, streaming (SSE, include_usage) and not,
the same greedy text and the same usage numbers as gRPC Generate for the same request, n,
logprobs, /tokenize and /detokenize against gRPC Tokenize, /health, error objects and statuses
(400 naming the field, 404 unknown model and route, 429 queue full), and a client that
disconnects mid-stream: its request is cancelled and its KV blocks freed (ServerStats).
The server runs with --max-num-seqs 1 --max-waiting 2, so "queue full" is reachable.
Exits non-zero with the reason on any failure.
"""
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import generate_stubs, parse_e2e_args, import_openai  # noqa: E402

from e2e_checks import check

PROMPT = "The capital of France is"
MAX_WAITING = 2
QUESTION = "What is the capital of France?"


def start_serve(bin_dir, model):
    """Starts `tessera serve` (one sequence at a time, so "queue full" is reachable); returns
    (proc, grpc_addr, http_addr)."""
    return start_serve_with(bin_dir, model, max_num_seqs=1)


def start_serve_with(bin_dir, model, max_num_seqs):
    """Starts `tessera serve` on loopback with any free ports; returns (proc, grpc_addr,
    http_addr)."""
    proc = subprocess.Popen(
        [os.path.join(bin_dir, "tessera"), "serve", "--model", model, "--port", "0",
         "--http-port", "-1", "--threads", "2", "--kv-cache-mb", "256",
         "--max-num-seqs", str(max_num_seqs), "--max-waiting", str(MAX_WAITING)],
        stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    http_addr = None
    deadline = time.time() + 180
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tessera serve exited with {proc.wait()} before it was ready")
        match = re.search(r"tessera serve: (http|listening) on (\S+)", line)
        if match and match.group(1) == "http":
            http_addr = match.group(2)
        elif match:
            if http_addr is None:
                raise RuntimeError("tessera serve printed no 'http on' line")
            return proc, match.group(2), http_addr
    proc.kill()
    raise RuntimeError("tessera serve not ready in 180 s")


@contextlib.contextmanager
def serving(bin_dir, model, openai, max_num_seqs):
    """`tessera serve` on `model` for the with-block: yields (openai client, served model id,
    http_addr); then SIGTERM, and a non-zero exit fails the test."""
    serve, _, http_addr = start_serve_with(bin_dir, model, max_num_seqs=max_num_seqs)
    try:
        client = openai.OpenAI(base_url=f"http://{http_addr}/v1", api_key="unused",
                               max_retries=0, timeout=120)
        yield client, client.models.list().data[0].id, http_addr
    finally:
        serve.send_signal(signal.SIGTERM)
        code = serve.wait(timeout=90)
    check(code == 0, f"tessera serve exited with {code}")


def raw_request(http_addr, method, path, body=None):
    """(status, parsed JSON body) of one plain HTTP request."""
    host, port = http_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    payload = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else None


def grpc_generate(stub, pb2, **fields):
    """(text, last response) of one gRPC Generate stream."""
    text, last = "", None
    for response in stub.Generate(pb2.GenerateRequest(**fields), timeout=120):
        text += response.text
        last = response
    return text, last


def greedy(pb2):
    return pb2.SamplingParams(temperature=0.0)


def check_models_and_health(client, http_addr, info):
    models = client.models.list()
    ids = [m.id for m in models.data]
    check(ids == [info.model_name], ids)
    status, body = raw_request(http_addr, "GET", "/health")
    check(status == 200, (status, body))


def check_completions(client, stub, pb2, model):
    text, last = grpc_generate(stub, pb2, text=PROMPT, sampling=greedy(pb2), max_tokens=12,
                               ignore_eos=True, skip_special_tokens=True)
    completion = client.completions.create(model=model, prompt=PROMPT, max_tokens=12,
                                           temperature=0, extra_body={"ignore_eos": True})
    choice = completion.choices[0]
    check(choice.text == text, (choice.text, text))
    check(choice.finish_reason == "length", choice.finish_reason)
    check(completion.object == "text_completion", completion.object)
    check(completion.usage.prompt_tokens == last.usage.prompt_tokens, (completion.usage, last.usage))
    check(completion.usage.completion_tokens == last.usage.completion_tokens == 12)
    check(completion.usage.total_tokens == last.usage.prompt_tokens + 12)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=PROMPT, max_tokens=12, temperature=0, stream=True,
        extra_body={"ignore_eos": True}) if c.choices)
    check(streamed == text, (streamed, text))
    echoed = client.completions.create(model=model, prompt=PROMPT, max_tokens=12, temperature=0,
                                       echo=True, extra_body={"ignore_eos": True})
    check(echoed.choices[0].text == PROMPT + text, echoed.choices[0].text)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=PROMPT, max_tokens=12, temperature=0, stream=True, echo=True,
        extra_body={"ignore_eos": True}) if c.choices)
    check(streamed == PROMPT + text, streamed)
    with_logprobs = client.completions.create(model=model, prompt=PROMPT, max_tokens=4,
                                              temperature=0, logprobs=2,
                                              extra_body={"ignore_eos": True})
    lp = with_logprobs.choices[0].logprobs
    check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4, lp)
    check(all(len(top) == 2 for top in lp.top_logprobs), lp.top_logprobs)  # logprobs=2 asked
    check("".join(lp.tokens) == with_logprobs.choices[0].text, lp.tokens)
    print(f"completions OK: {text!r}, usage {completion.usage}")


def check_chat(client, stub, pb2, model):
    chat = pb2.Chat(messages=[pb2.ChatMessage(role="user", content=QUESTION)])
    text, last = grpc_generate(stub, pb2, chat=chat, sampling=greedy(pb2), max_tokens=24,
                               skip_special_tokens=True)
    messages = [{"role": "user", "content": QUESTION}]
    answer = client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                            temperature=0)
    check(answer.object == "chat.completion", answer.object)
    check(answer.choices[0].message.role == "assistant")
    check(answer.choices[0].message.content == text, (answer.choices[0].message.content, text))
    check("Paris" in text, text)
    check(answer.usage.prompt_tokens == last.usage.prompt_tokens, (answer.usage, last.usage))
    check(answer.usage.completion_tokens == last.usage.completion_tokens, (answer.usage, last.usage))

    chunks = list(client.chat.completions.create(
        model=model, messages=messages, max_completion_tokens=24, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    check(chunks[0].choices[0].delta.role == "assistant", chunks[0])
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(streamed == text, (streamed, text))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    check(finishes[-1] == answer.choices[0].finish_reason and finishes[:-1] == [None] * (
        len(finishes) - 1), finishes)
    usage_chunk = chunks[-1]
    check(usage_chunk.choices == [] and usage_chunk.usage is not None, usage_chunk)
    check(usage_chunk.usage.prompt_tokens == last.usage.prompt_tokens)
    check(usage_chunk.usage.completion_tokens == last.usage.completion_tokens)
    check(all(c.usage is None for c in chunks[:-1]), "usage only on the last chunk")

    two = client.chat.completions.create(model=model, messages=messages, max_tokens=8, n=2,
                                         temperature=0.9, seed=7, logprobs=True, top_logprobs=2)
    check(sorted(c.index for c in two.choices) == [0, 1], two.choices)
    check(two.usage.completion_tokens == sum(
        len(c.logprobs.content) for c in two.choices), two.usage)
    check(all(len(t.top_logprobs) == 2 for c in two.choices for t in c.logprobs.content))
    print(f"chat OK: {text!r}, usage {answer.usage}")


def check_tool_round_trip_shapes(client, openai, http_addr, model):
    """The openai client's tool-calling conversation shapes reach the model's template: an
    assistant turn of tool calls (content None), the tool's result, tools offered. The default
    model's ChatML template renders the tool turn as a `tool` role. tool_choice "required" makes
    the model call a tool (its output constrained to the call's JSON); a named function that
    `tools` does not list is refused by name."""
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    messages = [
        {"role": "user", "content": "Is it raining in Lyon?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "light rain, 11 C"},
    ]
    answer = client.chat.completions.create(model=model, messages=messages, tools=tools,
                                            max_tokens=8, temperature=0)
    check(answer.choices[0].message.role == "assistant", answer)
    check(answer.choices[0].finish_reason in ("stop", "length"), answer.choices[0])
    streamed = list(client.chat.completions.create(model=model, messages=messages, tools=tools,
                                                   max_tokens=8, temperature=0, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    check(text == answer.choices[0].message.content, (text, answer.choices[0].message.content))
    status, body = raw_request(http_addr, "POST", "/tokenize",
                               {"messages": messages, "add_generation_prompt": True})
    check(status == 200, (status, body))
    forced = client.chat.completions.create(
        model=model, tools=tools, tool_choice="required", max_tokens=60, temperature=0,
        messages=[{"role": "user", "content": "Is it raining in Lyon?"}])
    check(forced.choices[0].finish_reason == "tool_calls", forced.choices[0])
    call = forced.choices[0].message.tool_calls[0]
    check(call.function.name == "get_weather", call)
    check(isinstance(json.loads(call.function.arguments)["city"], str), call)
    try:
        client.chat.completions.create(model=model, messages=messages, tools=tools,
                                       tool_choice={"type": "function",
                                                    "function": {"name": "nope"}}, max_tokens=4)
        raise AssertionError("a tool_choice naming an unknown function was accepted")
    except openai.BadRequestError as e:
        check(e.body["param"] == "tool_choice", e.body)
    print("tool-call conversation shapes OK; forced call:", call.function.arguments)


def check_tokenize(http_addr, stub, pb2):
    status, body = raw_request(http_addr, "POST", "/tokenize", {"prompt": PROMPT})
    check(status == 200, (status, body))
    ids = list(stub.Tokenize(pb2.TokenizeRequest(text=PROMPT, add_special_tokens=True)).token_ids)
    check(body["tokens"] == ids and body["count"] == len(ids), (body, ids))
    status, body = raw_request(http_addr, "POST", "/detokenize", {"tokens": ids})
    check(status == 200 and body["prompt"].endswith(PROMPT), (status, body))


def check_errors(client, openai, http_addr, model):
    def expect(error_type, status, param, **kwargs):
        try:
            client.completions.create(model=kwargs.pop("model", model), **kwargs)
        except error_type as error:
            check(error.status_code == status, (error.status_code, error))
            check(error.body["param"] == param, error.body)
            check(error.body["message"], error.body)
            return
        raise AssertionError(f"no {error_type.__name__} for {kwargs}")

    expect(openai.BadRequestError, 400, "temperature", prompt=PROMPT,
           extra_body={"temperature": "hot"})
    expect(openai.BadRequestError, 400, "top_p", prompt=PROMPT, top_p=5)
    expect(openai.BadRequestError, 400, "logit_bias", prompt=PROMPT, logit_bias={"1": 500})
    expect(openai.BadRequestError, 400, "logit_bias", prompt=PROMPT, logit_bias={"99999999": 1})
    expect(openai.BadRequestError, 400, "max_tokens", prompt=PROMPT, max_tokens=0)
    expect(openai.NotFoundError, 404, "model", prompt=PROMPT, model="no-such-model")
    # Fields the server cannot honour are refused naming them, not ignored.
    expect(openai.BadRequestError, 400, "min_tokens", prompt=PROMPT, extra_body={"min_tokens": 2})
    expect(openai.BadRequestError, 400, "suffix", prompt=PROMPT, suffix="!")
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                       functions=[{"name": "f", "parameters": {}}])
        raise AssertionError("legacy functions accepted")
    except openai.BadRequestError as error:
        check(error.body["param"] == "functions", error.body)
    status, body = raw_request(http_addr, "POST", "/v1/completions", "{not json")
    check(status == 400 and body["error"]["type"] == "invalid_request_error", (status, body))
    status, body = raw_request(http_addr, "GET", "/v1/nothing-here")
    check(status == 404 and "error" in body, (status, body))
    try:
        client.chat.completions.create(model=model, messages=[])
        raise AssertionError("empty messages accepted")
    except openai.BadRequestError as error:
        check(error.body["param"] == "messages", error.body)
    print("errors OK")


def open_stream(http_addr, model, max_tokens):
    """A raw streaming completion; returns the connection after its first event arrived."""
    host, port = http_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(
        {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0,
         "ignore_eos": True, "stream": True}), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    check(response.status == 200, response.status)
    check(response.getheader("Content-Type").startswith("text/event-stream"))
    first = response.readline()
    check(first.startswith(b"data: {"), first)
    return conn, response


def wait_released(stub, pb2, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        stats = stub.ServerStats(pb2.ServerStatsRequest(), timeout=5)
        if (stats.requests_running, stats.requests_waiting, stats.kv_blocks_used) == (0, 0, 0):
            return stats
        time.sleep(0.05)
    raise AssertionError(f"not released after {timeout_s} s: {stats}")


def start_waiting(http_addr, model):
    """A streaming request that will queue (its response is never read)."""
    conn = http.client.HTTPConnection(*http_addr.rsplit(":", 1), timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(
        {"model": model, "prompt": PROMPT, "max_tokens": 4000, "stream": True,
         "ignore_eos": True}), headers={"Content-Type": "application/json"})
    return conn


def check_queue_full_and_disconnect(openai, client, http_addr, stub, pb2, model):
    # One running (max-num-seqs 1), MAX_WAITING waiting: the next one is refused with 429.
    running, _ = open_stream(http_addr, model, 4000)
    waiting = []
    for i in range(MAX_WAITING):
        waiting.append(start_waiting(http_addr, model))
        for _ in range(200):
            if stub.ServerStats(pb2.ServerStatsRequest(), timeout=5).requests_waiting == i + 1:
                break
            time.sleep(0.05)
    try:
        client.completions.create(model=model, prompt=PROMPT, max_tokens=2)
        raise AssertionError("a full queue accepted a request")
    except openai.RateLimitError as error:
        check(error.status_code == 429, error)
        check("queue is full" in error.body["message"], error.body)
    # Every client goes away mid-generation: 4000 tokens each would take minutes; the KV must
    # be free within seconds.
    stats = stub.ServerStats(pb2.ServerStatsRequest(), timeout=5)
    check(stats.kv_blocks_used > 0 and stats.requests_running == 1, stats)
    check(stats.requests_waiting == MAX_WAITING, stats)
    for conn in waiting + [running]:
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    start = time.time()
    wait_released(stub, pb2, 20)
    print(f"disconnect OK: KV freed {time.time() - start:.2f} s after the clients left")


def check_bench(bin_dir, grpc_addr, http_addr):
    """`tessera bench --api openai` streams from the HTTP API and counts every token."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run([os.path.join(bin_dir, "tessera"), "bench", "--addr", grpc_addr,
                        "--api", "openai", "--http-addr", http_addr, "--concurrency", "2",
                        "--num-requests", "2", "--prompt-tokens", "8", "--output-tokens", "4",
                        "--json", report.name], check=True, stdout=subprocess.DEVNULL)
        level = json.load(open(report.name))["levels"][0]
    check(level["errors"] == 0 and level["output_tokens"] == 8, level)
    check(level["itl_s"]["count"] == 6, level["itl_s"])
    print("bench --api openai OK")


def main():
    args = parse_e2e_args()

    import grpc  # Debian python3-grpcio (the venv sees the system packages)
    openai = import_openai()
    print(f"openai {openai.__version__}")
    with tempfile.TemporaryDirectory() as stubs_dir:
        pb2, pb2_grpc = generate_stubs(args.repo, stubs_dir)
        serve, grpc_addr, http_addr = start_serve(args.bin_dir, args.model)
        try:
            stub = pb2_grpc.TesseraStub(grpc.insecure_channel(grpc_addr))
            info = stub.ModelInfo(pb2.ModelInfoRequest(), timeout=30)
            client = openai.OpenAI(base_url=f"http://{http_addr}/v1", api_key="unused",
                                   max_retries=0, timeout=120)
            check_models_and_health(client, http_addr, info)
            check_completions(client, stub, pb2, info.model_name)
            check_chat(client, stub, pb2, info.model_name)
            check_tool_round_trip_shapes(client, openai, http_addr, info.model_name)
            check_tokenize(http_addr, stub, pb2)
            check_errors(client, openai, http_addr, info.model_name)
            check_bench(args.bin_dir, grpc_addr, http_addr)
            check_queue_full_and_disconnect(openai, client, http_addr, stub, pb2,
                                            info.model_name)
        finally:
            serve.send_signal(signal.SIGTERM)
            code = serve.wait(timeout=90)
        check(code == 0, f"tessera serve exited with {code}")
    print("openai http OK")


if __name__ == "__main__":
    main()
