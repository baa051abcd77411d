#include "kernels/device/emulated_device_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/device/emulated_gemm.h"
#include "kernels/simt/device_memory.h"

namespace tessera::device {

EmulatedDeviceRuntime::EmulatedDeviceRuntime(uint64_t memory_bytes, simt::Schedule schedule)
    : memory_bytes_(memory_bytes), schedule_(schedule), launcher_(*this) {
  properties_.name = absl::StrCat("SIMT emulator on the CPU (schedule ", schedule.ToString(), ")");
  properties_.total_memory_bytes = memory_bytes;
  properties_.multiprocessor_count = 1;
  properties_.max_shared_bytes_per_block = simt::kMaxSharedBytesPerBlock;
}

EmulatedDeviceRuntime::~EmulatedDeviceRuntime() {
  for (auto& [pointer, bytes] : allocations_) simt::FreeDevice(pointer);
}

absl::StatusOr<uint64_t> EmulatedDeviceRuntime::FreeMemoryBytes() {
  return memory_bytes_ - allocated_bytes_;
}

absl::StatusOr<void*> EmulatedDeviceRuntime::Allocate(size_t bytes) {
  if (capturing()) {
    return absl::FailedPreconditionError("device memory cannot be allocated during graph capture");
  }
  if (bytes > memory_bytes_ - allocated_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "emulated device out of memory: ", bytes, " bytes asked, ",
        memory_bytes_ - allocated_bytes_, " of ", memory_bytes_, " free"));
  }
  absl::StatusOr<void*> pointer = simt::AllocateDevice(bytes);
  if (!pointer.ok()) return pointer.status();
  allocations_.emplace_back(*pointer, bytes);
  allocated_bytes_ += bytes;
  return *pointer;
}

void EmulatedDeviceRuntime::Free(void* device_pointer) {
  if (device_pointer == nullptr) return;
  auto it = std::find_if(allocations_.begin(), allocations_.end(),
                         [&](const auto& entry) { return entry.first == device_pointer; });
  if (it == allocations_.end()) {
    std::fprintf(stderr, "emulated device: Free(%p) of memory it did not allocate\n",
                 device_pointer);
    std::abort();
  }
  allocated_bytes_ -= it->second;
  allocations_.erase(it);
  simt::FreeDevice(device_pointer);
}

absl::StatusOr<void*> EmulatedDeviceRuntime::AllocateHost(size_t bytes) {
  if (capturing()) {
    return absl::FailedPreconditionError("host memory cannot be allocated during graph capture");
  }
  void* pointer = std::aligned_alloc(kHostAlignment, (std::max<size_t>(bytes, 1) +
                                                      kHostAlignment - 1) / kHostAlignment *
                                                         kHostAlignment);
  if (pointer == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes"));
  }
  return pointer;
}

void EmulatedDeviceRuntime::FreeHost(void* host_pointer) { std::free(host_pointer); }

absl::Status EmulatedDeviceRuntime::Enqueue(Operation operation) {
  if (capture_) {
    capture_->push_back(std::move(operation));
    return absl::OkStatus();
  }
  return operation();
}

absl::Status EmulatedDeviceRuntime::EnqueueLaunch(Operation operation) {
  return Enqueue([this, launch = std::move(operation)] {
    ++launches_;
    return launch();
  });
}

absl::Status EmulatedDeviceRuntime::CopyToDevice(void* device_destination,
                                                 const void* host_source, size_t bytes) {
  return CopyOnDevice(device_destination, host_source, bytes);
}

absl::Status EmulatedDeviceRuntime::CopyToHost(void* host_destination, const void* device_source,
                                               size_t bytes) {
  return CopyOnDevice(host_destination, device_source, bytes);
}

absl::Status EmulatedDeviceRuntime::CopyOnDevice(void* device_destination,
                                                 const void* device_source, size_t bytes) {
  return Enqueue([=] {
    if (bytes > 0) std::memcpy(device_destination, device_source, bytes);
    return absl::OkStatus();
  });
}

absl::Status EmulatedDeviceRuntime::Fill(void* device_destination, uint8_t byte, size_t bytes) {
  return Enqueue([=] {
    std::memset(device_destination, byte, bytes);
    return absl::OkStatus();
  });
}

absl::StatusOr<EventHandle> EmulatedDeviceRuntime::CreateEvent() {
  events_.emplace_back();
  return static_cast<EventHandle>(events_.size() - 1);
}

absl::Status EmulatedDeviceRuntime::RecordEvent(EventHandle event) {
  if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown event ", event));
  }
  return Enqueue([this, event] {
    events_[event] = Clock::now();
    return absl::OkStatus();
  });
}

absl::StatusOr<double> EmulatedDeviceRuntime::ElapsedSeconds(EventHandle start, EventHandle end) {
  for (EventHandle event : {start, end}) {
    if (event < 0 || static_cast<size_t>(event) >= events_.size() || !events_[event]) {
      return absl::FailedPreconditionError(absl::StrCat("event ", event, " was never recorded"));
    }
  }
  return std::chrono::duration<double>(*events_[end] - *events_[start]).count();
}

absl::Status EmulatedDeviceRuntime::BeginCapture() {
  if (capture_) return absl::FailedPreconditionError("a graph capture is already under way");
  capture_.emplace();
  return absl::OkStatus();
}

absl::StatusOr<GraphHandle> EmulatedDeviceRuntime::EndCapture() {
  if (!capture_) return absl::FailedPreconditionError("EndCapture without BeginCapture");
  graphs_.push_back(std::move(*capture_));
  capture_.reset();
  return static_cast<GraphHandle>(graphs_.size() - 1);
}

absl::Status EmulatedDeviceRuntime::Replay(GraphHandle graph) {
  if (capture_) return absl::FailedPreconditionError("cannot replay a graph during capture");
  if (graph < 0 || static_cast<size_t>(graph) >= graphs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown graph ", graph));
  }
  for (const Operation& operation : graphs_[graph]) {
    if (absl::Status status = operation(); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status EmulatedDeviceRuntime::Gemm(const GemmArgs& args) {
  if (absl::Status valid = ValidateGemm(args); !valid.ok()) return valid;
  return EnqueueLaunch([args] {
    EmulatedGemm(args);
    return absl::OkStatus();
  });
}

}  // namespace tessera::device
