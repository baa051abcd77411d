#!/usr/bin/env python3
"""Renders every chat template in tests/data/chat/*.jinja with every conversation of
tests/data/chat/jinja_conversations.json using Python's jinja2 configured as Hugging Face's
apply_chat_template configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, tojson as json.dumps(ensure_ascii=False), raise_exception, strftime_now), and
writes tests/data/chat/jinja_reference.json: per template and case the text, or the error.
strftime_now is pinned to 2026-11-26 so the references do not depend on the day.

Usage: python3 tools/oracle/jinja_reference.py   (jinja2==3.1.6, tools/oracle/requirements.txt)
"""
import datetime
import glob
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "chat")
PINNED_NOW = datetime.datetime(2026, 11, 26, 9, 30, 0)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: PINNED_NOW.strftime(fmt)
    return env


def main():
    with open(os.path.join(DATA, "jinja_conversations.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    env = environment()
    out = {"generator": "tools/oracle/jinja_reference.py", "jinja2": jinja2.__version__,
           "templates": {}}
    for path in sorted(glob.glob(os.path.join(DATA, "*.jinja"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            template = env.from_string(f.read())
        results = {}
        for case in cases:
            context = {"messages": case["messages"], "bos_token": "<s>", "eos_token": "</s>",
                       "add_generation_prompt": case["add_generation_prompt"]}
            if "tools" in case:
                context["tools"] = case["tools"]
            context.update(case.get("kwargs", {}))
            try:
                results[case["name"]] = {"ok": True, "text": template.render(**context)}
            except Exception as e:  # the template refused the conversation (or failed)
                results[case["name"]] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out["templates"][name] = results
    with open(os.path.join(DATA, "jinja_reference.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
