#include "common/model/metadata_reader.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::model {

absl::Status MissingKeyError(const std::string& key) {
  return absl::InvalidArgumentError(absl::StrCat("model metadata is missing '", key, "'"));
}

absl::StatusOr<int> ReadPositiveInt(const gguf::GgufFile& file, const std::string& key,
                                    int fallback) {
  if (!file.HasKey(key)) {
    if (fallback > 0) return fallback;
    return MissingKeyError(key);
  }
  absl::StatusOr<int64_t> value = file.GetInt(key);
  if (!value.ok()) return value.status();
  if (*value <= 0 || *value > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model metadata '", key, "' = ", *value, " is out of range"));
  }
  return static_cast<int>(*value);
}

absl::StatusOr<int> ReadOptionalPositiveInt(const gguf::GgufFile& file, const std::string& key) {
  if (!file.HasKey(key)) return 0;
  return ReadPositiveInt(file, key);
}

absl::StatusOr<double> ReadPositiveFloat(const gguf::GgufFile& file, const std::string& key,
                                         double fallback) {
  if (!file.HasKey(key)) return fallback;
  absl::StatusOr<double> value = file.GetFloat(key);
  if (!value.ok()) return value.status();
  if (!std::isfinite(*value) || !(*value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model metadata '", key, "' = ", *value, " must be finite and positive"));
  }
  return *value;
}

}  // namespace tessera::model
