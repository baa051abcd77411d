// The only place tensor-core and async-copy instructions are written (DESIGN.md §11). On the
// device each op is one inline-PTX instruction; in the SIMT emulator each is a warp collective
// (or a per-thread queue for cp.async) written from the PTX ISA's fragment tables, and tested
// alone against a plain matmul (tests/unit/cuda/ptx_ops_kernel_test.cc).
//
//  MmaM16N8K16<Bf16|F16>: D[16x8] = A[16x16] · B[16x8] + C, f32 accumulate, one warp.
//   lane = 4·g + t (g = lane/4 "groupID", t = lane%4):
//   A: 4 regs of 2 packed 16-bit values, reg r holds A[row][col], A[row][col+1] (low half first)
//      with row = g + 8·(r&1), col = 2t + 8·(r>>1)
//   B: 2 regs, reg r holds B[k][g], B[k+1][g] with k = 2t + 8·r
//   C/D: 4 floats, element i is C[g + 8·(i>>1)][2t + (i&1)]
//  LdMatrix x1/x2/x4 (.trans): lanes 8j..8j+7 give the 16-byte row addresses of 8x8 matrix j;
//   register j of lane l receives M_j[l/4][2(l%4)], M_j[l/4][2(l%4)+1] (transposed: M_j[2(l%4)][l/4],
//   M_j[2(l%4)+1][l/4]).
//  CpAsync16 / CpAsyncCommit / CpAsyncWait<N>: 16-byte global->shared copies in groups; the
//   emulator poisons the destination until a wait retires the group.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"

namespace tessera::cuda::ptx {

enum class MmaType { kBf16, kF16 };

#if !defined(__CUDA_ARCH__) && !defined(__CUDACC__)
namespace emulated {

inline float Unpack16(uint32_t packed, int half, MmaType type) {
  const uint16_t bits = static_cast<uint16_t>(half ? packed >> 16 : packed & 0xFFFFu);
  if (type == MmaType::kBf16) return __bfloat162float(__ushort_as_bfloat16(bits));
  return __half2float(__ushort_as_half(bits));
}

struct MmaLane {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

// Exact products summed in f64, then rounded once to f32 (tensor cores accumulate at least at
// f32 precision in an unspecified order; tests allow for that).
inline void Mma(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                MmaType type, std::source_location where) {
  using namespace ::tessera::simt::detail;
  MmaLane mine;
  for (int i = 0; i < 4; ++i) mine.a[i] = a[i], mine.c[i] = c[i];
  mine.b[0] = b[0], mine.b[1] = b[1];
  const WarpGroupView view = WarpArrive(0xFFFFFFFFu, CollectiveKind::kMatrix, &mine, sizeof mine,
                                        where);
  auto lane_data = [&](int lane) {
    MmaLane data;
    std::memcpy(&data, &view.lanes[lane], sizeof data);
    return data;
  };
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaLane data = lane_data(lane);
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
      for (int h = 0; h < 2; ++h) A[g + 8 * (r & 1)][2 * t + 8 * (r >> 1) + h] = Unpack16(data.a[r], h, type);
    }
    for (int r = 0; r < 2; ++r) {
      for (int h = 0; h < 2; ++h) B[2 * t + 8 * r + h][g] = Unpack16(data.b[r], h, type);
    }
  }
  const int g = view.self_lane / 4, t = view.self_lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    double sum = mine.c[i];
    for (int k = 0; k < 16; ++k) sum += static_cast<double>(A[row][k]) * B[k][col];
    d[i] = static_cast<float>(sum);
  }
  WarpDepart(view);
}

inline uint32_t Pack16(uint16_t low, uint16_t high) { return low | (uint32_t{high} << 16); }

template <int kMatrices>
void LdMatrix(uint32_t* regs, const void* row_address, bool transpose,
              std::source_location where) {
  using namespace ::tessera::simt::detail;
  const WarpGroupView view = WarpArrive(0xFFFFFFFFu, CollectiveKind::kMatrix, &row_address,
                                        sizeof row_address, where);
  auto row_of = [&](int matrix, int row) {
    const void* address;
    std::memcpy(&address, &view.lanes[matrix * 8 + row], sizeof address);
    return static_cast<const uint16_t*>(address);
  };
  const int lane = view.self_lane;
  for (int j = 0; j < kMatrices; ++j) {
    if (!transpose) {
      const uint16_t* row = row_of(j, lane / 4);
      regs[j] = Pack16(row[2 * (lane % 4)], row[2 * (lane % 4) + 1]);
    } else {
      regs[j] = Pack16(row_of(j, 2 * (lane % 4))[lane / 4], row_of(j, 2 * (lane % 4) + 1)[lane / 4]);
    }
  }
  WarpDepart(view);
}

}  // namespace emulated
#endif

template <MmaType kType>
__device__ __forceinline__ void MmaM16N8K16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                            const float c[4]
#if !defined(__CUDACC__)
                                            , std::source_location where = std::source_location::current()
#endif
) {
#if defined(__CUDA_ARCH__)
  // Not volatile: a pure function of its registers, so the compiler may interleave independent
  // mma with other work (volatile asm keeps program order and serialises dependent chains).
  if constexpr (kType == MmaType::kBf16) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  }
#elif !defined(__CUDACC__)
  emulated::Mma(d, a, b, c, kType, where);
#endif
}

// kMatrices 1, 2 or 4; `row_address` points into shared memory, 16-byte aligned.
template <int kMatrices, bool kTranspose = false>
__device__ __forceinline__ void LdMatrix(uint32_t* regs, const void* row_address
#if !defined(__CUDACC__)
                                         , std::source_location where = std::source_location::current()
#endif
) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4);
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  if constexpr (kMatrices == 1) {
    if constexpr (kTranspose) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(regs[0]) : "r"(address));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(regs[0]) : "r"(address));
    }
  } else if constexpr (kMatrices == 2) {
    if constexpr (kTranspose) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                   : "=r"(regs[0]), "=r"(regs[1]) : "r"(address));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                   : "=r"(regs[0]), "=r"(regs[1]) : "r"(address));
    }
  } else {
    if constexpr (kTranspose) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3]) : "r"(address));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3]) : "r"(address));
    }
  }
#elif !defined(__CUDACC__)
  emulated::LdMatrix<kMatrices>(regs, row_address, kTranspose, where);
#endif
}

// Copies 16 bytes global -> shared without staging in registers (sm_80+). Both 16-byte aligned.
__device__ __forceinline__ void CpAsync16(void* shared_destination, const void* global_source) {
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global_source));
#elif !defined(__CUDACC__)
  ::tessera::simt::detail::AsyncCopyIssue(shared_destination, global_source, 16);
#endif
}

// Copies kBytes (4 or 8) global -> shared through L1 (cp.async.ca); both kBytes-aligned.
template <int kBytes>
__device__ __forceinline__ void CpAsyncSmall(void* shared_destination, const void* global_source) {
  static_assert(kBytes == 4 || kBytes == 8);
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(address), "l"(global_source),
               "n"(kBytes));
#elif !defined(__CUDACC__)
  ::tessera::simt::detail::AsyncCopyIssue(shared_destination, global_source, kBytes);
#endif
}

__device__ __forceinline__ void CpAsyncCommit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#elif !defined(__CUDACC__)
  ::tessera::simt::detail::AsyncCopyCommit();
#endif
}

// Programmatic dependent launch (LaunchShape::dependent, sm_90+). GridDependencyWait blocks until
// the grid this launch depends on has completed and its writes are visible (a no-op for a plain
// launch); a dependent kernel calls it on every thread before it reads another kernel's output,
// writes anything or exits (the emulator checks that every thread does). LaunchDependents lets
// the next dependent launch schedule its blocks once every block of this grid has called it or
// exited (that launch still waits for this grid's end at its own GridDependencyWait).
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#elif !defined(__CUDACC__)
  ::tessera::simt::detail::GridDependencyWait();
#endif
}

__device__ __forceinline__ void LaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until at most kPending committed groups of this thread are still in flight. Other
// threads' copies need a __syncthreads() after the wait, as on the GPU.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#elif !defined(__CUDACC__)
  ::tessera::simt::detail::AsyncCopyWait(kPending);
#endif
}

}  // namespace tessera::cuda::ptx
