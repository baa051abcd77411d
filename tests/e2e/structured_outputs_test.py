#!/usr/bin/env python3
"""End-to-end structured outputs: the real `openai` client (.venv-e2e) against `tessera serve`
on a tiny RANDOM model (tessera-make-tiny-model): its unconstrained text is noise, so every
well-formed answer below is the grammar's token masks at work, not the model.

  - client.chat.completions.parse() with a Pydantic model (response_format json_schema) returns
    a valid object, streaming and not;
  - guided_regex (and vLLM's current structured_outputs.regex) output matches its regex;
    guided_choice is one of the choices (streamed);
  - guided_grammar (EBNF) output is a sentence of the grammar;
  - an invalid schema, regex or grammar is a 400 naming the request's field; two constraints at
    once are refused;
  - an unguided request next to guided ones still runs (and is not constrained);
  - tool_choice naming a function, or "required", makes the model call one (streaming and not);
    the call and its tool result go back, and the model answers;
  - logit_bias +100 on a token makes the sampling model emit only it.
With --model given, the default model also answers response_format json_object with a JSON object.
Exits non-zero with the reason on any failure.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from typing import Literal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import parse_e2e_args, import_openai  # noqa: E402
from openai_http_test import serving  # noqa: E402

from e2e_checks import check


def check_parse(client, model):
    from pydantic import BaseModel, Field

    class Verdict(BaseModel):
        answer: Literal["yes", "no", "maybe"]
        confidence: int = Field(ge=0, le=100)
        checked: bool

    messages = [{"role": "user", "content": "Is the sky blue? Answer as JSON."}]
    for seed in (1, 2, 3):
        completion = client.chat.completions.parse(model=model, messages=messages,
                                                   response_format=Verdict, max_tokens=120,
                                                   temperature=1.0, seed=seed)
        choice = completion.choices[0]
        check(choice.finish_reason == "stop", choice)
        check(isinstance(choice.message.parsed, Verdict), choice.message)
    with client.chat.completions.stream(model=model, messages=messages, response_format=Verdict,
                                        max_tokens=120, temperature=1.0, seed=9) as stream:
        final = stream.get_final_completion()
    check(isinstance(final.choices[0].message.parsed, Verdict), final.choices[0].message)
    print("parse() with a Pydantic model OK:", final.choices[0].message.parsed)


def check_regex_choice_grammar(client, model):
    pattern = r"[a-z]{3}-[0-9]{2,4}"
    for seed in range(4):
        text = client.completions.create(model=model, prompt="code:", max_tokens=20, seed=seed,
                                         temperature=1.0,
                                         extra_body={"guided_regex": pattern}).choices[0].text
        check(re.fullmatch(pattern, text), text)
    text = client.completions.create(  # vLLM's current field for the same
        model=model, prompt="code:", max_tokens=20, seed=9, temperature=1.0,
        extra_body={"structured_outputs": {"regex": pattern}}).choices[0].text
    check(re.fullmatch(pattern, text), text)
    choices = ["red", "green", "dark blue"]
    streamed = client.completions.create(model=model, prompt="colour:", max_tokens=10,
                                         temperature=1.0, seed=5, stream=True,
                                         extra_body={"guided_choice": choices})
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    check(text in choices, text)
    grammar = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]?'
    text = client.completions.create(model=model, prompt="sum:", max_tokens=30, seed=3,
                                     temperature=1.0,
                                     extra_body={"guided_grammar": grammar}).choices[0].text
    check(re.fullmatch(r"\([1-9][0-9]?(\+[1-9][0-9]?)*\)", text), text)
    print("guided regex / choice / grammar OK")


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "required": ["city", "unit"],
                       "properties": {"city": {"type": "string", "enum": ["Lyon", "Paris"]},
                                      "unit": {"type": "string", "enum": ["C", "F"]}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["tz"]}}},
]


def streamed_tool_calls(stream):
    """The tool calls of a streamed chat answer (deltas joined by index), and its finish."""
    calls, finish = {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
            if delta.function.name:
                entry["name"] += delta.function.name
            entry["arguments"] += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish


def check_forced_tool_round_trip(client, model):
    """tool_choice forces the random model to call: a named function, then "required"; the call
    goes back as an assistant turn with its tool result and the model answers it."""
    messages = [{"role": "user", "content": "Weather in Lyon, in Celsius?"}]
    named = {"type": "function", "function": {"name": "get_weather"}}
    answer = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                            tool_choice=named, max_tokens=60, temperature=1.0,
                                            seed=2)
    choice = answer.choices[0]
    check(choice.finish_reason == "tool_calls", choice)
    call = choice.message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    check(call.function.name == "get_weather" and arguments["city"] in ("Lyon", "Paris"), call)
    streamed, finish = streamed_tool_calls(client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, tool_choice=named, max_tokens=60,
        temperature=1.0, seed=2, stream=True))
    check(finish == "tool_calls", finish)
    check(streamed == [{"name": "get_weather", "arguments": call.function.arguments}], streamed)
    required = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                              tool_choice="required", parallel_tool_calls=False,
                                              max_tokens=60, temperature=1.0, seed=5)
    calls = required.choices[0].message.tool_calls
    check(required.choices[0].finish_reason == "tool_calls", required.choices[0])
    check(len(calls) == 1 and calls[0].function.name in ("get_weather", "get_time"), calls)
    json.loads(calls[0].function.arguments)
    follow_up = messages + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "light rain, 11 C"}]
    for stream in (False, True):
        final = client.chat.completions.create(model=model, messages=follow_up, tools=TOOLS,
                                               tool_choice="none", max_tokens=8, seed=3,
                                               stream=stream)
        if stream:
            final = list(final)
            check(final[-1].choices[0].finish_reason in ("stop", "length"), final[-1])
        else:
            check(final.choices[0].finish_reason in ("stop", "length"), final.choices[0])
            check(final.choices[0].message.tool_calls is None, final.choices[0])
    print("forced tool-call round trip OK:", call.function.arguments)


def check_logit_bias(client, model):
    """logit_bias +100 on one token: a sampling (temperature 1) random model emits only it."""
    answer = client.completions.create(model=model, prompt="go", max_tokens=5, temperature=1.0,
                                       seed=1, logprobs=0, logit_bias={"100": 100})
    tokens = answer.choices[0].logprobs.tokens
    check(len(tokens) == 5 and len(set(tokens)) == 1, tokens)
    free = client.completions.create(model=model, prompt="go", max_tokens=5, temperature=1.0,
                                     seed=1, logprobs=0)
    check(free.choices[0].logprobs.tokens != tokens, free.choices[0].logprobs.tokens)
    print("logit_bias OK:", tokens)


def check_errors(client, openai, model):
    def expect_400(param, **kwargs):
        try:
            client.completions.create(model=model, prompt="x", max_tokens=4, **kwargs)
        except openai.BadRequestError as error:
            check(error.body["param"] == param, error.body)
            return error.body["message"]
        raise AssertionError(f"accepted: {kwargs}")

    message = expect_400("response_format", extra_body={
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "x", "schema": {"type": 12}}}})
    check("invalid" in message, message)
    expect_400("guided_regex", extra_body={"guided_regex": "a(b"})
    expect_400("guided_grammar", extra_body={"guided_grammar": "root ::= missing_rule"})
    expect_400("guided_choice", extra_body={"guided_choice": []})
    expect_400("guided_choice", extra_body={"guided_choice": ["a"], "guided_regex": "a"})
    print("invalid constraints refused OK")


def check_mixed_batch(client, model):
    """A guided and an unguided request at once: both finish; only one is constrained."""
    results = {}

    def run(name, extra):
        results[name] = client.completions.create(model=model, prompt="go", max_tokens=16,
                                                  temperature=1.0, seed=4, extra_body=extra)

    threads = [threading.Thread(target=run, args=("guided", {"guided_regex": "[0-9]{6}"})),
               threading.Thread(target=run, args=("free", {}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(re.fullmatch("[0-9]{6}", results["guided"].choices[0].text), results["guided"])
    check(results["free"].usage.completion_tokens >= 1, results["free"])
    print("guided next to unguided OK")


def check_json_object(client, model):
    answer = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_object"}, max_tokens=200, temperature=0)
    content = answer.choices[0].message.content
    check(answer.choices[0].finish_reason == "stop", answer.choices[0])
    check(isinstance(json.loads(content), dict), content)
    print("json_object on the default model OK:", content)


def main():
    args = parse_e2e_args()
    openai = import_openai()
    with tempfile.TemporaryDirectory() as work:
        tiny = os.path.join(work, "tiny.gguf")
        subprocess.run([os.path.join(args.bin_dir, "tessera-make-tiny-model"), "--out", tiny,
                        "--context", "1024", "--seed", "7"], check=True)
        with serving(args.bin_dir, tiny, openai, max_num_seqs=4) as (client, model, _):
            check_parse(client, model)
            check_regex_choice_grammar(client, model)
            check_forced_tool_round_trip(client, model)
            check_logit_bias(client, model)
            check_errors(client, openai, model)
            check_mixed_batch(client, model)
        with serving(args.bin_dir, args.model, openai, max_num_seqs=1) as (client, model, _):
            check_json_object(client, model)
    print("structured outputs OK")


if __name__ == "__main__":
    main()
