// Typed reads of `{arch}.*` hyper-parameters for the common/model readers (model_config.cc,
// hybrid_config.cc): every failure is one INVALID_ARGUMENT line naming the key, so a bad model
// file tells a person which metadata entry to look at. Stateless; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace tessera::model {

// A positive int key; `fallback` (when > 0) is used if the key is absent, otherwise an absent
// key is "model metadata is missing '<key>'". Zero, negative and > INT_MAX values are errors.
absl::StatusOr<int> ReadPositiveInt(const gguf::GgufFile& file, const std::string& key,
                                    int fallback = 0);

// A positive int key that may be absent (then 0).
absl::StatusOr<int> ReadOptionalPositiveInt(const gguf::GgufFile& file, const std::string& key);

// A finite, positive float key; `fallback` if the key is absent.
absl::StatusOr<double> ReadPositiveFloat(const gguf::GgufFile& file, const std::string& key,
                                         double fallback);

// "model metadata is missing '<key>'" (INVALID_ARGUMENT: the file, not the caller, is wrong).
absl::Status MissingKeyError(const std::string& key);

}  // namespace tessera::model
