#include "router/request_builder.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"
#include "router/chat_inputs.h"
#include "router/stop_checker.h"
#include "common/grammar/grammar_spec.h"

namespace tessera::router {
namespace {

namespace v1 = ::tessera::v1;
namespace wv1 = ::tessera::worker::v1;

absl::StatusOr<std::vector<int32_t>> PromptTokens(const v1::GenerateRequest& request,
                                                  const ModelFrontend& model,
                                                  const ModelLimits& limits) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      return TokenizeText(request.text(), /*add_special=*/true, model);
    case v1::GenerateRequest::kTokenIds: {
      if (request.token_ids().ids().empty()) {
        return absl::InvalidArgumentError("token_ids.ids is empty: give at least one token");
      }
      absl::Status status =
          CheckTokenIds({request.token_ids().ids().data(),
                                   static_cast<size_t>(request.token_ids().ids().size())},
                                  "token_ids.ids", limits.vocab_size);
      if (!status.ok()) return status;
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    }
    case v1::GenerateRequest::kChat:
      return TokenizeChat(request.chat(), model);
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("prompt is missing: set one of text, token_ids or chat");
}

absl::StatusOr<wv1::SamplingParams> ResolveSampling(const v1::GenerateRequest& request,
                                                    const ModelLimits& limits,
                                                    uint64_t random_seed) {
  const v1::SamplingParams& in = request.sampling();
  sampling::SamplingParams params;
  if (in.has_temperature()) params.temperature = in.temperature();
  if (in.has_top_k()) params.top_k = in.top_k();
  if (in.has_top_p()) params.top_p = in.top_p();
  if (in.has_min_p()) params.min_p = in.min_p();
  if (in.has_repetition_penalty()) params.repetition_penalty = in.repetition_penalty();
  if (in.has_presence_penalty()) params.presence_penalty = in.presence_penalty();
  if (in.has_frequency_penalty()) params.frequency_penalty = in.frequency_penalty();
  params.seed = in.has_seed() ? in.seed() : random_seed;
  if (request.top_logprobs() > 0 && !request.logprobs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_logprobs = ", request.top_logprobs(), " needs logprobs = true"));
  }
  if (request.top_logprobs() > static_cast<uint32_t>(limits.max_logprobs)) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs must be in [0, ",
                                                   limits.max_logprobs, "], got ",
                                                   request.top_logprobs()));
  }
  params.num_logprobs = static_cast<int>(request.top_logprobs());
  if (request.logit_bias_size() > sampling::kMaxLogitBiasTokens) {
    return absl::InvalidArgumentError(absl::StrCat("logit_bias has ", request.logit_bias_size(),
                                                   " entries; at most ",
                                                   sampling::kMaxLogitBiasTokens));
  }
  // A proto map has no order: ascending ids, as the worker takes them.
  std::vector<std::pair<int32_t, float>> biases(request.logit_bias().begin(),
                                                request.logit_bias().end());
  std::sort(biases.begin(), biases.end());
  for (const auto& [token, bias] : biases) {
    if (token < 0 || token >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias has token id ", token,
                                                     ", outside the vocabulary [0, ",
                                                     limits.vocab_size, ")"));
    }
    params.logit_bias_tokens.push_back(token);
    params.logit_bias_values.push_back(bias);
  }
  absl::Status status = sampling::ValidateSamplingParams(params, limits.vocab_size);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.", status.message()));
  }
  wv1::SamplingParams out;
  out.set_temperature(params.temperature);
  out.set_top_k(params.top_k);
  out.set_top_p(params.top_p);
  out.set_min_p(params.min_p);
  out.set_repetition_penalty(params.repetition_penalty);
  out.set_presence_penalty(params.presence_penalty);
  out.set_frequency_penalty(params.frequency_penalty);
  out.set_seed(params.seed);
  out.set_logprobs(request.logprobs());
  out.set_top_logprobs(params.num_logprobs);
  for (size_t k = 0; k < params.logit_bias_tokens.size(); ++k) {
    wv1::TokenBias* entry = out.add_logit_bias();
    entry->set_token_id(params.logit_bias_tokens[k]);
    entry->set_bias(params.logit_bias_values[k]);
  }
  return out;
}

absl::Status CheckStops(const v1::GenerateRequest& request, const ModelLimits& limits) {
  // Stop matching costs O(length^2) per stop string per token: bound both.
  if (request.stop_size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(absl::StrCat("stop has ", request.stop_size(),
                                                   " strings; at most ", kMaxStopStrings));
  }
  for (int i = 0; i < request.stop_size(); ++i) {
    if (request.stop(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is an empty string"));
    }
    if (request.stop(i).size() > kMaxStopStringBytes) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is ", request.stop(i).size(),
                                                     " bytes; at most ", kMaxStopStringBytes));
    }
  }
  return CheckTokenIds({request.stop_token_ids().data(),
                        static_cast<size_t>(request.stop_token_ids().size())},
                       "stop_token_ids", limits.vocab_size);
}

// `requested` is the client's max_tokens; unset: `unset` says (the documented default
// kDefaultMaxTokens shrunk to what the context leaves, or all the context leaves). Messages quote only what the client sent.
absl::StatusOr<int> ResolveMaxTokens(size_t prompt_tokens, std::optional<uint32_t> requested,
                                     const ModelLimits& limits, MaxTokensDefault unset) {
  const size_t context = static_cast<size_t>(limits.max_context);
  if (prompt_tokens >= context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_tokens, " tokens) leaves no room for output in the model's context of ",
        limits.max_context, " tokens; shorten the prompt"));
  }
  if (!requested.has_value()) {
    const size_t left = context - prompt_tokens;
    return static_cast<int>(unset == MaxTokensDefault::kRestOfContext
                                ? left
                                : std::min<size_t>(kDefaultMaxTokens, left));
  }
  if (*requested < 1) return absl::InvalidArgumentError("max_tokens must be >= 1, got 0");
  const uint64_t total = uint64_t{prompt_tokens} + *requested;
  if (total > context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_tokens, " tokens) + max_tokens (", *requested, ") = ", total,
        " exceeds the model's context of ", limits.max_context,
        " tokens; shorten the prompt or lower max_tokens"));
  }
  return static_cast<int>(*requested);
}

absl::Status TooLong(const char* field, size_t size, size_t limit, const char* unit) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", size, " ", unit, "; at most ", limit));
}

// Size limits checked before any tokenization (see kMaxRequestBytes).
absl::Status CheckSizes(const v1::GenerateRequest& request) {
  const size_t bytes = request.ByteSizeLong();
  if (bytes > kMaxRequestBytes) return TooLong("the request", bytes, kMaxRequestBytes, "bytes");
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return TooLong("request_id", request.request_id().size(), kMaxRequestIdBytes, "bytes");
  }
  if (request.cache_salt().size() > kMaxCacheSaltBytes) {
    return TooLong("cache_salt", request.cache_salt().size(), kMaxCacheSaltBytes, "bytes");
  }
  if (request.has_chat() && request.chat().messages_size() > kMaxChatMessages) {
    return TooLong("chat.messages", request.chat().messages_size(), kMaxChatMessages,
                   "messages");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> TokenizeText(const std::string& text, bool add_special,
                                                  const ModelFrontend& model) {
  if (text.empty()) return absl::InvalidArgumentError("text is empty: give a prompt");
  std::vector<int32_t> ids =
      model.tokenizer->Encode(text, {.add_special = add_special, .parse_special = true});
  if (ids.empty()) {
    return absl::InvalidArgumentError("text tokenizes to no tokens (only unknown bytes?)");
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> TokenizeChat(const v1::Chat& chat,
                                                  const ModelFrontend& model) {
  if (chat.messages().empty()) {
    return absl::InvalidArgumentError("chat.messages is empty: give at least one message");
  }
  if (!model.chat_template.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this model has no usable chat template (", model.chat_template_error,
        "); send text or token_ids instead"));
  }
  absl::StatusOr<ChatInputs> inputs = ChatInputsFromProto(chat);
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<std::vector<chat::PromptPiece>> pieces = model.chat_template->ApplyPieces(
      inputs->messages, inputs->add_generation_prompt, inputs->extras());
  if (!pieces.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat.", pieces.status().message()));
  }
  // Message content is data: only the template's markers may become control tokens, so content
  // spelling "<|im_end|>" cannot close its turn (issue 15, item 4).
  std::vector<tokenizer::TextSegment> segments;
  segments.reserve(pieces->size());
  for (const chat::PromptPiece& piece : *pieces) {
    segments.push_back({.text = piece.text, .parse_special = piece.is_markup});
  }
  // The template adds BOS itself where the model wants one (`bos_token`), as Hugging Face's
  // apply_chat_template and vLLM's chat path assume: no second one here.
  return model.tokenizer->EncodeSegments(segments, {.add_special = false});
}

ModelLimits LimitsOfWorker(const wv1::DescribeResponse& worker) {
  const auto& features = worker.features();
  return ModelLimits{
      .vocab_size = worker.vocab_size(),
      .max_context = worker.max_context(),
      .max_logprobs = worker.max_logprobs(),
      .structured_outputs =
          std::find(features.begin(), features.end(), "structured_outputs") != features.end()};
}

namespace {

// The public constraint as a grammar spec (guided choice becomes an EBNF grammar). Precondition:
// a constraint is set.
absl::StatusOr<grammar::GrammarSpec> SpecOf(const v1::StructuredOutput& in) {
  switch (in.constraint_case()) {
    case v1::StructuredOutput::kJsonObject:
      if (!in.json_object()) {
        return absl::InvalidArgumentError("structured.json_object must be true");
      }
      return grammar::GrammarSpec{grammar::GrammarKind::kJsonObject, ""};
    case v1::StructuredOutput::kJsonSchema:
      return grammar::GrammarSpec{grammar::GrammarKind::kJsonSchema, in.json_schema()};
    case v1::StructuredOutput::kRegex:
      return grammar::GrammarSpec{grammar::GrammarKind::kRegex, in.regex()};
    case v1::StructuredOutput::kGrammar:
      return grammar::GrammarSpec{grammar::GrammarKind::kEbnf, in.grammar()};
    case v1::StructuredOutput::kChoice: {
      const std::vector<std::string> choices(in.choice().values().begin(),
                                             in.choice().values().end());
      absl::StatusOr<std::string> ebnf = grammar::ChoiceGrammar(choices);
      if (!ebnf.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("structured.choice: ", ebnf.status().message()));
      }
      return grammar::GrammarSpec{grammar::GrammarKind::kEbnf, *std::move(ebnf)};
    }
    case v1::StructuredOutput::CONSTRAINT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("structured has no constraint");
}

wv1::GrammarKind WorkerKindOf(grammar::GrammarKind kind) {
  switch (kind) {
    case grammar::GrammarKind::kJsonObject: return wv1::GRAMMAR_KIND_JSON_OBJECT;
    case grammar::GrammarKind::kJsonSchema: return wv1::GRAMMAR_KIND_JSON_SCHEMA;
    case grammar::GrammarKind::kRegex: return wv1::GRAMMAR_KIND_REGEX;
    case grammar::GrammarKind::kEbnf: return wv1::GRAMMAR_KIND_EBNF;
  }
  return wv1::GRAMMAR_KIND_NONE;
}

// The request's structured-output constraint as the worker takes it, parsed by xgrammar so a bad
// one is refused here ("structured.json_schema is invalid: ...").
absl::StatusOr<wv1::Grammar> ResolveGrammar(const v1::GenerateRequest& request,
                                            const ModelLimits& limits) {
  wv1::Grammar out;
  if (!request.has_structured() ||
      request.structured().constraint_case() == v1::StructuredOutput::CONSTRAINT_NOT_SET) {
    return out;
  }
  if (!limits.structured_outputs) {
    return absl::InvalidArgumentError(
        "structured: this worker cannot constrain output (it has no tokenizer vocabulary, e.g. "
        "--load-format dummy)");
  }
  absl::StatusOr<grammar::GrammarSpec> spec = SpecOf(request.structured());
  if (!spec.ok()) return spec.status();
  if (absl::StatusOr<xgrammar::Grammar> parsed = grammar::ParseGrammar(*spec); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("structured.", parsed.status().message()));
  }
  out.set_kind(WorkerKindOf(spec->kind));
  out.set_text(std::move(spec->text));
  return out;
}

}  // namespace

absl::StatusOr<ValidatedRequest> BuildRequest(const v1::GenerateRequest& request,
                                              const ModelFrontend& model,
                                              const ModelLimits& limits, uint64_t random_seed,
                                              MaxTokensDefault max_tokens_default) {
  ValidatedRequest out;
  if (absl::Status status = CheckSizes(request); !status.ok()) return status;
  out.request_id = request.request_id();
  absl::StatusOr<std::vector<int32_t>> prompt = PromptTokens(request, model, limits);
  if (!prompt.ok()) return prompt.status();
  out.prompt_tokens = std::move(*prompt);
  absl::StatusOr<int> max_tokens = ResolveMaxTokens(
      out.prompt_tokens.size(),
      request.has_max_tokens() ? std::optional<uint32_t>(request.max_tokens()) : std::nullopt,
      limits, max_tokens_default);
  if (!max_tokens.ok()) return max_tokens.status();
  out.max_tokens = *max_tokens;
  absl::Status status;
  absl::StatusOr<wv1::SamplingParams> sampling = ResolveSampling(request, limits, random_seed);
  if (!sampling.ok()) return sampling.status();
  out.sampling = std::move(*sampling);
  status = CheckStops(request, limits);
  if (!status.ok()) return status;
  out.stop.assign(request.stop().begin(), request.stop().end());
  out.stop_token_ids.assign(request.stop_token_ids().begin(), request.stop_token_ids().end());
  out.ignore_eos = request.ignore_eos();
  out.skip_special_tokens = request.skip_special_tokens();
  out.cache_salt = request.cache_salt();
  absl::StatusOr<wv1::Grammar> grammar = ResolveGrammar(request, limits);
  if (!grammar.ok()) return grammar.status();
  out.grammar = std::move(*grammar);
  return out;
}

}  // namespace tessera::router
