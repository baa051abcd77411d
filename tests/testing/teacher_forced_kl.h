// How far a lossy configuration of the cpu runner (int8 activations, an f16 KV pool, a
// requantized model) moves the next-token distributions of real text from an exact one: each
// prefix's logits, teacher-forced one token per step, and the mean/max KL and top-1 agreement of
// two such runs (DESIGN.md §6, the KL gates). Used by lossy_numerics_test and
// quantized_model_kl_test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::testing_util {

// Real English text (our own words), long enough for 100+ next-token distributions (114 with
// the default model's tokenizer).
inline constexpr char kKlText[] =
    "The river town woke slowly that spring. Fishermen mended their nets on the stone quay while "
    "the baker argued with a delivery driver about the price of flour. Children ran past the "
    "church, late for school again, and an old dog watched them from the warm step of the "
    "library. By noon the fog had lifted from the water, and the ferry carried its first "
    "tourists of the year across to the island, where the lighthouse keeper was painting the "
    "railings a bright, unlikely green. Nobody could remember who had chosen the colour, but "
    "everyone agreed it suited him.";

// The model at `path` and kKlText tokenized by its tokenizer, for a test suite's setup: "" when
// both loaded, else the error to fail every test with (a missing file names fetch_model.sh).
std::string LoadKlFixture(const char* path, std::unique_ptr<worker::LoadedModel>* model,
                          std::vector<int32_t>* tokens);

// Logits after each prefix of `tokens`, one token per step (a decode step each), on a cpu runner
// of `model` with `options` (block_size and num_kv_blocks are set here). Two threads.
std::vector<std::vector<float>> TeacherForcedLogits(const worker::LoadedModel& model,
                                                    worker::CpuRunnerOptions options,
                                                    const std::vector<int32_t>& tokens);

// KL(p || q) of the softmaxes of two logit rows, in f64.
double KlDivergence(const std::vector<float>& p_logits, const std::vector<float>& q_logits);

struct KlSummary {
  size_t positions = 0;
  double mean_kl = 0;  // nats
  double max_kl = 0;
  double top1_agreement = 0;  // fraction of positions whose arg-max agrees
};

// Per position KL(exact || lossy), and the arg-max agreement. Precondition: same row counts.
KlSummary CompareLogits(const std::vector<std::vector<float>>& exact,
                        const std::vector<std::vector<float>>& lossy);

}  // namespace tessera::testing_util
