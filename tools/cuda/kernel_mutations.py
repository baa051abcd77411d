#!/usr/bin/env python3
"""Mutation checks for the production CUDA kernels (issue 28): each known mutation of a real
kernel (a barrier removed, a shuffle partner or mask changed, a bound off by one, a pipeline wait
one group short) is applied alone, the emulated kernel tests that cover that kernel are rebuilt
and run, and the mutation must make at least one of them fail ("killed"). The sources are always
restored (and the tests rebuilt) afterwards. Opt-in: minutes of rebuilding.

    tools/cuda/kernel_mutations.py [--build build] [--only NAME] [--write docs/testing/kernel-mutations.md]

Exit status 1 when a mutation survives or does not apply (the kernel changed: update its text).

Not listed, because no emulation can show them: the decode attention's __syncwarp before lane 0
updates the running max (the lanes read it before two warp shuffles, which the emulator, like the
hardware, completes only when every lane arrives; the barrier is there against the compiler
moving the read past the shuffles, which a CPU emulation never does).
"""
import argparse
import datetime
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# name, file, text to find (exactly once), replacement, what it breaks, test binaries.
MUTATIONS = [
    ("block-reduce-barrier", "kernels/cuda/device_math.cuh",
     "  if (lane == 0) scratch[warp] = value;\n  __syncthreads();\n",
     "  if (lane == 0) scratch[warp] = value;\n",
     "BlockReduce reads the warps' partials without the barrier",
     ["rms_norm_kernel_test", "sampling_kernel_test"]),
    ("block-reduce-reuse-barrier", "kernels/cuda/device_math.cuh",
     "  total = WarpReduce(total, op);\n  __syncthreads();  // scratch may be reused",
     "  total = WarpReduce(total, op);\n  // scratch may be reused",
     "BlockReduce returns before every warp read the scratch (a caller's next use races)",
     ["device_math_kernel_test", "rms_norm_kernel_test", "sampling_kernel_test"]),
    ("warp-reduce-partner", "kernels/cuda/device_math.cuh",
     "for (int offset = 16; offset > 0; offset >>= 1) {",
     "for (int offset = 8; offset > 0; offset >>= 1) {",
     "the butterfly skips the lanes 16 apart (a shuffle partner swapped)",
     ["rms_norm_kernel_test", "sampling_kernel_test"]),
    ("decode-score-shuffle-mask", "kernels/cuda/paged_decode_attention.cuh",
     "dot += __shfl_xor_sync(0xFFFFFFFFu, dot, offset);",
     "dot += __shfl_xor_sync(0x0000FFFFu, dot, offset);",
     "the key-dot shuffle names half the warp in its mask",
     ["paged_decode_attention_kernel_test"]),
    ("prefill-probs-syncwarp", "kernels/cuda/paged_prefill_attention.cuh",
     "  warp_probs[lane] = p;\n  __syncwarp();\n", "  warp_probs[lane] = p;\n",
     "lanes read the tile's probabilities before every lane wrote its own",
     ["paged_prefill_attention_kernel_test"]),
    ("decode-scores-barrier", "kernels/cuda/paged_decode_attention.cuh",
     "                                         scores);\n    __syncthreads();\n",
     "                                         scores);\n",
     "the softmax reads a stage's scores before every warp wrote them",
     ["paged_decode_attention_kernel_test"]),
    ("decode-last-stage", "kernels/cuda/paged_decode_attention.cuh",
     "const int stages = (count + kStageKeys - 1) / kStageKeys;",
     "const int stages = (count + kStageKeys - 2) / kStageKeys;",
     "off by one: a partition whose keys end one past a stage boundary drops its last key",
     ["paged_decode_attention_kernel_test"]),
    ("rms-norm-tail", "kernels/cuda/rms_norm.cuh",
     "  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {\n"
     "    out_row[i] = FromFloat<T>(ToFloat(source[i]) * inv_rms * ToFloat(weight[i]));",
     "  for (int i = threadIdx.x; i < hidden - 1; i += blockDim.x) {\n"
     "    out_row[i] = FromFloat<T>(ToFloat(source[i]) * inv_rms * ToFloat(weight[i]));",
     "off by one: the scalar path leaves a row's last element unwritten",
     ["rms_norm_kernel_test"]),
    ("penalty-bits-barrier", "kernels/cuda/sampling_row.cuh",
     "  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0u;\n  __syncthreads();\n",
     "  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0u;\n",
     "penalty bits are set while other threads may still be clearing them",
     ["sampling_kernel_test"]),
    ("gemm-tc-pipeline-wait", "kernels/cuda/batch_invariant_gemm_tc.cuh",
     "ptx::CpAsyncWait<Tile::kStages - 1>();",
     "ptx::CpAsyncWait<Tile::kStages>();",
     "the tensor-core GEMM reads a k tile one cp.async group before it landed",
     ["batch_invariant_gemm_tc_kernel_test"]),
]


def run(command, **kwargs):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, **kwargs)


def build(build_dir, targets):
    return run(["cmake", "--build", build_dir, "--target", *targets])


def tests_fail(build_dir, binaries):
    """True when some binary fails (a nonzero exit: failed expectation, abort, emulator fault)."""
    for binary in binaries:
        try:
            result = run([str(pathlib.Path(build_dir) / "bin" / binary)], timeout=900)
        except subprocess.TimeoutExpired:
            return True, f"{binary}: timed out"
        if result.returncode != 0:
            failed = [l for l in result.stdout.splitlines() if l.startswith("[  FAILED  ]")]
            return True, f"{binary}: {failed[0][13:] if failed else 'exit %d' % result.returncode}"
    return False, "every test passed"


def check(build_dir, mutation):
    name, rel, old, new, _, binaries = mutation
    path = ROOT / rel
    original = path.read_text()
    if original.count(old) != 1:
        return "does not apply", f"the text occurs {original.count(old)} times in {rel}"
    try:
        path.write_text(original.replace(old, new))
        built = build(build_dir, binaries)
        if built.returncode != 0:
            return "does not compile", built.stdout[-300:]
        killed, detail = tests_fail(build_dir, binaries)
        return ("killed" if killed else "SURVIVED"), detail
    finally:
        path.write_text(original)


def table(results):
    lines = ["| mutation | kernel | what it breaks | tests | result | first failure |",
             "|---|---|---|---|---|---|"]
    for (name, rel, _, _, breaks, binaries), (verdict, detail) in results:
        detail = detail.replace("|", "\\|").replace("\n", " ")[:120]
        lines.append(f"| {name} | `{rel}` | {breaks} | {', '.join(binaries)} | {verdict} | "
                     f"{detail} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--only", help="run the one mutation of this name")
    parser.add_argument("--write", help="write the table (markdown) to this file")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if args.only in (None, m[0])]
    results = []
    for mutation in chosen:
        verdict = check(args.build, mutation)
        print(f"{mutation[0]}: {verdict[0]} ({verdict[1].strip()[:160]})", flush=True)
        results.append((mutation, verdict))
    restored = build(args.build, sorted({b for m in chosen for b in m[5]}))
    if restored.returncode != 0:
        print("kernel_mutations: rebuilding the restored sources failed", file=sys.stderr)
        return 1
    if args.write:
        head = run(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
        pathlib.Path(args.write).write_text(
            "# Kernel mutation checks\n\n"
            "`tools/cuda/kernel_mutations.py` (opt-in; issue 28): each mutation of a production "
            "kernel is applied alone and the emulated tests that cover the kernel must fail.\n\n"
            f"Last run: {datetime.date.today()}, commit {head}, `--build {args.build}`.\n\n"
            + table(results) + "\n")
    return 0 if all(v[0] == "killed" for _, v in results) else 1


if __name__ == "__main__":
    sys.exit(main())
