// Whether the router can serve with a worker it just connected to (DESIGN.md §2: Describe).
// Today: every EOS id the worker reports must be an id of the router's tokenizer, since the stop
// checker compares sampled ids with them and detokenizes what it streams; a worker built for
// another vocabulary (e.g. `--load-format dummy` with a real shape behind a small tokenizer) is
// refused with the reason instead of failing later. Pure logic; the engine thread calls it.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace tessera::router {

// FAILED_PRECONDITION naming the first EOS id outside [0, tokenizer_vocab).
absl::Status CheckWorkerEosFitsTokenizer(std::span<const int32_t> eos_ids,
                                         int32_t tokenizer_vocab);

}  // namespace tessera::router
