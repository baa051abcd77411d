"""Writes tests/data/tokenizer/corpus.json: the texts the tokenizer oracle covers.

Hand-picked cases (prose, code, numbers, whitespace runs, scripts, emoji, special tokens, ...) plus
a few hundred characters of deterministic pseudo-random Unicode. Edit the list, rerun this, then
rerun tokenizer_reference.py to regenerate the reference ids.
"""
import json
import pathlib
import random

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "tokenizer" / "corpus.json"
rng = random.Random(20240601)
corpus = [
    "",
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "#include <vector>\n\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (int x : v) {\n\t\tif (x > 1) { return x; }\n\t}\n\treturn 0;\n}\n",
    "1234567 3.14159 1,000,000 -42 +7 0.001 1e-9 0x1F",
    "Dates: 2024-01-15, 15/01/2024, Jan 15th 2024, 12:30:45.",
    "two  spaces, three   spaces, eight        spaces",
    "trailing spaces   ",
    "   leading spaces",
    " ",
    "        ",
    "\n",
    "line one\nline two\n\n\nline five",
    "windows\r\nline endings\r\n",
    "mixed \n  \n\t\n   end",
    "tab\tseparated\tvalues\t\t1\t2",
    "café naïve Ångström résumé coöperate façade",
    "中文分词测试，这是一个句子。",
    "日本語のテキストです。カタカナとひらがな。",
    "한국어 텍스트 예시입니다.",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🚀",
    "ZWJ family: 👨‍👩‍👧‍👦 and 🏳️‍🌈 and flags 🇺🇸🇯🇵🇩🇪",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n",
    "text<|endoftext|>more text<|im_end|>",
    "not special: <|im_start and im_end|> and <|unknown|>",
    "don't I'LL it's we've they're she'd you'RE I'm",
    "'s 't 're ''quoted'' '",
    "!!! ??? ... --- *** ;;; ::: ((( ))) [[[ ]]] {{{ }}}",
    "Wait... what?! No way!!! (really?) [yes] {ok}",
    "mixed scripts: Hello мир 世界 عالم שלום κόσμος",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "עברית: שלום עולם, מה שלומך?",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0351\u0337\u0322a\u035b\u0360l\u0327g\u035co",
    "NFC vs NFD: \u00e9 vs e\u0301, \u00c5 vs A\u030a",
    "math: ∑_{i=1}^{n} i² = n(n+1)/2, √2 ≈ 1.414, ∞ ≠ 0, α β γ",
    "currency: $100 €50 £30 ¥1000 ₹500 ₿0.01",
    "URL https://example.com/path?query=1&b=2#frag and email user@example.org",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "json: {\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "unicode spaces:\u00a0nbsp\u2003em\u3000ideographic\u2009thin",
    "NEL\u0085next line and \u2028line separator \u2029para sep",
    "control chars: \x01\x02\x1b[31mred\x1b[0m \x7f",
    "fullwidth: ＡＢＣ１２３！ halfwidth: ｱｲｳ",
    "superscript ¹²³ fractions ½ ¾ roman Ⅻ circled ① ②",
    "a" * 300,
    "ab" * 50 + " " + "xyz" * 40,
    "1" * 40 + " " + "9876543210" * 5,
    "=" * 80 + "\n" + "-" * 40,
    "      \n\n      \n",
    "end with newline\n\n",
    "I'm here.\nYou're there.\n\nWe've been everywhere!",
    ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
     "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
     "laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in "
     "voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat "
     "non proident, sunt in culpa qui officia deserunt mollit anim id est laborum. The 3 quick brown "
     "foxes (aged 12, 7 and 2) jumped over 1,234 lazy dogs in 2023; nobody knows why they did it."),
    "<|endoftext|>",
    "<|im_start|><|im_end|><|im_start|>",
    "<repo_name>tessera<file_sep>main.cc<filename>x.py",
    "Python:\n```python\nimport numpy as np\nx = np.array([1, 2, 3])\nprint(x.sum())\n```\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "shell: ls -la | grep '\\.cc$' && echo \"done\" > /dev/null 2>&1",
    "Thai: สวัสดีครับ Hindi: नमस्ते दुनिया Greek: Γειά σου",
    "emoji modifiers 👋🏻👋🏼👋🏽👋🏾👋🏿 keycap 1️⃣ #️⃣",
    # Bytes SmolLM2's vocab has no symbol for (0x04, 0x13, 0x14, 0x1D; 0xF1/0xF2 lead bytes of
    # planes 4-11): HF and llama.cpp drop them.
    "dropped bytes: a\x04b \x13\x14 c\x1dd",
    "plane 4 and 8: \U00040000 \U00080000!",
    # PCRE2's \s lacks U+0085 (NEL); Oniguruma's and llama.cpp's include it.
    "x \u0085y and \u0085\u0085 z",
    "'S 'T 'RE 'Ve upper-case contractions, o'clock, rock 'n' roll",
    "123abc456 7.8.9 v1.2.3-rc4 A1B2C3",
    "ends with spaces and newline  \n  ",
]
# a few hundred chars of random-ish unicode from assorted blocks (deterministic)
ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff),
          (0x600, 0x6ff), (0x900, 0x97f), (0x3040, 0x30ff), (0x4e00, 0x4fff), (0xac00, 0xad00),
          (0x1f300, 0x1f64f), (0x2000, 0x206f), (0x300, 0x36f), (0x1d400, 0x1d4ff)]
chars = []
while len(chars) < 400:
    lo, hi = rng.choice(ranges)
    cp = rng.randint(lo, hi)
    if 0xd800 <= cp <= 0xdfff:
        continue
    chars.append(chr(cp))
    if rng.random() < 0.12:
        chars.append(rng.choice([" ", "  ", "\n", "\t", "1", "42", "'s"]))
corpus.append("".join(chars))
OUT.write_text(json.dumps(corpus, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
print(f"wrote {len(corpus)} texts to {OUT}")
