// GgufStreamWriter: the header first (EncodeGgufHeader), then each tensor's bytes in order.
#include "common/gguf/gguf_stream_writer.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gguf/gguf_file.h"

namespace tessera::gguf {
namespace {

absl::Status ErrnoStatus(int error, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(error), absl::StrCat(what, ": ", std::strerror(error)));
}

// general.alignment when present (it must be a uint32 power of two), else the default.
absl::StatusOr<uint64_t> AlignmentOf(const GgufMetadataList& metadata) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    const uint32_t* alignment = std::get_if<uint32_t>(&value.storage());
    if (alignment == nullptr || *alignment == 0 || (*alignment & (*alignment - 1)) != 0) {
      return absl::InvalidArgumentError("general.alignment must be a uint32 power of two");
    }
    return *alignment;
  }
  return kGgufDefaultAlignment;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufStreamWriter>> GgufStreamWriter::Create(
    const std::string& path, const GgufMetadataList& metadata,
    std::vector<GgufTensorSpec> tensors) {
  const absl::StatusOr<uint64_t> alignment = AlignmentOf(metadata);
  if (!alignment.ok()) return alignment.status();
  const std::string partial = path + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (file == nullptr) return ErrnoStatus(errno, absl::StrCat("cannot create '", partial, "'"));
  const std::vector<uint8_t> header = EncodeGgufHeader(3, *alignment, metadata, tensors);
  std::unique_ptr<GgufStreamWriter> writer(
      new GgufStreamWriter(path, file, *alignment, std::move(tensors)));
  if (absl::Status status = writer->Write(header); !status.ok()) return status;
  return writer;
}

GgufStreamWriter::GgufStreamWriter(std::string path, std::FILE* file, uint64_t alignment,
                                   std::vector<GgufTensorSpec> tensors)
    : path_(std::move(path)), file_(file), alignment_(alignment), tensors_(std::move(tensors)) {}

GgufStreamWriter::~GgufStreamWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove((path_ + ".partial").c_str());
}

const GgufTensorSpec* GgufStreamWriter::next() const {
  return written_ < tensors_.size() ? &tensors_[written_] : nullptr;
}

absl::Status GgufStreamWriter::Write(std::span<const uint8_t> bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return ErrnoStatus(errno, absl::StrCat("cannot write '", path_, ".partial'"));
  }
  position_ += bytes.size();
  return absl::OkStatus();
}

absl::Status GgufStreamWriter::WriteNext(std::span<const uint8_t> data) {
  const GgufTensorSpec* spec = next();
  if (spec == nullptr) return absl::InvalidArgumentError("every tensor is already written");
  const uint64_t expected = GgufTensorDataBytes(*spec);
  if (data.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec->name, "': ", data.size(),
                                                   " bytes given, its dims and type take ",
                                                   expected));
  }
  if (absl::Status status = Write(data); !status.ok()) return status;
  static constexpr uint8_t kZeros[256] = {};
  const uint64_t padding = GgufAlignUp(position_, alignment_) - position_;
  for (uint64_t left = padding; left > 0;) {
    const uint64_t chunk = left < sizeof(kZeros) ? left : sizeof(kZeros);
    if (absl::Status status = Write({kZeros, chunk}); !status.ok()) return status;
    left -= chunk;
  }
  ++written_;
  return absl::OkStatus();
}

absl::Status GgufStreamWriter::Finish() {
  if (const GgufTensorSpec* missing = next(); missing != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", missing->name, "' and any after it were never written"));
  }
  std::FILE* file = std::exchange(file_, nullptr);
  if (std::fclose(file) != 0) return ErrnoStatus(errno, absl::StrCat("cannot close '", path_, ".partial'"));
  if (std::rename((path_ + ".partial").c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename '", path_, ".partial' to '", path_, "'"));
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace tessera::gguf
