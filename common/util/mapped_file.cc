#include "common/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::util {
namespace {

absl::Status ErrnoError(int error_number, const std::string& what, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrCat(what, " '", path, "': ", std::strerror(error_number)));
}

// Closes the descriptor on every return path; the mapping stays valid after close.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Anonymous memory of `size` bytes whose start is 2 MiB aligned (so transparent huge pages can
// back it from the first byte), advised MADV_HUGEPAGE. The mapping is exactly
// [result, result + size rounded up to a page), so munmap(result, size) releases all of it.
absl::StatusOr<void*> HugePageAlignedMemory(size_t size, const std::string& path) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = (size + page - 1) / page * page;
  void* raw = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return ErrnoError(errno, "cannot allocate memory for", path);
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + length + kHugePage;
  if (end > aligned + length) {
    ::munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  }
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, length, MADV_HUGEPAGE);  // advisory: without THP the copy still works
  return data;
}

// Reads all of `fd` (`size` bytes) into huge-page memory, then makes it read-only.
absl::StatusOr<void*> CopyIntoHugePages(int fd, size_t size, const std::string& path) {
  absl::StatusOr<void*> memory = HugePageAlignedMemory(size, path);
  if (!memory.ok()) return memory.status();
  auto* bytes = static_cast<char*>(*memory);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n <= 0) {
      const int error_number = n < 0 ? errno : EIO;  // 0: the file shrank while we read it
      ::munmap(*memory, size);
      return ErrnoError(error_number, "cannot read", path);
    }
    done += static_cast<size_t>(n);
  }
  ::mprotect(*memory, size, PROT_READ);
  return *memory;
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path, FileLoad load) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  FdCloser closer(fd);

  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  if (st.st_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty (0 bytes)"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (load == FileLoad::kHugePageCopy) {
    absl::StatusOr<void*> copy = CopyIntoHugePages(fd, size, path);
    if (!copy.ok()) return copy.status();
    data = *copy;
  } else {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) return ErrnoError(errno, "cannot mmap", path);
  }

  MappedFile file;
  file.data_ = data;
  file.size_ = size;
  return file;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::pair<void*, size_t> MappedFile::Release() {
  return {std::exchange(data_, nullptr), std::exchange(size_, 0)};
}

void MappedFile::Unmap(void* data, size_t size) {
  if (data != nullptr) ::munmap(data, size);
}

void MappedFile::Reset() {
  Unmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tessera::util
