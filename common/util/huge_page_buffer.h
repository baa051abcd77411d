// Anonymous memory whose start is 2 MiB aligned and advised MADV_HUGEPAGE, so that transparent
// huge pages can back it from the first byte (with THP in "madvise" mode, the common default,
// nothing else gets them). For memory a forward step streams through: weights, packed weights,
// KV pools; with 4 KiB pages every 4 KiB touched is a TLB miss.
// Zero-filled on first touch (fresh anonymous memory). Move-only; munmap on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"

namespace tessera::util {

// `size` bytes (> 0); munmap(result, size) releases all of it. RESOURCE_EXHAUSTED (from errno)
// when the memory cannot be mapped.
absl::StatusOr<void*> AllocateHugePageMemory(size_t size);

class HugePageBuffer {
 public:
  static absl::StatusOr<HugePageBuffer> Allocate(size_t size);

  HugePageBuffer() = default;
  HugePageBuffer(HugePageBuffer&& other) noexcept { *this = std::move(other); }
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera::util
