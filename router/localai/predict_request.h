// LocalAI's PredictOptions and ModelOptions (proto/localai/backend.proto) in tessera's terms: a
// public-API GenerateRequest (admitted afterwards by the router's own BuildRequest, exactly as a
// gRPC Generate) and the model file LoadModel names.
//
// LocalAI sends 0 for fields the user left unset, so 0 means "default" for Tokens, TopP, Penalty
// (repetition) and the like; a negative Seed means a random one.
//
// Threading: pure functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "localai/backend.pb.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::router::localai {

// Prompt (raw text), or with UseTokenizerTemplate the Messages (with their name, tool_call_id,
// reasoning_content and tool_calls) rendered by the model's chat template with Tools (unless
// ToolChoice is "none"); sampling (MinP included), Tokens as max_tokens, StopPrompts, IgnoreEOS,
// Grammar (the structured-output constraint), LogitBias, Logprobs/TopLogprobs (either > 0: each
// token's logprob, with TopLogprobs alternatives, or Logprobs of them when TopLogprobs is 0). A
// forced ToolChoice ("required", a named function) offers the tools like "auto": LocalAI forces
// the call itself by sending the Grammar it builds from the functions, and parses the tool calls
// out of the reply text, so replies carry the model's text. INVALID_ARGUMENT naming the LocalAI
// field when there is no prompt or a field is malformed (a negative Logprobs, say).
absl::StatusOr<::tessera::v1::GenerateRequest> ToGenerateRequest(
    const ::backend::PredictOptions& options);

// The GGUF file: ModelFile, else ModelPath/Model, else Model; INVALID_ARGUMENT when none is set.
absl::StatusOr<std::string> ModelFileOf(const ::backend::ModelOptions& options);

// ModelFileOf made canonical (std::filesystem::canonical: no `.`, `..`, repeated `/` or
// symlinks), so one file has one name. INVALID_ARGUMENT when none is named or it is not a
// regular file (a FIFO or a device would block or mislead the loader), NOT_FOUND when missing.
absl::StatusOr<std::string> CanonicalModelFile(const ::backend::ModelOptions& options);

}  // namespace tessera::router::localai
