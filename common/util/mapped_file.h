// MappedFile: a whole file as read-only memory (RAII; munmap on destruction), either mapped or
// copied into anonymous memory backed by transparent huge pages (FileLoad).
//
// Why mmap: model files are hundreds of MB to tens of GB; mapping lets the kernel page weights in
// on demand and share them between processes. Why the copy: a forward step streams every weight,
// and with 4 KiB pages that is one TLB miss per 4 KiB (24,000 per step for a 97 MB model); 2 MiB
// pages remove nearly all of them (docs/perf/cpu.md measures the gain). It costs the file's size
// in anonymous memory and one read at load.
// Immutable after Open, so any thread may read the bytes concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tessera::util {

enum class FileLoad {
  kMap,            // mmap PROT_READ / MAP_PRIVATE: paged in on demand, shared page cache
  kHugePageCopy,   // read into anonymous memory advised MADV_HUGEPAGE, then made read-only
};

class MappedFile {
 public:
  // Maps or copies `path` (see FileLoad). Errors: NOT_FOUND / PERMISSION_DENIED / ... from errno
  // for open/fstat/mmap/read; INVALID_ARGUMENT for a non-regular file or an empty file (an empty
  // mapping is not possible, and no valid file of ours is empty).
  static absl::StatusOr<MappedFile> Open(const std::string& path, FileLoad load = FileLoad::kMap);

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
