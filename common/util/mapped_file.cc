#include "common/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
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
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return ErrnoError(errno, "cannot mmap", path);

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
