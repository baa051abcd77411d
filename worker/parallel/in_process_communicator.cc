#include "worker/parallel/in_process_communicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "common/util/half.h"

namespace tessera::worker {
namespace {

float LoadElement(const void* data, int64_t i, device::DataType type) {
  switch (type) {
    case device::DataType::kF32:
      return static_cast<const float*>(data)[i];
    case device::DataType::kBf16:
      return util::Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case device::DataType::kF16:
      return util::HalfToFloat(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

void StoreElements(const std::vector<float>& sums, void* data, device::DataType type) {
  if (type == device::DataType::kF32) {
    std::memcpy(data, sums.data(), sums.size() * sizeof(float));
    return;
  }
  auto* out = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < sums.size(); ++i) {
    out[i] = type == device::DataType::kBf16 ? util::FloatToBf16(sums[i])
                                             : util::FloatToHalf(sums[i]);
  }
}

}  // namespace

InProcessGroup::InProcessGroup(int size)
    : size_(size), buffers_(size, nullptr), counts_(size, 0), types_(size) {
  TESSERA_CHECK(size >= 1, "InProcessGroup: no ranks");
}

absl::Status InProcessGroup::Meet() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) return absl::AbortedError("tensor parallel: another rank failed");
  const uint64_t meeting = meeting_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++meeting_;
    met_.notify_all();
    return absl::OkStatus();
  }
  met_.wait(lock, [&] { return meeting_ != meeting || aborted_; });
  if (meeting_ == meeting) return absl::AbortedError("tensor parallel: another rank failed");
  return absl::OkStatus();
}

void InProcessGroup::Abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  met_.notify_all();
}

absl::Status InProcessGroup::AllReduceSum(int rank, void* data, int64_t count,
                                          device::DataType type) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_[rank] = data;
    counts_[rank] = count;
    types_[rank] = type;
  }
  if (absl::Status met = Meet(); !met.ok()) return met;
  // Every rank posted before the meeting and changes nothing until the next one: read freely.
  for (int r = 1; r < size_; ++r) {
    TESSERA_CHECK(counts_[r] == counts_[0] && types_[r] == types_[0],
                  absl::StrCat("tensor parallel: rank ", r, " sums ", counts_[r],
                               " elements where rank 0 sums ", counts_[0]).c_str());
  }
  std::vector<float> sums(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    float sum = LoadElement(buffers_[0], i, type);
    for (int r = 1; r < size_; ++r) sum += LoadElement(buffers_[r], i, type);
    sums[static_cast<size_t>(i)] = sum;
  }
  // Nobody writes its buffer until every rank has read them all.
  if (absl::Status met = Meet(); !met.ok()) return met;
  StoreElements(sums, data, type);
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::AllReduceSum(void* data, int64_t count,
                                                 device::DataType type) {
  if (count == 0) return absl::OkStatus();
  return runtime_.Enqueue([group = group_, rank = rank_, data, count, type] {
    return group->AllReduceSum(rank, data, count, type);
  });
}

std::vector<std::unique_ptr<Communicator>> MakeInProcessCommunicators(
    const std::vector<device::EmulatedDeviceRuntime*>& runtimes) {
  auto group = std::make_shared<InProcessGroup>(static_cast<int>(runtimes.size()));
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (size_t r = 0; r < runtimes.size(); ++r) {
    communicators.push_back(
        std::make_unique<InProcessCommunicator>(group, static_cast<int>(r), *runtimes[r]));
  }
  return communicators;
}

}  // namespace tessera::worker
