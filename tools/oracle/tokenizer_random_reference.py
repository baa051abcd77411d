#!/usr/bin/env python3
"""Writes thousands of random and mixed texts with the ids HF `tokenizers` gives them.

The texts are drawn from a seeded generator (the same seed gives the same file): code, Unicode
from many scripts (CJK, Cyrillic, Arabic, Devanagari, emoji, combining marks, ZWJ sequences),
digit runs, whitespace runs (spaces, tabs, newlines, CR LF, NBSP, ideographic space), the
tokenizer's special tokens whole and mangled, English words, random printable ASCII, and mixes of
all of them. Each text is encoded by HF `tokenizers` loading the committed
tests/data/tokenizer/smollm2_hf/tokenizer.json (an implementation tessera shares no code with),
with add_special_tokens=False, once parsing special tokens and once treating them as text.

Writes tests/data/tokenizer/smollm2_random.jsonl, one JSON object a line: a header
{"generator", "seed", "count", "versions", "format"}, then per text {"t": text, "i": ids} plus
"n": ids-without-special-parsing when those differ from "i". Checked by
tests/unit/tokenizer/tokenizer_random_oracle_test.cc.

Usage (venv from tools/oracle/README.md; only `tokenizers` is needed):
  python tools/oracle/tokenizer_random_reference.py [--count 3000] [--seed 18]
"""

import argparse
import importlib.metadata
import json
import pathlib
import platform
import random

from tokenizers import Tokenizer

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "tokenizer"

# Unicode blocks to draw from (inclusive code point ranges), by script.
UNICODE_RANGES = [
    (0x00A1, 0x00FF),    # Latin-1 punctuation and letters
    (0x0100, 0x017F),    # Latin Extended-A
    (0x0370, 0x03FF),    # Greek
    (0x0400, 0x04FF),    # Cyrillic
    (0x0590, 0x05FF),    # Hebrew
    (0x0600, 0x06FF),    # Arabic
    (0x0900, 0x097F),    # Devanagari
    (0x0E00, 0x0E7F),    # Thai
    (0x2000, 0x206F),    # General punctuation (incl. zero-width and directional marks)
    (0x2190, 0x23FF),    # arrows, math, technical symbols
    (0x3040, 0x30FF),    # Hiragana, Katakana
    (0x4E00, 0x9FFF),    # CJK ideographs
    (0xAC00, 0xD7A3),    # Hangul syllables
    (0x1F300, 0x1FAFF),  # emoji and pictographs
    (0x10000, 0x1007F),  # Linear B (rare 4-byte UTF-8)
]
COMBINING = (0x0300, 0x036F)
WHITESPACE = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\v",
              "\f"]
WORDS = ("the of and to in is you that it he was for on are as with his they at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could "
         "people my than first water been call who oil its now find long down day did get come "
         "made may part over new sound take only little work know place year live me back give "
         "most very after thing our just name good sentence man think say great where help "
         "through much before line right too mean old any same tell boy follow came want show "
         "Hello World Python tessera SmolLM don't I'm we've they'll it's O'Neil e-mail "
         "état naïve café Straße Ελληνικά русский 日本語 中文 한국어").split()
CODE = [
    "def {f}({a}, {b}):\n    return {a} * {b} + {n}\n",
    "for (int {a} = 0; {a} < {n}; ++{a}) {{\n\t{f}[{a}] = {b};\n}}\n",
    "if ({a} != nullptr && {a}->{f}() >= {n}) return;",
    "{{\"{f}\": [{n}, {n}.5, -{n}e-3], \"{a}\": null, \"{b}\": true}}",
    "SELECT {a}, COUNT(*) FROM {f} WHERE {b} > {n} GROUP BY {a};",
    "#include <{f}.h>\n#define {a}_{b} 0x{n:X}\n",
    "  {f} = lambda {a}: [{a}**2 for {a} in range({n})]",
    "$ ls -la /usr/{f} | grep '{a}' && echo \"${{{b}}}\"",
    "<div class=\"{f}\">{a} &amp; {b}</div>",
    "fn {f}<'a>(&'a self, {a}: u{n}) -> Option<&'a str> {{ None }}",
    "x := map[string]int{{\"{a}\": {n}}} // {f}",
    "    ///  {f}::{a}  ->  {b}\n",
]
IDENTIFIERS = ["x", "y", "i", "foo", "bar", "data", "self", "_tmp", "camelCase", "snake_case",
               "CONSTANT", "Σ", "名前", "value2", "__init__"]


def random_unicode(rng, length):
    out = []
    for _ in range(length):
        lo, hi = rng.choice(UNICODE_RANGES)
        out.append(chr(rng.randint(lo, hi)))
        if rng.random() < 0.1:
            out.append(chr(rng.randint(*COMBINING)))
        if rng.random() < 0.05:
            out.append("\u200d")  # zero-width joiner
    return "".join(out)


def digits(rng):
    kind = rng.randrange(5)
    run = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
    if kind == 0:
        return run
    if kind == 1:
        return f"{run}.{rng.randint(0, 99999)}"
    if kind == 2:
        return f"{rng.randint(1, 999)},{rng.randint(0, 999):03d},{rng.randint(0, 999):03d}"
    if kind == 3:
        return f"-{run}e{rng.randint(-30, 30)}"
    return f"{rng.randint(1, 31)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)}"


def whitespace(rng):
    return "".join(rng.choice(WHITESPACE) * rng.randint(1, 3) for _ in range(rng.randint(1, 5)))


def special(rng, specials):
    token = rng.choice(specials)
    kind = rng.randrange(4)
    if kind == 0:
        return token
    if kind == 1:  # cut short: must not match
        return token[: rng.randint(1, len(token) - 1)]
    if kind == 2:  # glued to text on both sides
        return rng.choice(WORDS) + token + rng.choice(WORDS)
    return token + token  # back to back


def code(rng):
    template = rng.choice(CODE)
    a, b, f = (rng.choice(IDENTIFIERS) for _ in range(3))
    return template.format(a=a, b=b, f=f, n=rng.randint(0, 100000))


def words(rng):
    sep = rng.choice([" ", " ", " ", "", "  ", "\n", ", ", ". ", "-", "_"])
    picked = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
    if rng.random() < 0.3:
        picked = [w.upper() if rng.random() < 0.5 else w.capitalize() for w in picked]
    return sep.join(picked)


def ascii_noise(rng):
    return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 40)))


def make_text(rng, specials):
    pieces = {
        "code": lambda: code(rng),
        "unicode": lambda: random_unicode(rng, rng.randint(1, 16)),
        "digits": lambda: digits(rng),
        "whitespace": lambda: whitespace(rng),
        "special": lambda: special(rng, specials),
        "words": lambda: words(rng),
        "ascii": lambda: ascii_noise(rng),
    }
    names = list(pieces)
    if rng.random() < 0.3:  # a single kind, to cover each one alone
        return pieces[rng.choice(names)]()
    return "".join(pieces[rng.choice(names)]() for _ in range(rng.randint(2, 5)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--out", default=str(DATA / "smollm2_random.jsonl"))
    args = parser.parse_args()

    tok = Tokenizer.from_file(str(DATA / "smollm2_hf" / "tokenizer.json"))
    specials = sorted(t.content for t in tok.get_added_tokens_decoder().values() if t.special)
    rng = random.Random(args.seed)
    texts = []
    seen = set()
    while len(texts) < args.count:
        text = make_text(rng, specials)
        if text and text not in seen:
            seen.add(text)
            texts.append(text)

    lines = [json.dumps({
        "generator": "tools/oracle/tokenizer_random_reference.py",
        "seed": args.seed,
        "count": len(texts),
        "versions": {"python": platform.python_version(),
                     "tokenizers": importlib.metadata.version("tokenizers")},
        "format": "one object a line: t = text, i = ids (special tokens parsed), n = ids with "
                  "special tokens as text (only when different from i); add_special_tokens=False",
    }, ensure_ascii=False)]
    for text in texts:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        plain = tok.encode(text, add_special_tokens=False).ids
        case = {"t": text, "i": ids}
        if plain != ids:
            case["n"] = plain
        lines.append(json.dumps(case, ensure_ascii=False, separators=(",", ":")))
    out = pathlib.Path(args.out)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(texts)} texts to {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
