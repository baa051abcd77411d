// What tessera-localai answers to LocalAI's GetMetrics and ModelMetadata
// (proto/localai/backend.proto), from what the router already keeps:
//
//   MetricsOf        the loaded model's router metrics (router_metrics.h, one RouterMetrics per
//                    worker in one registry, summed over the `worker` label):
//                      tokens_generated         tessera_generation_tokens_total
//                      prompt_tokens_processed  tessera_prompt_tokens_total (the prompts of
//                                               admitted requests, prefix-cached tokens included)
//                      tokens_per_second        generation speed of one sequence: the count of
//                                               tessera_inter_token_latency_seconds over its sum
//                                               (0 before any request's second token)
//                    slot_id stays 0 and prompt_json_for_slot "": tessera batches every request
//                    in one engine and has no llama.cpp slot or per-slot prompt to report.
//                    Counts above INT32_MAX are reported as INT32_MAX (int32 fields).
//   ModelMetadataOf  the model's chat template: a one-message conversation ("user": "test") with
//                    the generation prompt, rendered with enable_thinking = true
//                    (rendered_template, as LocalAI's llama.cpp backend renders it) and false;
//                    supports_thinking when the two differ (the template has the switch) or the
//                    template's reasoning format is not none (the model writes <think> itself).
//                    No template, or one that refuses the conversation: false and "".
//
// Threading: pure functions of their arguments (the registry is thread-safe).
#pragma once

#include "localai/backend.pb.h"
#include "prometheus/registry.h"
#include "router/model_frontend.h"

namespace tessera::router::localai {

::backend::MetricsResponse MetricsOf(const prometheus::Registry& registry);

::backend::ModelMetadataResponse ModelMetadataOf(const ModelFrontend& frontend);

}  // namespace tessera::router::localai
