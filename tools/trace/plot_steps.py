#!/usr/bin/python3
"""Renders a tessera-router step trace (`--trace-steps FILE`, one JSON line per step) as a PNG.

Top panel: the tokens each step scheduled, stacked per request (one colour per request; prefill
chunks in a lighter, hatched shade, decode tokens in the full colour), with the request's name
where it joins the batch. Middle panel: one row per request, a cell in each step it rides in
(same colours), so a 1-token decode next to a 256-token prefill chunk is still visible.
Bottom panel: what each step cost in ms: the worker's host time and device time (stacked bars)
and the router's round trip, plan sent -> result received (line).

    plot_steps.py TRACE.jsonl -o steps.png [--title TEXT] [--first N] [--last N]
    plot_steps.py TRACE.jsonl --check [-o steps.png]

--check validates every line against the schema in router/step_trace.h, prints a summary as
key=value lines (steps, requests, mixed_steps = steps where a prefill chunk rides with another
request's decode, max_batch, ...) and, with -o, renders and checks a PNG was written. Exits 1 on
any problem, so tests can run it.

Needs matplotlib (Debian python3-matplotlib; scripts/install_deps.sh installs it).
"""
import argparse
import json
import sys
import textwrap

STEP_KEYS = ("step", "sent_s", "batch_size", "num_tokens", "num_prefill_tokens",
             "num_dropped_slots", "schedule_s", "requests", "host_s", "device_s", "sample_s",
             "total_s", "graph_replayed", "round_trip_s")
REQUEST_KEYS = ("id", "tokens", "kind", "start", "samples", "new")


class TraceError(Exception):
    pass


def read_trace(path):
    """Returns the parsed lines. A torn last line (router killed mid-write) is dropped with a
    warning; a bad line anywhere else is an error."""
    with open(path, encoding="utf-8") as f:
        raw = [line for line in f.read().split("\n") if line.strip()]
    steps = []
    for number, line in enumerate(raw, 1):
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(raw):
                print(f"plot_steps: warning: dropping a torn last line ({error})", file=sys.stderr)
                break
            raise TraceError(f"{path}:{number}: not JSON: {error}") from error
    return steps


def validate(steps):
    """Checks each line has exactly the documented keys and consistent counts."""
    for index, step in enumerate(steps, 1):
        where = f"line {index} (step {step.get('step')})"
        if tuple(step.keys()) != STEP_KEYS:
            raise TraceError(f"{where}: keys {list(step.keys())}, expected {list(STEP_KEYS)}")
        requests = step["requests"]
        if step["batch_size"] != len(requests):
            raise TraceError(f"{where}: batch_size {step['batch_size']} != {len(requests)}")
        for r in requests:
            if tuple(r.keys()) != REQUEST_KEYS:
                raise TraceError(f"{where}: request keys {list(r.keys())}")
            if r["kind"] not in ("prefill", "decode") or r["tokens"] < 1:
                raise TraceError(f"{where}: bad request entry {r}")
        if step["num_tokens"] != sum(r["tokens"] for r in requests):
            raise TraceError(f"{where}: num_tokens != sum of the requests' tokens")
        prefill = sum(r["tokens"] for r in requests if r["kind"] == "prefill")
        if step["num_prefill_tokens"] != prefill:
            raise TraceError(f"{where}: num_prefill_tokens != sum of the prefill chunks")


def is_mixed(step):
    """A prefill chunk and another request's decode in one step (a request appears at most once
    per step, so any prefill + any decode qualifies)."""
    kinds = {r["kind"] for r in step["requests"]}
    return "prefill" in kinds and "decode" in kinds


def summarize(steps):
    names = []
    for step in steps:
        for r in step["requests"]:
            if r["id"] not in names:
                names.append(r["id"])
    mixed = [i for i, s in enumerate(steps, 1) if is_mixed(s)]
    answered = [s for s in steps if s["device_s"] is not None]

    def mean_ms(key):
        values = [s[key] for s in answered]
        return round(1000 * sum(values) / len(values), 3) if values else None

    return {
        "steps": len(steps),
        "requests": len(names),
        "mixed_steps": len(mixed),
        "first_mixed_line": mixed[0] if mixed else None,
        "first_mixed_step": steps[mixed[0] - 1]["step"] if mixed else None,
        "max_batch": max((s["batch_size"] for s in steps), default=0),
        "max_tokens_per_step": max((s["num_tokens"] for s in steps), default=0),
        "prefill_tokens": sum(s["num_prefill_tokens"] for s in steps),
        "decode_tokens": sum(s["num_tokens"] - s["num_prefill_tokens"] for s in steps),
        "unanswered_steps": len(steps) - len(answered),
        "mean_device_ms": mean_ms("device_s"),
        "mean_host_ms": mean_ms("host_s"),
        "mean_round_trip_ms": mean_ms("round_trip_s"),
        "duration_s": round(steps[-1]["sent_s"] - steps[0]["sent_s"], 3) if steps else 0,
    }


def lighter(rgb, amount=0.55):
    return tuple(c + (1 - c) * amount for c in rgb[:3])


def request_colours(steps, plt):
    """One colour per request in order of first appearance (tab10, then tab20b/c)."""
    palette = (list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("tab20b").colors) +
               list(plt.get_cmap("tab20c").colors))
    colours = {}
    for step in steps:
        for r in step["requests"]:
            if r["id"] not in colours:
                colours[r["id"]] = palette[len(colours) % len(palette)]
    return colours


def stack_segments(steps):
    """Per (request, kind): x positions, heights and bottoms of its bar segments, stacked in plan
    order (running requests first, then new ones), so one bar() call draws each series."""
    segments = {}
    for x, step in enumerate(steps, 1):
        bottom = 0
        for r in step["requests"]:
            seg = segments.setdefault((r["id"], r["kind"]), ([], [], []))
            seg[0].append(x)
            seg[1].append(r["tokens"])
            seg[2].append(bottom)
            bottom += r["tokens"]
    return segments


def plot_tokens(ax, steps, colours, plt):
    from matplotlib.patches import Patch
    for (name, kind), (xs, heights, bottoms) in stack_segments(steps).items():
        prefill = kind == "prefill"
        ax.bar(xs, heights, bottom=bottoms, width=0.9, linewidth=0,
               color=lighter(colours[name]) if prefill else colours[name],
               hatch="///" if prefill else None, edgecolor=colours[name] if prefill else None)
    if len(colours) <= 40:  # label each request where it (re)joins the batch
        for x, step in enumerate(steps, 1):
            joined = " ".join(f"+{r['id']}" for r in step["requests"] if r["new"])
            if joined:
                ax.annotate(joined, (x, step["num_tokens"]), xytext=(0, 2),
                            textcoords="offset points", rotation=90, fontsize=7, ha="center",
                            va="bottom")
    handles = [Patch(color=colours[n], label=str(n)) for n in list(colours)[:30]]
    if len(colours) > 30:
        handles.append(Patch(color="white", label=f"+{len(colours) - 30} more"))
    handles.append(Patch(facecolor=lighter((0.3, 0.3, 0.3)), hatch="///", edgecolor="0.3",
                         label="prefill chunk"))
    handles.append(Patch(color="0.3", label="decode"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              title="request", title_fontsize=8, frameon=False)
    ax.set_ylabel("scheduled tokens")
    # Headroom above the tallest bar for the rotated "+name" labels.
    ax.set_ylim(0, 1.5 * max(max(s["num_tokens"] for s in steps), 1))


def plot_membership(ax, steps, colours):
    """One row per request, one cell per step it is in: who rides in each batch, even where a
    1-token decode is too thin to see next to a prefill chunk in the token panel."""
    rows = {name: row for row, name in enumerate(colours)}
    cells = {}
    for x, step in enumerate(steps, 1):
        for r in step["requests"]:
            cells.setdefault((r["id"], r["kind"]), []).append(x)
    for (name, kind), xs in cells.items():
        prefill = kind == "prefill"
        ax.bar(xs, 0.8, bottom=rows[name] - 0.4, width=0.9, linewidth=0,
               color=lighter(colours[name]) if prefill else colours[name],
               hatch="///" if prefill else None, edgecolor=colours[name] if prefill else None)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first request on top
    if len(rows) <= 40:
        ax.set_yticks(range(len(rows)), [str(n) for n in rows], fontsize=7)
    else:
        ax.set_yticks([])
    ax.set_ylabel("in batch")


def plot_times(ax, steps):
    xs = list(range(1, len(steps) + 1))
    answered = [(x, s) for x, s in zip(xs, steps) if s["device_s"] is not None]
    ax_x = [x for x, _ in answered]
    host = [1000 * s["host_s"] for _, s in answered]
    device = [1000 * s["device_s"] for _, s in answered]
    ax.bar(ax_x, host, width=0.9, linewidth=0, color="0.72", label="worker host")
    ax.bar(ax_x, device, bottom=host, width=0.9, linewidth=0, color="0.35",
           label="worker device")
    round_trip = [1000 * s["round_trip_s"] for _, s in answered]
    ax.plot(ax_x, round_trip, color="tab:red", linewidth=0.8, markersize=3,
            marker="." if len(steps) <= 200 else None, label="router round trip")
    ax.set_ylabel("step time (ms)")
    ax.set_xlabel("step")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def render(steps, out, title):
    try:
        import matplotlib
    except ImportError as error:
        raise TraceError("matplotlib is missing: install Debian's python3-matplotlib "
                         "(scripts/install_deps.sh) and run with /usr/bin/python3") from error
    matplotlib.use("Agg")  # headless: no display on CI machines
    import matplotlib.pyplot as plt
    width = min(24.0, max(9.0, 0.09 * len(steps) + 4))
    colours = request_colours(steps, plt)
    member_height = min(3.0, 0.6 + 0.18 * len(colours))
    fig, (top, middle, bottom) = plt.subplots(
        3, 1, sharex=True, figsize=(width, 7.5 + member_height),
        gridspec_kw={"height_ratios": [3, member_height, 2]})
    plot_tokens(top, steps, colours, plt)
    plot_membership(middle, steps, colours)
    plot_times(bottom, steps)
    bottom.set_xlim(0.4, len(steps) + 0.6)
    # Bars sit at trace order (1..N); ticks show the protocol's step numbers, which differ in a
    # trimmed trace or after a worker reconnect.
    from matplotlib.ticker import FuncFormatter, MaxNLocator
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: str(steps[int(x) - 1]["step"]) if 1 <= int(x) <= len(steps) else ""))
    top.set_title("\n".join(textwrap.wrap(title, int(11 * width), break_on_hyphens=False)), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def check_png(path):
    with open(path, "rb") as f:
        head = f.read(8)
        size = len(head) + len(f.read())
    if head != b"\x89PNG\r\n\x1a\n" or size < 1000:
        raise TraceError(f"{path}: not a PNG (or empty)")
    return size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="JSONL written by tessera-router --trace-steps")
    parser.add_argument("-o", "--out", help="PNG to write")
    parser.add_argument("--check", action="store_true",
                        help="validate, print a key=value summary, verify the PNG")
    parser.add_argument("--min-mixed-steps", type=int, default=0,
                        help="with --check: fail unless at least this many mixed steps")
    parser.add_argument("--title", help="plot title (default: the file and its summary)")
    parser.add_argument("--first", type=int, default=1, help="first line to plot (1-based)")
    parser.add_argument("--last", type=int, help="last line to plot (inclusive)")
    args = parser.parse_args()
    if not args.out and not args.check:
        parser.error("nothing to do: give -o OUT.png and/or --check")
    try:
        steps = read_trace(args.trace)
        validate(steps)
        steps = steps[args.first - 1:args.last]
        if not steps:
            raise TraceError(f"{args.trace}: no steps to show")
        summary = summarize(steps)
        if args.out:
            title = args.title or (
                f"{args.trace}: {summary['steps']} steps, {summary['requests']} requests, "
                f"max batch {summary['max_batch']}, {summary['mixed_steps']} mixed steps")
            render(steps, args.out, title)
        if args.check:
            for key, value in summary.items():
                print(f"{key}={value}")
            if args.out:
                print(f"png_bytes={check_png(args.out)}")
            if summary["mixed_steps"] < args.min_mixed_steps:
                raise TraceError(f"{summary['mixed_steps']} mixed steps, expected at least "
                                 f"{args.min_mixed_steps}")
    except (OSError, TraceError) as error:
        print(f"plot_steps: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
