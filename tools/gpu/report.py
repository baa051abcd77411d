#!/usr/bin/env python3
"""Turns a validate.sh output directory into report.md and report.json (DESIGN.md §13).

  report.py OUT_DIR            write OUT_DIR/report.md and OUT_DIR/report.json
  report.py --copy-gbs OUT_DIR print the measured copy bandwidth in GB/s (0 when unmeasured)

Every number is printed next to the bound it is compared with: kernels and decode steps against
the measured device-to-device copy bandwidth (bytes read + written per second), GEMM-bound work
against the measured cuBLAS bf16 rate. Standard library only (runs under any python3)."""
import glob
import json
import os
import re
import sys

VLLM_BATCH1_HBM_FRACTION = 0.74  # vLLM, 8B bf16 batch-1 decode on H100 (issue 22)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def log_tail(out, name, lines=3):
    """The last lines of logs/NAME, as one line (why a step produced nothing)."""
    text = read(os.path.join(out, "logs", name)).strip().splitlines()[-lines:]
    return " / ".join(l.strip() for l in text)[:600] or "(no log)"


def benchmarks(path):
    doc = load_json(path) or {}
    return {b["name"]: b for b in doc.get("benchmarks", [])}


def ceilings(out):
    marks = benchmarks(os.path.join(out, "bench", "ceilings.json"))
    copy = next((b for n, b in marks.items() if n.startswith("BM_CopyBandwidth")), None)
    gemm = next((b for n, b in marks.items() if n.startswith("BM_GemmBf16/8192")), None)
    return {
        "copy_gbs": copy["bytes_per_second"] / 1e9 if copy else 0.0,
        "gemm_bf16_tflops": gemm.get("TFLOP/s", 0.0) if gemm else 0.0,
    }


def test_results(out):
    """Per test binary: passed, failed and skipped cases (a skip counts as a failure here)."""
    codes = {}
    for line in read(os.path.join(out, "tests", "exit_codes.txt")).splitlines():
        name, code = line.split()
        codes[name] = int(code)
    # A binary listed but never finished ran out of the step's time: a failure too.
    for name in read(os.path.join(out, "tests", "binaries.txt")).split():
        codes.setdefault(name, None)
    results = []
    for name in sorted(codes):
        if codes[name] is None:
            results.append({"binary": name, "exit_code": "not run", "passed": 0,
                            "failed": ["not run: the tests step ran out of time"],
                            "skipped": []})
            continue
        doc = load_json(os.path.join(out, "tests", name + ".json"))
        entry = {"binary": name, "exit_code": codes[name], "passed": 0, "failed": [],
                 "skipped": []}
        if doc is None:
            tail = read(os.path.join(out, "logs", "test-%s.txt" % name))[-600:]
            entry["failed"].append("no result file (crashed or timed out): " + tail.strip())
        else:
            for suite in doc.get("testsuites", []):
                for case in suite.get("testsuite", []):
                    full = "%s.%s" % (suite["name"], case["name"])
                    if case.get("failures"):
                        entry["failed"].append(
                            full + ": " + case["failures"][0].get("failure", "")[:300])
                    elif case.get("result") == "SKIPPED":
                        entry["skipped"].append(full)
                    else:
                        entry["passed"] += 1
            if codes[name] != 0 and not entry["failed"] and not entry["skipped"]:
                entry["failed"].append("exit code %d" % codes[name])
        results.append(entry)
    return results


def sanitizer_results(out):
    results = []
    unavailable = read(os.path.join(out, "tests", "sanitizer_unavailable.txt")).strip()
    for line in read(os.path.join(out, "tests", "sanitizer_codes.txt")).splitlines():
        tool, name, code = line.split()
        log = read(os.path.join(out, "logs", "sanitizer-%s-%s.txt" % (tool, name)))
        # memcheck ends with "ERROR SUMMARY: N errors", racecheck with
        # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
        summary = re.search(r"ERROR SUMMARY: (\d+) error", log) or \
            re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", log)
        if "Device not supported" in log or "not supported on this" in log:
            verdict = "tool unavailable on this machine: " + log.strip().splitlines()[0][:200]
        elif code == "124":
            verdict = "timed out (no verdict)"
        elif summary:
            if summary.group(1) == "0" and code == "0":
                verdict = "clean"
            elif summary.group(1) == "0":
                verdict = "no sanitizer errors, but the program exited %s" % code
            else:
                verdict = "%s errors" % summary.group(1)
        else:
            verdict = "exit %s, no summary: %s" % (code, log.strip()[-200:])
        results.append({"tool": tool, "binary": name, "verdict": verdict})
    return {"unavailable": unavailable, "runs": results}


def table(rows, columns):
    if not rows:
        return "(none)\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def fmt(value):
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)


def decode_results(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "bench", "decode-*.json"))):
        shape = os.path.basename(path)[len("decode-"):-len(".json")]
        runs[shape] = load_json(path)
    codes = read(os.path.join(out, "bench", "decode_codes.txt"))
    return {"runs": runs, "exit_codes": codes}


def rows_of(doc, key):
    if isinstance(doc, dict):
        value = doc.get(key, [])
        return value if isinstance(value, list) else []
    return []


# The runner bench's fields in reading order; anything else follows.
PREFERRED_COLUMNS = ["batch", "context", "tokens", "skipped", "step_ms", "ms", "device_ms",
                     "hostproc_ms", "input_ms", "graph_replays", "steps", "chunks",
                     "bytes_per_step", "weight_bytes", "kv_bytes", "gbs", "copy_fraction",
                     "tokens_per_s", "matrix_tflops", "of_gemm"]


def columns_of(rows):
    present = {key for row in rows for key in row if not isinstance(row[key], (list, dict))}
    columns = [c for c in PREFERRED_COLUMNS if c in present]
    for row in rows:
        for key in row:
            if key not in columns and not isinstance(row[key], (list, dict)):
                columns.append(key)
    return columns


def with_prefill_rate(row, setup, gemm_tflops):
    """A prefill row with its matrix FLOP rate: 2 x parameters x tokens (bf16 weights: bytes / 2;
    attention's FLOPs left out) over its time, and that as a fraction of the GEMM ceiling."""
    row = dict(row)
    params = setup.get("weights_bytes", 0) / 2.0
    if row.get("ms"):
        row["matrix_tflops"] = 2.0 * params * row.get("tokens", 0) / (row["ms"] * 1e-3) / 1e12
        if gemm_tflops:
            row["of_gemm"] = row["matrix_tflops"] / gemm_tflops
    return row


def kernel_rows(out):
    rows = []
    for name, b in benchmarks(os.path.join(out, "bench", "kernels.json")).items():
        rows.append({"kernel": name, "time_us": b.get("real_time", 0.0),
                     "GB/s": b.get("bytes_per_second", 0.0) / 1e9,
                     "of_copy_bw": b.get("of_copy_bw", ""),
                     "TFLOP/s": b.get("TFLOP/s", "")})
    return rows


def serving_results(out):
    levels = []
    for path in sorted(glob.glob(os.path.join(out, "bench", "serving-*.json"))):
        doc = load_json(path) or {}
        run = os.path.basename(path)[len("serving-"):-len(".json")]
        for level in doc.get("levels", []):
            ms = lambda s, q: (s or {}).get(q) and (s or {}).get(q) * 1e3
            levels.append({"run": run, "concurrency": level.get("concurrency"),
                           "requests": level.get("requests"), "errors": level.get("errors"),
                           "output_tok/s": level.get("output_tok_s"),
                           "ttft_p50_ms": ms(level.get("ttft_s"), "p50"),
                           "ttft_p99_ms": ms(level.get("ttft_s"), "p99"),
                           "itl_p50_ms": ms(level.get("itl_s"), "p50"),
                           "itl_p99_ms": ms(level.get("itl_s"), "p99")})
    counters = {}
    for when in ("before", "after"):
        for line in read(os.path.join(out, "bench", "graphs-%s.txt" % when)).splitlines():
            name, _, value = line.rpartition(" ")
            counters.setdefault(name, {})[when] = float(value)
    deltas = [{"counter": n, "before": v.get("before", 0.0), "after": v.get("after", 0.0),
               "delta": v.get("after", 0.0) - v.get("before", 0.0)} for n, v in counters.items()]
    return {"levels": levels, "graph_counters": deltas,
            "exit_code": read(os.path.join(out, "bench", "serving_code.txt")).strip()}


def facts(out):
    lines = [l for l in read(os.path.join(out, "facts.csv")).splitlines() if l.strip()]
    if len(lines) < 2:
        return {}
    keys = [k.strip() for k in lines[0].split(",")]
    values = [v.strip() for v in lines[1].split(",")]
    return dict(zip(keys, values))


def collect(out):
    return {"out": out,
            "mode": "quick" if "quick=1" in read(os.path.join(out, "mode")) else "full",
            "fatal": read(os.path.join(out, "fatal")).strip(),
            "out_of_time": read(os.path.join(out, "skipped_steps.txt")).split("\n")[:-1],
            "facts": facts(out), "manifest": read(os.path.join(out, "manifest.txt")),
            "ceilings": ceilings(out), "tests": test_results(out),
            "sanitizer": sanitizer_results(out), "decode": decode_results(out),
            "kernels": kernel_rows(out), "serving": serving_results(out)}


def markdown(r):
    f, c = r["facts"], r["ceilings"]
    md = ["# GPU validation: %s (%s run)\n" % (f.get("name", "no GPU"), r["mode"])]
    if r["fatal"]:
        md.append("**Stopped before any measurement:** %s\n" % r["fatal"])
    if r["out_of_time"]:
        md.append("**Steps skipped for lack of time:** %s\n\n" % ", ".join(r["out_of_time"]))
    md.append("\n## Device\n")
    md.append("\n".join("- %s: %s" % kv for kv in f.items()) + "\n")
    md.append("\n```\n%s\n```\n" % "\n".join(r["manifest"].splitlines()[:4]))
    md.append("\n## Ceilings (measured here)\n")
    md.append("- device-to-device copy: **%.0f GB/s** (bytes read + written per second)\n"
              % c["copy_gbs"])
    md.append("- cuBLAS bf16 GEMM 8192x8192x8192 (f32 accumulate, L2 flushed): **%.0f TFLOP/s**\n"
              % c["gemm_bf16_tflops"])
    failed = [t for t in r["tests"] if t["failed"] or t["skipped"] or t["exit_code"]]
    total = sum(t["passed"] for t in r["tests"])
    md.append("\n## Tests (a skip counts as a failure)\n")
    md.append("%d test binaries, %d cases passed, %d binaries failing\n\n" %
              (len(r["tests"]), total, len(failed)))
    md.append(table([{"binary": t["binary"], "passed": t["passed"], "failed": len(t["failed"]),
                      "skipped": len(t["skipped"]), "exit": t["exit_code"]}
                     for t in r["tests"]], ["binary", "passed", "failed", "skipped", "exit"]))
    for t in failed:
        for line in t["failed"] + ["SKIPPED " + s for s in t["skipped"]]:
            md.append("- `%s`: %s\n" % (t["binary"], line.replace("\n", " ")[:400]))
    md.append("\n## compute-sanitizer\n")
    s = r["sanitizer"]
    md.append((s["unavailable"] + "\n") if s["unavailable"] else "")
    md.append(table(s["runs"], ["tool", "binary", "verdict"]))
    md.append("\n## Decode and prefill on synthetic models (--load-format dummy)\n")
    md.append("Bound: bytes moved per step (weights + the context's K/V) / step time, as a "
              "fraction of the measured copy bandwidth; vLLM publishes ~%.0f%% of HBM "
              "bandwidth at batch-1 decode on H100 for 8B bf16.\n\n" %
              (VLLM_BATCH1_HBM_FRACTION * 100))
    for shape, doc in r["decode"]["runs"].items():
        setup = doc.get("setup", {}) if isinstance(doc, dict) else {}
        md.append("`%s`: %s\n\n" % (shape, setup.get("description", "no result")))
        for key in ("decode", "prefill"):
            rows = rows_of(doc, key)
            if key == "prefill":
                rows = [with_prefill_rate(row, setup, c["gemm_bf16_tflops"]) for row in rows]
            if rows:
                md.append("### %s: %s\n\n" % (shape, key))
                md.append(table(rows, columns_of(rows)) + "\n")
    for line in r["decode"]["exit_codes"].splitlines():
        shape, code = line.split()
        if code != "0":
            md.append("- `%s` exited %s: %s\n" % (shape, code,
                                                 log_tail(r["out"], "decode-%s.txt" % shape)))
    md.append("\n## Kernels (L2 flushed between iterations)\n")
    md.append(table(r["kernels"], ["kernel", "time_us", "GB/s", "of_copy_bw", "TFLOP/s"]))
    if not r["kernels"] and r["mode"] == "full":
        md.append("kernel bench: %s\n" % log_tail(r["out"], "kernels.txt"))
    md.append("\n## Serving: tessera serve --device cuda, synthetic Qwen2.5-1.5B shape\n")
    sv = r["serving"]
    md.append(table(sv["levels"], ["run", "concurrency", "requests", "errors", "output_tok/s",
                                   "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"]))
    if sv["exit_code"] not in ("", "0"):
        md.append("serving exited %s: %s\n" % (sv["exit_code"], log_tail(r["out"], "serving.txt")))
    md.append("\nWorker graph counters around the staggered run:\n\n")
    md.append(table(sv["graph_counters"], ["counter", "before", "after", "delta"]))
    return "".join(md)


def main(argv):
    if len(argv) == 3 and argv[1] == "--copy-gbs":
        print("%.1f" % ceilings(argv[2])["copy_gbs"])
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    report = collect(out)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))
    print(os.path.join(out, "report.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
