#include "router/worker_compatibility.h"

#include "absl/strings/str_cat.h"

namespace tessera::router {

absl::Status CheckWorkerEosFitsTokenizer(std::span<const int32_t> eos_ids,
                                         int32_t tokenizer_vocab) {
  for (int32_t eos : eos_ids) {
    if (eos < 0 || eos >= tokenizer_vocab) {
      return absl::FailedPreconditionError(absl::StrCat(
          "its EOS id ", eos, " is outside the router's tokenizer (", tokenizer_vocab,
          " ids); serve a model and tokenizer that agree (a --load-format dummy worker behind a "
          "smaller tokenizer needs --dummy-vocab)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::router
