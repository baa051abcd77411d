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
#include "common/util/huge_page_buffer.h"

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

// Reads all of `fd` (`size` bytes) into huge-page memory, then makes it read-only.
absl::StatusOr<void*> CopyIntoHugePages(int fd, size_t size, const std::string& path) {
  absl::StatusOr<void*> memory = AllocateHugePageMemory(size);
  if (!memory.ok()) {
    return absl::Status(memory.status().code(),
                        absl::StrCat("cannot allocate memory for '", path, "': ",
                                     memory.status().message()));
  }
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
