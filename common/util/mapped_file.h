// MappedFile: a read-only, private memory mapping of a whole file (RAII; munmap on destruction).
//
// Why mmap: model files are hundreds of MB to tens of GB; mapping lets the kernel page weights in
// on demand and share them between processes, instead of copying them into the heap.
// Immutable after Open, so any thread may read the bytes concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tessera::util {

class MappedFile {
 public:
  // Maps `path` with PROT_READ / MAP_PRIVATE. Errors: NOT_FOUND / PERMISSION_DENIED / ... from
  // errno for open/fstat/mmap; INVALID_ARGUMENT for a non-regular file or an empty file (an empty
  // mapping is not possible, and no valid file of ours is empty).
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { Reset(); }

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(data_), size_}; }
  size_t size() const { return size_; }

  // Gives up ownership: the caller must munmap(first, second) (see Unmap).
  std::pair<void*, size_t> Release();
  static void Unmap(void* data, size_t size);

 private:
  void Reset();

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera::util
