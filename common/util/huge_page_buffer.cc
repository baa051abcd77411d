#include "common/util/huge_page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::util {

absl::StatusOr<void*> AllocateHugePageMemory(size_t size) {
  if (size == 0) return absl::InvalidArgumentError("AllocateHugePageMemory: size 0");
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = (size + page - 1) / page * page;
  void* raw = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("cannot map ", size, " bytes: ", std::strerror(errno)));
  }
  // Trim the slack before the first 2 MiB boundary and after the end.
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + length + kHugePage;
  if (end > aligned + length) {
    ::munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  }
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, length, MADV_HUGEPAGE);  // advisory: without THP the memory still works
  return data;
}

absl::StatusOr<HugePageBuffer> HugePageBuffer::Allocate(size_t size) {
  absl::StatusOr<void*> memory = AllocateHugePageMemory(size);
  if (!memory.ok()) return memory.status();
  HugePageBuffer buffer;
  buffer.data_ = static_cast<uint8_t*>(*memory);
  buffer.size_ = size;
  return buffer;
}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace tessera::util
