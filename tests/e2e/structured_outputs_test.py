#!/usr/bin/env python3
"""End-to-end structured outputs: the real `openai` client (.venv-e2e) against `tessera serve`
on a tiny RANDOM model (tessera-make-tiny-model): its unconstrained text is noise, so every
well-formed answer below is the grammar's token masks at work, not the model.

  - client.chat.completions.parse() with a Pydantic model (response_format json_schema) returns
    a valid object, streaming and not;
  - guided_regex output matches its regex; guided_choice is one of the choices (streamed);
  - guided_grammar (EBNF) output is a sentence of the grammar;
  - an invalid schema, regex or grammar is a 400 naming the request's field; two constraints at
    once are refused;
  - an unguided request next to guided ones still runs (and is not constrained).
With --model given, the default model also answers response_format json_object with a JSON object.
Exits non-zero with the reason on any failure.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Literal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import parse_e2e_args, import_openai  # noqa: E402
from openai_http_test import start_serve_with  # noqa: E402


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
        assert choice.finish_reason == "stop", choice
        assert isinstance(choice.message.parsed, Verdict), choice.message
    with client.chat.completions.stream(model=model, messages=messages, response_format=Verdict,
                                        max_tokens=120, temperature=1.0, seed=9) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Verdict), final.choices[0].message
    print("parse() with a Pydantic model OK:", final.choices[0].message.parsed)


def check_regex_choice_grammar(client, model):
    pattern = r"[a-z]{3}-[0-9]{2,4}"
    for seed in range(4):
        text = client.completions.create(model=model, prompt="code:", max_tokens=20, seed=seed,
                                         temperature=1.0,
                                         extra_body={"guided_regex": pattern}).choices[0].text
        assert re.fullmatch(pattern, text), text
    choices = ["red", "green", "dark blue"]
    streamed = client.completions.create(model=model, prompt="colour:", max_tokens=10,
                                         temperature=1.0, seed=5, stream=True,
                                         extra_body={"guided_choice": choices})
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text in choices, text
    grammar = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]?'
    text = client.completions.create(model=model, prompt="sum:", max_tokens=30, seed=3,
                                     temperature=1.0,
                                     extra_body={"guided_grammar": grammar}).choices[0].text
    assert re.fullmatch(r"\([1-9][0-9]?(\+[1-9][0-9]?)*\)", text), text
    print("guided regex / choice / grammar OK")


def check_errors(client, openai, model):
    def expect_400(param, **kwargs):
        try:
            client.completions.create(model=model, prompt="x", max_tokens=4, **kwargs)
        except openai.BadRequestError as error:
            assert error.body["param"] == param, error.body
            return error.body["message"]
        raise AssertionError(f"accepted: {kwargs}")

    message = expect_400("response_format", extra_body={
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "x", "schema": {"type": 12}}}})
    assert "invalid" in message, message
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
    assert re.fullmatch("[0-9]{6}", results["guided"].choices[0].text), results["guided"]
    assert results["free"].usage.completion_tokens >= 1, results["free"]
    print("guided next to unguided OK")


def check_json_object(client, model):
    answer = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_object"}, max_tokens=200, temperature=0)
    content = answer.choices[0].message.content
    assert answer.choices[0].finish_reason == "stop", answer.choices[0]
    assert isinstance(json.loads(content), dict), content
    print("json_object on the default model OK:", content)


def main():
    args = parse_e2e_args()
    openai = import_openai()
    with tempfile.TemporaryDirectory() as work:
        tiny = os.path.join(work, "tiny.gguf")
        subprocess.run([os.path.join(args.bin_dir, "tessera-make-tiny-model"), "--out", tiny,
                        "--context", "1024", "--seed", "7"], check=True)
        for model_path, checks in ((tiny, "tiny"), (args.model, "default")):
            serve, _, http_addr = start_serve_with(args.bin_dir, model_path, max_num_seqs=4)
            try:
                client = openai.OpenAI(base_url=f"http://{http_addr}/v1", api_key="unused",
                                       max_retries=0, timeout=120)
                model = client.models.list().data[0].id
                if checks == "tiny":
                    check_parse(client, model)
                    check_regex_choice_grammar(client, model)
                    check_errors(client, openai, model)
                    check_mixed_batch(client, model)
                else:
                    check_json_object(client, model)
            finally:
                serve.send_signal(signal.SIGTERM)
                code = serve.wait(timeout=90)
            assert code == 0, f"tessera serve exited with {code}"
    print("structured outputs OK")


if __name__ == "__main__":
    main()
