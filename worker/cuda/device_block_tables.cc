#include "worker/cuda/device_block_tables.h"

#include <algorithm>

#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::worker {

absl::StatusOr<DeviceBlockTables> DeviceBlockTables::Create(device::DeviceRuntime& runtime,
                                                           int num_slots, int stride,
                                                           int max_rows) {
  DeviceBlockTables t;
  t.num_slots_ = num_slots;
  t.stride_ = stride;
  t.max_rows_ = max_rows;
  const size_t table_bytes = size_t(num_slots + 1) * stride * sizeof(int32_t);
  TESSERA_ASSIGN_OR_RETURN(t.tables_, device::DeviceMemory::Allocate(runtime, table_bytes));
  TESSERA_RETURN_IF_ERROR(runtime.Fill(t.tables_.data(), 0, table_bytes));
  TESSERA_ASSIGN_OR_RETURN(t.step_tables_,
                           device::DeviceMemory::Allocate(
                               runtime, size_t(2) * max_rows * stride * sizeof(int32_t)));
  t.mirror_.assign(size_t(num_slots) * stride, 0);
  t.synced_.assign(num_slots, 0);
  return t;
}

void DeviceBlockTables::Send(int slot, int index, int32_t block, DeviceStepInputs& inputs) {
  mirror_[size_t(slot) * stride_ + index] = block;
  inputs.AddDelta({.index = slot * stride_ + index, .block = block});
}

void DeviceBlockTables::Sync(int slot, std::span<const int32_t> table, int needed,
                             DeviceStepInputs& inputs) {
  TESSERA_CHECK(slot >= 0 && slot < num_slots_ && needed <= stride_ &&
                    needed <= static_cast<int>(table.size()),
                "DeviceBlockTables::Sync: slot or table out of range");
  for (int i = synced_[slot]; i < needed; ++i) Send(slot, i, table[i], inputs);
  synced_[slot] = std::max(synced_[slot], needed);
}

void DeviceBlockTables::SyncFull(int slot, std::span<const int32_t> table, int needed,
                                 DeviceStepInputs& inputs) {
  TESSERA_CHECK(slot >= 0 && slot < num_slots_ && needed <= stride_ &&
                    needed <= static_cast<int>(table.size()),
                "DeviceBlockTables::SyncFull: slot or table out of range");
  const int32_t* row = &mirror_[size_t(slot) * stride_];
  for (int i = 0; i < needed; ++i) {
    if (i >= synced_[slot] || row[i] != table[i]) Send(slot, i, table[i], inputs);
  }
  // Entries past `needed` may now belong to another sequence's table: the next Sync resends.
  synced_[slot] = needed;
}

absl::Status DeviceBlockTables::Enqueue(DeviceKernels& kernels,
                                        const DeviceStepInputs& inputs) const {
  TESSERA_RETURN_IF_ERROR(kernels.ScatterTableDeltas(
      inputs.device_deltas(), inputs.device_delta_count(), tables_.as<int32_t>(),
      int64_t{num_slots_ + 1} * stride_));
  const StepShape& shape = inputs.shape();
  if (shape.num_decode > 0) {
    TESSERA_RETURN_IF_ERROR(kernels.GatherTableRows(tables_.as<int32_t>(),
                                                    inputs.device_decode_slots(),
                                                    const_cast<int32_t*>(decode_tables()),
                                                    shape.num_decode, stride_));
  }
  if (shape.num_prefill > 0) {
    TESSERA_RETURN_IF_ERROR(kernels.GatherTableRows(tables_.as<int32_t>(),
                                                    inputs.device_prefill_slots(),
                                                    const_cast<int32_t*>(prefill_tables()),
                                                    shape.num_prefill, stride_));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
