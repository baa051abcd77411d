#!/usr/bin/env python3
"""gguf-py (the `gguf` package from PyPI, ggml-org's own Python implementation) as an oracle for
the MXFP4 / NVFP4 tests in fp4_oracle_test.cc, which runs it from .venv-e2e
(scripts/install_python_test_deps.sh installs the pinned version there).

Usage:
  fp4_oracle.py dequantize MXFP4|NVFP4 BLOCKS_IN F32_OUT   raw blocks -> little-endian float32
  fp4_oracle.py quantize MXFP4 F32_IN BLOCKS_OUT          float32 -> gguf-py's MXFP4 blocks
  fp4_oracle.py version                                   prints the gguf version
"""

import sys
from importlib.metadata import version

import numpy as np
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize, quantize


def main(argv):
    if argv[1] == "version":
        print(version("gguf"))
        return 0
    command, type_name, in_path, out_path = argv[1:5]
    qtype = GGMLQuantizationType[type_name]
    if command == "dequantize":
        raw = np.fromfile(in_path, dtype=np.uint8)
        with np.errstate(over="ignore"):  # large E8M0 scales overflow to inf, as in ggml
            values = dequantize(raw, qtype)
        np.asarray(values, dtype="<f4").reshape(-1).tofile(out_path)
    elif command == "quantize":
        values = np.fromfile(in_path, dtype="<f4")
        quantize(values.reshape(1, -1), qtype).reshape(-1).tofile(out_path)
    else:
        print("unknown command " + command, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
