#!/usr/bin/env python3
"""Static checks of every CUDA kernel, no GPU needed (DESIGN.md §11).

Compiles each kernels/cuda/*.cu for every requested architecture with nvcc's warnings as errors
and `ptxas -v -warn-spills -warn-lmem-usage --warning-as-error`, parses ptxas's report, and fails
when any kernel spills registers or uses local memory (a stack frame), or when a kernel listed in
REQUIRED_PTX lacks an instruction its design rests on (tensor cores, 16-byte loads). With --table
it rewrites the generated section of docs/perf/cuda-kernels.md: registers, static shared memory,
threads per block (from __launch_bounds__, read in the PTX as .maxntid) and the theoretical
occupancy on H100 (sm_90a) per kernel.

Usage: tools/cuda/kernel_resources.py [--archs 90a,100a,120a] [--table]
"""
import argparse
import dataclasses
import math
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
# An installed CUDA 13's nvcc, else PyPI's in .venv-cuda/ (scripts/install_cuda_toolkit.sh).
TOOLKIT = subprocess.run([str(ROOT / "scripts/install_cuda_toolkit.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.splitlines()[-1]
NVCC = f"{TOOLKIT}/bin/nvcc"
DOC = ROOT / "docs/perf/cuda-kernels.md"
BEGIN, END = "<!-- kernel_resources.py: begin -->", "<!-- kernel_resources.py: end -->"

# H100 SXM (sm_90) per-SM limits, from the CUDA C Programming Guide's compute-capability table.
H100 = dict(registers=65536, max_threads=2048, max_blocks=32, shared_bytes=228 * 1024,
            reserved_shared_per_block=1024, register_granularity=256, max_warps=64)


# Instructions a kernel's PTX must contain, by a substring of its mangled name: a kernel that
# lost its tensor-core or 16-byte path (a refactor, a type that no longer vectorises) still builds
# and still passes its tests.
REQUIRED_PTX = {
    "BatchInvariantGemmTcKernel": [r"mma\.sync\.aligned\.m16n8k16", r"ldmatrix\.sync\.aligned",
                                   r"cp\.async\.cg\.shared\.global"],
    "PackedLinearMmaKernel": [r"mma\.sync\.aligned\.m16n8k16", r"ldmatrix\.sync\.aligned",
                              r"cp\.async\.cg\.shared\.global"],
    "PackedLinearSmallMKernel": [r"ld\.global\.nc\.v4"],
    "PagedDecodeAttentionKernel": [r"cp\.async\.cg\.shared\.global"],
    "PagedPrefillAttentionTcKernel": [r"mma\.sync\.aligned\.m16n8k16", r"ldmatrix\.sync\.aligned",
                                      r"cp\.async\.cg\.shared\.global"],
    "SamplingKernel": [r"ld\.global\.nc\.v4\.f32"],
    "SamplingChunkStatsKernel": [r"ld\.global\.nc\.v4\.f32"],
    "SamplingSweepKernel": [r"ld\.global\.nc\.v4\.f32"],
}


@dataclasses.dataclass
class KernelReport:
    source: str
    arch: str
    mangled: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_bytes: int = 0
    max_threads: int = 0  # from .maxntid; 0 when the kernel has no __launch_bounds__


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def compile_source(source: pathlib.Path, arch: str, workdir: pathlib.Path):
    flags = ["-std=c++20", f"-arch=sm_{arch}", f"-I{ROOT}", "-Werror", "all-warnings",
             "-Xptxas", "-v,-warn-spills,-warn-lmem-usage,--warning-as-error"]
    result = subprocess.run([NVCC, *flags, "-c", str(source), "-o", str(workdir / "k.o")],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"kernel_resources: {source.name} does not build for sm_{arch}")
    subprocess.run([NVCC, "-std=c++20", f"-arch=sm_{arch}", f"-I{ROOT}", "--ptx", str(source),
                    "-o", str(workdir / "k.ptx")], capture_output=True, text=True, check=True)
    return result.stdout + result.stderr, (workdir / "k.ptx").read_text()


def parse_ptxas(log: str, ptx: str, source: str, arch: str):
    reports, current = [], None
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '(\S+)' for", line):
            current = KernelReport(source, arch, m.group(1))
            reports.append(current)
        elif current and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                                         r"(\d+) bytes spill loads", line)):
            current.stack_bytes = int(m.group(1))
            current.spill_bytes = int(m.group(2)) + int(m.group(3))
        elif current and (m := re.search(r"Used (\d+) registers", line)):
            current.registers = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                current.shared_bytes = int(s.group(1))
    for report in reports:
        entry = re.search(r"\.entry\s+" + re.escape(report.mangled) + r"\(.*?\)\s*([^{]*)\{",
                          ptx, re.S)
        if entry and (n := re.search(r"\.maxntid\s+(\d+),\s*(\d+),\s*(\d+)", entry.group(1))):
            report.max_threads = int(n.group(1)) * int(n.group(2)) * int(n.group(3))
    return reports


def missing_ptx(ptx: str, source: str, arch: str):
    """REQUIRED_PTX patterns absent from their kernels' PTX bodies."""
    starts = [m.start() for m in re.finditer(r"\.entry\s", ptx)] + [len(ptx)]
    failures = []
    for begin, end in zip(starts, starts[1:]):
        body = ptx[begin:end]
        name = re.match(r"\.entry\s+(\S+?)\(", body).group(1)
        for kernel, patterns in REQUIRED_PTX.items():
            if kernel not in name:
                continue
            failures += [f"{name} ({source}, sm_{arch}): no {p}" for p in patterns
                         if not re.search(p, body)]
    return failures


def occupancy(report: KernelReport) -> float:
    if report.max_threads == 0:
        return float("nan")
    warps = math.ceil(report.max_threads / 32)
    regs_per_warp = math.ceil(max(report.registers, 1) * 32 / H100["register_granularity"]) * \
        H100["register_granularity"]
    by_registers = (H100["registers"] // regs_per_warp) // warps
    by_threads = H100["max_threads"] // (warps * 32)
    by_shared = H100["shared_bytes"] // (report.shared_bytes + H100["reserved_shared_per_block"])
    blocks = min(by_registers, by_threads, by_shared, H100["max_blocks"])
    return blocks * warps / H100["max_warps"]


def without_parameters(signature: str) -> str:
    """Drops the trailing parameter list (template arguments may hold parentheses too)."""
    depth = 0
    for i in range(len(signature) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0 and signature[i] == "(":
            return signature[:i]
    return signature


def table(reports):
    names = demangle([r.mangled for r in reports])
    lines = ["| kernel (template arguments) | source | threads/block | registers | static smem (B) "
             "| H100 occupancy |", "|---|---|---|---|---|---|"]
    for r in sorted(reports, key=lambda r: (r.source, names[r.mangled])):
        name = without_parameters(names[r.mangled].replace("tessera::cuda::", ""))
        name = name.removeprefix("void ").replace("|", "\\|")
        occ = occupancy(r)
        occ_text = "—" if math.isnan(occ) else f"{occ:.0%}"
        threads = r.max_threads or "—"
        lines.append(f"| `{name}` | {r.source} | {threads} | {r.registers} | {r.shared_bytes} "
                     f"| {occ_text} |")
    return "\n".join(lines)


def write_table(text: str):
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"kernel_resources: {DOC} lacks the {BEGIN} … {END} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="90a,100a,120a")
    parser.add_argument("--table", action="store_true", help="rewrite docs/perf/cuda-kernels.md")
    args = parser.parse_args()
    sources = sorted(p for p in (ROOT / "kernels/cuda").glob("*.cu") if p.name != "device_query.cu")
    all_reports, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.archs.split(","):
            for source in sources:
                log, ptx = compile_source(source, arch, pathlib.Path(tmp))
                reports = parse_ptxas(log, ptx, source.name, arch)
                failures += missing_ptx(ptx, source.name, arch)
                for r in reports:
                    if r.stack_bytes or r.spill_bytes:
                        failures.append(f"{r.mangled} (sm_{arch}): {r.stack_bytes} B stack, "
                                        f"{r.spill_bytes} B spills")
                all_reports += reports
                print(f"kernel_resources: sm_{arch} {source.name}: {len(reports)} kernels")
    if failures:
        raise SystemExit("kernel_resources: local memory, spills or missing instructions:\n  " +
                         "\n  ".join(failures))
    if args.table:
        write_table(table([r for r in all_reports if r.arch == "90a"]))
        print(f"kernel_resources: wrote {DOC.relative_to(ROOT)}")
    print(f"kernel_resources: {len(all_reports)} kernel builds, no spills, no local memory, "
          "required instructions present")


if __name__ == "__main__":
    main()
