// DeviceBlockTables: every slot's block table kept on the device ([slots + 1, stride] int32;
// the extra last row is all zeros, for padding rows), updated by deltas. The host mirrors what
// each device row holds; Sync turns a sequence's table into the deltas (entries that changed,
// block_tables.cuh) its step must send, in the step's one input copy (device_step_inputs.h).
// On the device each step then scatters the deltas and gathers the step's rows into fixed-address
// [rows, stride] tables for decode and prefill attention (Enqueue), so graphs replay them.
//
// Within a sequence's life in a slot its table only grows (the router appends blocks), so Sync
// sends only entries past what the slot already holds; Reset (a new sequence in the slot) makes
// the next Sync send from the start. SyncFull compares every entry (callers without that
// lifecycle: Forward in tests and benchmarks).
//
// Ownership: owns its device memory; the runtime must outlive it. Step thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda/device_step_inputs.h"

namespace tessera::worker {

class DeviceBlockTables {
 public:
  // num_slots tables of `stride` entries; step tables for up to max_rows decode and as many
  // prefill sequences.
  static absl::StatusOr<DeviceBlockTables> Create(device::DeviceRuntime& runtime, int num_slots,
                                                  int stride, int max_rows);

  int stride() const { return stride_; }
  int padding_slot() const { return num_slots_; }  // the all-zero row
  // Deltas making slot's device row hold table[0, needed) (needed <= stride).
  void Sync(int slot, std::span<const int32_t> table, int needed, DeviceStepInputs& inputs);
  void SyncFull(int slot, std::span<const int32_t> table, int needed, DeviceStepInputs& inputs);
  void Reset(int slot) { synced_[slot] = 0; }

  // Scatters the step's deltas and gathers its decode and prefill rows (device work).
  absl::Status Enqueue(DeviceKernels& kernels, const DeviceStepInputs& inputs) const;
  // The step's tables, [num_decode | num_prefill, stride] at fixed addresses.
  const int32_t* decode_tables() const { return step_tables_.as<int32_t>(); }
  const int32_t* prefill_tables() const {
    return step_tables_.as<int32_t>() + size_t(max_rows_) * stride_;
  }

 private:
  void Send(int slot, int index, int32_t block, DeviceStepInputs& inputs);

  int num_slots_ = 0;
  int stride_ = 0;
  int max_rows_ = 0;
  device::DeviceMemory tables_;       // [num_slots + 1, stride], zeroed
  device::DeviceMemory step_tables_;  // [2 * max_rows, stride]
  std::vector<int32_t> mirror_;       // what each device row holds, [num_slots, stride]
  std::vector<int32_t> synced_;       // [num_slots] leading entries known to be on the device
};

}  // namespace tessera::worker
