"""localai_backend_test.py's checks of Predict's logprobs, GetMetrics and ModelMetadata
(router/localai/reply_builder.h, backend_reports.h), driven as LocalAI drives them."""
import json
import time

from e2e_checks import check

PROMPT = "The capital of France is"


def metrics_reaching(stub, pb2, tokens, timeout_s=5):
    """GetMetrics once it counts `tokens` generated tokens (the router counts a request's last
    tokens as it finishes it, which may be a moment after the client has its Reply), or the last
    answer after `timeout_s`."""
    deadline = time.time() + timeout_s
    while True:
        metrics = stub.GetMetrics(pb2.MetricsRequest(), timeout=10)
        if metrics.tokens_generated >= tokens or time.time() > deadline:
            return metrics
        time.sleep(0.05)


def check_before_load(grpc, stub, pb2):
    """GetMetrics and ModelMetadata describe the loaded model: none yet."""
    for call, request in ((stub.GetMetrics, pb2.MetricsRequest()),
                          (stub.ModelMetadata, pb2.ModelOptions())):
        try:
            call(request, timeout=5)
            raise AssertionError("answered before LoadModel")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.FAILED_PRECONDITION, error)
    print("before LoadModel OK (GetMetrics, ModelMetadata: FAILED_PRECONDITION)")


def check_model_metadata(stub, pb2):
    """SmolLM2's ChatML template has no thinking switch and writes no <think>."""
    metadata = stub.ModelMetadata(pb2.ModelOptions(), timeout=10)
    check(not metadata.supports_thinking, f"SmolLM2 does not think: {metadata}")
    rendered = metadata.rendered_template
    check("<|im_start|>user\ntest<|im_end|>" in rendered, f"no user turn in {rendered!r}")
    check(rendered.endswith("<|im_start|>assistant\n"),
          f"no generation prompt at the end of {rendered!r}")
    print("ModelMetadata OK")


def entries(reply):
    """The token entries of a Reply's logprobs JSON (LocalAI's schema.Logprobs)."""
    check(reply.logprobs, f"no logprobs in the Reply: {reply}")
    content = json.loads(reply.logprobs)["content"]
    check(isinstance(content, list), reply.logprobs)
    return content


def check_spells(content, message):
    """The chosen tokens' texts, joined, are the Reply's text."""
    spelled = "".join(entry["token"] for entry in content)
    check(spelled == message.decode(), f"the tokens spell {spelled!r}, the text is {message!r}")


def check_entry(entry, alternatives):
    """One token's logprobs: its bytes are its text, `alternatives` likelier-first
    alternatives, the chosen (greedy) token first among them, every logprob <= 0."""
    check(bytes(entry["bytes"]) == entry["token"].encode(), entry)
    check(entry["logprob"] <= 0, entry)
    top = entry["top_logprobs"]
    check(len(top) == alternatives, f"{len(top)} alternatives, asked for {alternatives}: {entry}")
    values = [alternative["logprob"] for alternative in top]
    check(all(v <= 0 for v in values) and values == sorted(values, reverse=True), values)
    check(top[0]["id"] == entry["id"] and abs(top[0]["logprob"] - entry["logprob"]) < 1e-4, entry)


def check_logprobs(grpc, stub, pb2):
    fields = dict(Prompt=PROMPT, Tokens=8, Temperature=0, IgnoreEOS=True, Seed=1)
    plain = stub.Predict(pb2.PredictOptions(**fields), timeout=120)
    check(plain.logprobs == b"", f"logprobs nobody asked for: {plain.logprobs[:80]}")
    # TopLogprobs differs from Logprobs here: TopLogprobs is the count of alternatives.
    whole = stub.Predict(pb2.PredictOptions(**fields, Logprobs=1, TopLogprobs=3), timeout=120)
    check(whole.message == plain.message, (whole.message, plain.message))
    content = entries(whole)
    check(len(content) == whole.tokens == 8,
          f"{len(content)} logprob entries for {whole.tokens} tokens (8 asked for)")
    check_spells(content, whole.message)
    for entry in content:
        check_entry(entry, 3)
    # A stream: each Reply its own tokens' logprobs, then one Reply (no text) with all of them.
    replies = list(stub.PredictStream(pb2.PredictOptions(**fields, Logprobs=2), timeout=120))
    *token_replies, last = replies
    check(last.message == b"" and last.tokens == 8,
          f"the stream's last Reply is no whole-answer Reply (text {last.message!r}, "
          f"{last.tokens} tokens)")
    streamed = []
    for reply in token_replies:
        own = entries(reply) if reply.logprobs else []
        check_spells(own, reply.message)
        streamed += own
    check(b"".join(r.message for r in token_replies) == whole.message)
    check(entries(last) == streamed, "the last Reply is not the stream's logprobs")
    check([e["id"] for e in streamed] == [e["id"] for e in content], (streamed, content))
    for entry in streamed:
        check_entry(entry, 2)
    check_bad_logprobs(grpc, stub, pb2)
    print(f"logprobs OK ({len(content)} tokens, 3 and 2 alternatives each)")


def check_bad_logprobs(grpc, stub, pb2):
    for bad, why in ((dict(Logprobs=-1), "Logprobs must be >= 0"),
                     (dict(TopLogprobs=-5), "TopLogprobs must be >= 0"),
                     (dict(Logprobs=1, TopLogprobs=1000), "top_logprobs must be in [0, 20]"),
                     (dict(Logprobs=2**31 - 1), "top_logprobs must be in [0, 20]")):
        try:
            stub.Predict(pb2.PredictOptions(Prompt="x", Tokens=1, **bad), timeout=30)
            raise AssertionError(f"{bad} answered")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.INVALID_ARGUMENT, (bad, error))
            check(why in error.details(), f"{bad}: {error.details()!r} does not say {why!r}")
    reply = stub.Predict(pb2.PredictOptions(Prompt="x", Tokens=1, Logprobs=1), timeout=30)
    check(len(entries(reply)) == 1, reply)


def check_metrics(stub, pb2):
    """Counted from LoadModel: zero, then exactly one Predict's prompt and tokens."""
    before = stub.GetMetrics(pb2.MetricsRequest(), timeout=10)
    check((before.tokens_generated, before.prompt_tokens_processed) == (0, 0),
          f"counts before any Predict: {before}")
    check(before.tokens_per_second == 0 and before.slot_id == 0, f"before any Predict: {before}")
    prompt = stub.TokenizeString(pb2.PredictOptions(Prompt=PROMPT), timeout=30).length
    reply = stub.Predict(pb2.PredictOptions(Prompt=PROMPT, Tokens=6, Temperature=0,
                                            IgnoreEOS=True), timeout=120)
    check(reply.tokens == 6, reply)
    after = metrics_reaching(stub, pb2, 6)
    check(after.tokens_generated == 6,
          f"tokens_generated {after.tokens_generated} after one Predict of 6 tokens")
    check(after.prompt_tokens_processed == prompt,
          f"prompt_tokens_processed {after.prompt_tokens_processed}, one prompt of {prompt}")
    # Generation speed of one sequence: within 10x of what this Reply's timing says (5 gaps).
    from_timing = 5 / (reply.timing_token_generation / 1000)
    check(from_timing / 10 < after.tokens_per_second < from_timing * 10,
          f"tokens_per_second {after.tokens_per_second}, the Reply's timing says {from_timing}")
    stub.Predict(pb2.PredictOptions(Prompt=PROMPT, Tokens=3, Temperature=0, IgnoreEOS=True),
                 timeout=120)
    again = metrics_reaching(stub, pb2, 9)
    check(again.tokens_generated == 9 and again.prompt_tokens_processed == 2 * prompt,
          f"after 6 + 3 tokens and two {prompt}-token prompts: {again}")
    print(f"GetMetrics OK ({after.tokens_per_second:.1f} tokens/s)")
