// The emulated device's communicator (communicator.h): the ranks are threads of one process,
// each with its own EmulatedDeviceRuntime. A sum is an operation on the rank's runtime (run now,
// or recorded into the graph being captured and run at each replay). At run time the ranks meet:
// each posts its buffer and waits for the others; each then sums element i over the ranks in
// rank order (f32, from the stored type), meets again once all have read, and writes the sum,
// rounded once to the type, into its own buffer. Every rank computes the same f32 chain, so all
// hold the same bits, and the result depends only on the ranks' inputs, never on timing.
//
// Ownership: the ranks' communicators share one InProcessGroup. Threading: rank r's
// communicator runs on rank r's thread; Abort from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/device/emulated_device_runtime.h"
#include "worker/parallel/communicator.h"

namespace tessera::worker {

class InProcessGroup {
 public:
  explicit InProcessGroup(int size);

  int size() const { return size_; }
  // Rank `rank`'s part of one sum (see the file comment); blocks until every rank has called it.
  absl::Status AllReduceSum(int rank, void* data, int64_t count, device::DataType type);
  void Abort();

 private:
  // Waits until all ranks have arrived at this meeting; ABORTED once Abort was called.
  absl::Status Meet();

  const int size_;
  std::mutex mutex_;
  std::condition_variable met_;
  int arrived_ = 0;
  uint64_t meeting_ = 0;
  bool aborted_ = false;
  std::vector<const void*> buffers_;  // [size]: each rank's data for the sum under way
  std::vector<int64_t> counts_;
  std::vector<device::DataType> types_;
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank,
                        device::EmulatedDeviceRuntime& runtime)
      : group_(std::move(group)), rank_(rank), runtime_(runtime) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  absl::Status AllReduceSum(void* data, int64_t count, device::DataType type) override;
  void Abort() override { group_->Abort(); }
  std::string Describe() const override { return "in-process, fixed order"; }

 private:
  std::shared_ptr<InProcessGroup> group_;
  int rank_;
  device::EmulatedDeviceRuntime& runtime_;
};

// One communicator per runtime, rank i on runtimes[i] (which must outlive them).
std::vector<std::unique_ptr<Communicator>> MakeInProcessCommunicators(
    const std::vector<device::EmulatedDeviceRuntime*>& runtimes);

}  // namespace tessera::worker
