#include "kernels/simt/shared_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/simt/emulator.h"

namespace tessera::simt::detail {
namespace {

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t RoundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

SharedArena::SharedArena(size_t dynamic_bytes, size_t limit)
    : dynamic_bytes_(dynamic_bytes), limit_(limit) {
  const size_t page = PageSize();
  const size_t usable = RoundUp(kMaxSharedBytesPerBlock + 16, page);
  mapping_bytes_ = usable + page;
  void* mapping = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    std::fprintf(stderr, "simt: cannot map %zu bytes of shared memory\n", mapping_bytes_);
    std::abort();
  }
  mapping_ = static_cast<char*>(mapping);
  char* guard = mapping_ + usable;
  if (mprotect(guard, page, PROT_NONE) != 0) {
    std::perror("simt: mprotect shared-memory guard page");
    std::abort();
  }
  dynamic_ = guard - RoundUp(dynamic_bytes_, 16);
  static_low_ = dynamic_;
}

SharedArena::~SharedArena() { munmap(mapping_, mapping_bytes_); }

void SharedArena::PoisonForBlock() {
  char* guard = mapping_ + mapping_bytes_ - PageSize();
  std::memset(static_low_, 0xFF, static_cast<size_t>(guard - static_low_));
}

absl::StatusOr<void*> SharedArena::Static(const void* site, size_t bytes, size_t alignment) {
  if (auto it = sites_.find(site); it != sites_.end()) return it->second;
  const uintptr_t top = reinterpret_cast<uintptr_t>(static_low_);
  const uintptr_t placed = (top - bytes) & ~(static_cast<uintptr_t>(alignment) - 1);
  const size_t total = reinterpret_cast<uintptr_t>(dynamic_) + dynamic_bytes_ - placed;
  const size_t static_total = total - dynamic_bytes_;
  if (bytes > top || placed < reinterpret_cast<uintptr_t>(mapping_) || total > limit_ ||
      static_total > kDefaultSharedBytesPerBlock) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shared memory of one block would exceed its limit of ", limit_, " bytes (",
        dynamic_bytes_, " dynamic + static, asking for ", bytes, " more; static alone at most ",
        kDefaultSharedBytesPerBlock, ")"));
  }
  static_low_ = reinterpret_cast<char*>(placed);
  std::memset(static_low_, 0xFF, static_cast<size_t>(top - placed));
  sites_.emplace(site, static_low_);
  return static_low_;
}

}  // namespace tessera::simt::detail
