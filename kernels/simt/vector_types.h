// CUDA's own dim3/uint3/float4/... definitions (host-compilable), so emulated code and device
// code see the same types. Needs the CUDA toolkit's include directory, not a GPU.
#pragma once

#include <vector_types.h>
