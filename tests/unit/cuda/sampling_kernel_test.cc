// On-device sampler (kernels/cuda/sampling.cuh) on the emulator vs the f64 CPU reference
// (sampling_reference.h), under every test schedule; Philox4x32-10 known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/philox.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/sampling_reference.h"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {
namespace {

using reference::PenaltyEntry;
using reference::SampledRow;
using simt::DeviceBuffer;

// Probabilities: f32 weights exp((z - z_max) / T) (relative error ~|z - z_max| / T * 2^-24, at
// most ~2e-6 here) over an f32 total summed in ~V / 256-term chunks (~1e-5): 1e-4 relative.
constexpr double kProbRelTolerance = 1e-4;
constexpr double kProbAbsTolerance = 1e-9;
// Logprobs: f32 online log-sum-exp over <= 49152 terms vs f64: 1e-4 absolute.
constexpr double kLogprobTolerance = 1e-4;
// A row whose reference margins (sampling_reference.h) are below these may legitimately differ
// (f32 weights and sums, fixed-point masses on the device vs f64); such rows are counted, and
// must be rare. Weights and masses are within ~2e-6 relative (the probability tolerance's
// reasoning); the draw compares u * total with f32 running sums of <= V / 256 + 5 roundings per
// lane and step (~1e-6 at V = 4099, ~1.2e-5 worst case at V = 49152) plus the weights' error.
constexpr double kThresholdEpsilon = 1e-5;
constexpr double kDrawEpsilon = 2e-5;

bool NearBoundary(const SampledRow& want) {
  return want.margin_top_p < kThresholdEpsilon || want.margin_min_p < kThresholdEpsilon ||
         want.margin_draw < kDrawEpsilon;
}

struct DeviceRows {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  std::vector<float> probs;
  std::vector<int32_t> paths;  // SamplingPath per row
};

constexpr int32_t kTokenSentinel = -7;
constexpr float kValueSentinel = 777.0f;

template <typename T>
std::vector<T> NonEmpty(std::vector<T> values) {  // device buffers of at least one element
  if (values.empty()) values.push_back(T{});
  return values;
}

// Runs the sampler on the emulator; penalties (one list per row) may be empty (null pointers).
// Without `with_probs` the probabilities output is not asked for (DeviceRows::probs empty).
DeviceRows RunSampler(const simt::Schedule& schedule, const std::vector<float>& logits, int vocab,
                      const std::vector<SamplingRowParams>& params,
                      const std::vector<std::vector<PenaltyEntry>>& penalties,
                      bool with_probs = true) {
  const int rows = static_cast<int>(params.size());
  std::vector<int32_t> offsets{0}, tokens, counts;
  std::vector<uint8_t> in_prompt;
  for (const auto& list : penalties) {
    for (const PenaltyEntry& e : list) {
      tokens.push_back(e.token);
      counts.push_back(e.generated_count);
      in_prompt.push_back(e.in_prompt ? 1 : 0);
    }
    offsets.push_back(static_cast<int32_t>(tokens.size()));
  }
  DeviceBuffer<float> d_logits{std::span<const float>(logits)};
  DeviceBuffer<SamplingRowParams> d_params{std::span<const SamplingRowParams>(params)};
  DeviceBuffer<int32_t> d_offsets{std::span<const int32_t>(offsets)};
  DeviceBuffer<int32_t> d_tokens{std::span<const int32_t>(NonEmpty(tokens))};
  DeviceBuffer<int32_t> d_counts{std::span<const int32_t>(NonEmpty(counts))};
  DeviceBuffer<uint8_t> d_prompt{std::span<const uint8_t>(NonEmpty(in_prompt))};
  const size_t top = size_t(rows) * kSamplingMaxLogprobs;
  const std::vector<int32_t> token_init(top, kTokenSentinel);
  const std::vector<float> value_init(std::max(top, size_t(rows) * vocab), kValueSentinel);
  DeviceBuffer<int32_t> d_out_tokens{std::span<const int32_t>(token_init.data(), rows)};
  DeviceBuffer<float> d_out_logprobs{std::span<const float>(value_init.data(), rows)};
  DeviceBuffer<int32_t> d_top_ids{std::span<const int32_t>(token_init)};
  DeviceBuffer<float> d_top_logprobs{std::span<const float>(value_init.data(), top)};
  DeviceBuffer<float> d_probs{std::span<const float>(value_init.data(), size_t(rows) * vocab)};
  SamplingPenalties p;
  if (!penalties.empty()) {
    p = SamplingPenalties{d_offsets.get(), d_tokens.get(), d_counts.get(), d_prompt.get()};
  }
  const SamplingOutputs out{d_out_tokens.get(), d_out_logprobs.get(), d_top_ids.get(),
                            d_top_logprobs.get(), with_probs ? d_probs.get() : nullptr};
  // Poisoned: a finish that read scratch no pass wrote would see huge ids and logits.
  DeviceBuffer<uint8_t> workspace(SamplingWorkspaceBytes(rows, vocab));
  std::memset(workspace.get(), 0x7F, workspace.size());
  simt::TestLauncher launcher(schedule);
  const auto allowed = AllowSamplingSharedMemory(launcher, vocab);
  EXPECT_TRUE(allowed.ok()) << allowed;
  const auto status =
      LaunchSampling(launcher, static_cast<const float*>(d_logits.get()), rows, vocab,
                     static_cast<const SamplingRowParams*>(d_params.get()), p, out,
                     workspace.get());
  EXPECT_TRUE(status.ok()) << status;
  const int32_t* paths = SamplingWorkspaceAt(workspace.get(), rows, vocab).paths;
  return DeviceRows{d_out_tokens.ToHost(), d_out_logprobs.ToHost(), d_top_ids.ToHost(),
                    d_top_logprobs.ToHost(),
                    with_probs ? d_probs.ToHost() : std::vector<float>{},
                    std::vector<int32_t>(paths, paths + rows)};
}

SampledRow Reference(const std::vector<float>& logits, int vocab, int row,
                     const SamplingRowParams& p, const std::vector<PenaltyEntry>& penalties) {
  const std::span<const float> x(logits.data() + size_t(row) * vocab, size_t(vocab));
  return reference::SampleRow(x, p, penalties, SamplingUniform(p.seed, p.position));
}

// Compares row `row` (token, logprobs, probabilities). A difference in the token or the
// probabilities is a failure unless the reference was near a boundary (NearBoundary); then it is
// tolerated and reported through the return value (true: a near-boundary row that differed).
bool CheckRow(const DeviceRows& got, const SampledRow& want, int vocab, int row,
              const std::string& what) {
  SCOPED_TRACE(what + " row " + std::to_string(row));
  const size_t top = size_t(row) * kSamplingMaxLogprobs;
  for (size_t r = 0; r < want.top_ids.size(); ++r) {
    EXPECT_EQ(got.top_ids[top + r], want.top_ids[r]) << "top rank " << r;
    EXPECT_NEAR(got.top_logprobs[top + r], want.top_logprobs[r], kLogprobTolerance);
  }
  for (size_t r = want.top_ids.size(); r < size_t(kSamplingMaxLogprobs); ++r) {
    EXPECT_EQ(got.top_ids[top + r], -1);
  }
  std::vector<std::string> differences;
  if (got.tokens[row] != want.token) {
    differences.push_back("token " + std::to_string(got.tokens[row]) + " want " +
                          std::to_string(want.token));
  } else {
    EXPECT_NEAR(got.logprobs[row], want.logprob, kLogprobTolerance);
  }
  for (int i = 0; i < vocab && !got.probs.empty() && differences.size() < 5; ++i) {
    const double g = got.probs[size_t(row) * vocab + i], w = want.probs[i];
    if ((w == 0.0) != (g == 0.0) || std::fabs(g - w) > kProbRelTolerance * w + kProbAbsTolerance) {
      differences.push_back("prob of " + std::to_string(i) + ": " + std::to_string(g) + " want " +
                            std::to_string(w));
    }
  }
  if (differences.empty()) return false;
  if (NearBoundary(want)) return true;
  for (const std::string& d : differences) ADD_FAILURE() << d;
  return false;
}

std::vector<float> RandomLogits(int rows, int vocab, std::mt19937& rng, bool quantized) {
  std::vector<float> x = simt::RandomFloats(size_t(rows) * vocab, rng, -6.0f, 6.0f);
  if (quantized) {  // many exact ties, at every threshold
    for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
  }
  return x;
}

SamplingRowParams RandomParams(std::mt19937& rng, float temperature, int top_k, float top_p,
                               float min_p, int num_logprobs) {
  SamplingRowParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.num_logprobs = num_logprobs;
  p.seed = (uint64_t(rng()) << 32) | rng();
  p.position = rng() % 5000;
  return p;
}

class SamplingKernelTest : public simt::KernelTest {};

// Runs `rows` x `vocab` random rows with the given filters; returns the number of rows that
// differed from the reference near a boundary.
int CheckFilters(const simt::Schedule& schedule, int rows, int vocab, std::mt19937& rng,
                 float temperature, int top_k, float top_p, float min_p, bool quantized,
                 const std::string& what) {
  const std::vector<float> logits = RandomLogits(rows, vocab, rng, quantized);
  std::vector<SamplingRowParams> params;
  for (int r = 0; r < rows; ++r) {
    params.push_back(RandomParams(rng, temperature, top_k, top_p, min_p,
                                  std::min(vocab, 1 + r % kSamplingMaxLogprobs)));
  }
  const DeviceRows got = RunSampler(schedule, logits, vocab, params, {});
  int near = 0;
  for (int r = 0; r < rows; ++r) {
    near += CheckRow(got, Reference(logits, vocab, r, params[r], {}), vocab, r, what);
  }
  return near;
}

TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  // Random123 kat_vectors, "philox4x32 10": counter[4], key[2] -> output[4].
  struct Vector {
    PhiloxCounter counter;
    PhiloxKey key;
    uint32_t expected[4];
  };
  const Vector vectors[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Vector& v : vectors) {
    const PhiloxCounter out = Philox4x32_10(v.counter, v.key);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(out.word[w], v.expected[w]) << "word " << w;
  }
  // The sampling uniform: word 0 of counter (position, 0, 0, 0) under key (seed), top 24 bits.
  EXPECT_EQ(SamplingUniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) * 0x1.0p-24f);
  EXPECT_LT(PhiloxUniform01(0xffffffffu), 1.0f);
  EXPECT_EQ(PhiloxUniform01(0u), 0.0f);
}

TEST_P(SamplingKernelTest, GreedyIsArgmaxWithLowestIndexOnTies) {
  std::mt19937 rng(7);
  for (int vocab : {1, 31, 1000, 4099}) {
    for (int rows : {1, 3, 17}) {
      std::vector<float> logits = RandomLogits(rows, vocab, rng, false);
      std::vector<SamplingRowParams> params;
      for (int r = 0; r < rows; ++r) {
        float* x = logits.data() + size_t(r) * vocab;
        if (r % 2 == 1) {  // plant ties with the maximum at random ids
          const float max = *std::max_element(x, x + vocab);
          for (int t = 0; t < 3; ++t) x[rng() % vocab] = max;
        }
        params.push_back(RandomParams(rng, r % 3 == 0 ? 0.0f : 5e-6f, 0, 1.0f, 0.0f, 0));
      }
      const DeviceRows got = RunSampler(GetParam(), logits, vocab, params, {});
      for (int r = 0; r < rows; ++r) {
        const float* x = logits.data() + size_t(r) * vocab;
        const int32_t argmax = static_cast<int32_t>(std::max_element(x, x + vocab) - x);
        EXPECT_EQ(got.tokens[r], argmax) << "vocab " << vocab << " row " << r;
        CheckRow(got, Reference(logits, vocab, r, params[r], {}), vocab, r, "greedy");
      }
    }
  }
}

TEST_P(SamplingKernelTest, EachFilterAloneAndCombinedMatchesReference) {
  std::mt19937 rng(11);
  int near = 0, total = 0;
  struct Filters {
    const char* name;
    float temperature;
    int top_k;
    float top_p;
    float min_p;
  };
  const Filters filters[] = {
      {"temperature", 0.7f, 0, 1.0f, 0.0f},
      {"top_k", 1.0f, 5, 1.0f, 0.0f},
      {"top_k_1", 1.3f, 1, 1.0f, 0.0f},
      {"top_p", 1.0f, 0, 0.8f, 0.0f},
      {"min_p", 1.0f, 0, 1.0f, 0.05f},
      {"combined", 0.8f, 40, 0.9f, 0.02f},
      {"combined_small_p", 1.5f, 200, 0.3f, 0.1f},
  };
  for (const Filters& f : filters) {
    for (auto [rows, vocab] : {std::pair{1, 1}, {3, 31}, {17, 1000}, {3, 4099}}) {
      for (bool quantized : {false, true}) {
        const std::string what = std::string(f.name) + " vocab " + std::to_string(vocab) +
                                 (quantized ? " quantized" : "");
        near += CheckFilters(GetParam(), rows, vocab, rng, f.temperature, f.top_k, f.top_p, f.min_p,
                             quantized, what);
        total += rows;
      }
    }
  }
  EXPECT_LE(near * 50, total) << near << " differing near-boundary rows of " << total;  // <= 2%
}

// The passes read aligned rows as float4s and the rest element by element: rows of vocab 4k + 3
// (row 0 aligned with a 3-id tail, row 1 unaligned), each with its best ids moved to the ends
// and to one float4 lane, must keep and rank them in every filter and the top-N logprobs.
TEST_P(SamplingKernelTest, BestIdsAtTheRowEndsAreSelected) {
  std::mt19937 rng(17);
  constexpr int kVocab = 259, kRows = 3;
  std::vector<float> logits = RandomLogits(kRows, kVocab, rng, false);
  for (int r = 0; r < kRows; ++r) {
    float* row = logits.data() + size_t(r) * kVocab;
    const int best[] = {kVocab - 1, kVocab - 2, kVocab - 3, 0, 129};
    for (int b = 0; b < 5; ++b) row[best[(b + r) % 5]] = 9.0f - 0.5f * float(b);
  }
  struct Filters {
    int top_k;
    float top_p;
  };
  for (const Filters f : {Filters{3, 1.0f}, Filters{0, 0.5f}, Filters{4, 0.9f}}) {
    std::vector<SamplingRowParams> params;
    for (int r = 0; r < kRows; ++r) {
      params.push_back(RandomParams(rng, 0.7f, f.top_k, f.top_p, 0.0f, 5 + r));
    }
    const DeviceRows got = RunSampler(GetParam(), logits, kVocab, params, {});
    for (int r = 0; r < kRows; ++r) {
      EXPECT_FALSE(CheckRow(got, Reference(logits, kVocab, r, params[r], {}), kVocab, r,
                            "top_k " + std::to_string(f.top_k)))
          << "a near-boundary difference where the best ids are far apart";
    }
  }
}

TEST_P(SamplingKernelTest, PenaltiesMatchReference) {
  std::mt19937 rng(23);
  int near = 0, total = 0;
  for (auto [rows, vocab] : {std::pair{3, 31}, {17, 1000}, {1, 4099}}) {
    const std::vector<float> logits = RandomLogits(rows, vocab, rng, false);
    std::vector<SamplingRowParams> params;
    std::vector<std::vector<PenaltyEntry>> lists(rows);
    for (int r = 0; r < rows; ++r) {
      SamplingRowParams p = RandomParams(rng, r % 4 == 0 ? 0.0f : 0.9f, r % 3 == 1 ? 20 : 0,
                                         r % 2 ? 0.95f : 1.0f, 0.0f, 3);
      p.repetition_penalty = r % 5 == 2 ? 1.0f : 1.3f;  // one with presence/frequency only
      p.presence_penalty = 0.5f;
      p.frequency_penalty = r % 2 ? -0.3f : 0.7f;
      params.push_back(p);
      // Penalize the best tokens (so penalties change the outcome) and random others.
      const float* x = logits.data() + size_t(r) * vocab;
      std::vector<int32_t> ids;
      for (int t = 0; t < std::min(vocab, 12); ++t) ids.push_back(rng() % vocab);
      ids.push_back(static_cast<int32_t>(std::max_element(x, x + vocab) - x));
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      for (int32_t id : ids) {
        lists[r].push_back({id, static_cast<int32_t>(rng() % 4), rng() % 2 == 0});
      }
    }
    const DeviceRows got = RunSampler(GetParam(), logits, vocab, params, lists);
    for (int r = 0; r < rows; ++r) {
      near += CheckRow(got, Reference(logits, vocab, r, params[r], lists[r]), vocab, r,
                       "penalties vocab " + std::to_string(vocab));
      ++total;
    }
  }
  EXPECT_LE(near, 1) << near << " differing near-boundary rows of " << total;
}

// Masked tokens (-inf logits, e.g. a grammar mask) weigh 0 and are never drawn.
TEST_P(SamplingKernelTest, MaskedLogitsMatchReference) {
  std::mt19937 rng(29);
  int near = 0;
  for (int vocab : {31, 1000}) {
    const int rows = 4;
    std::vector<float> logits = RandomLogits(rows, vocab, rng, false);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i % 4 == 0) logits[i] = -INFINITY;
    }
    std::vector<SamplingRowParams> params = {
        RandomParams(rng, 1.0f, 0, 1.0f, 0.0f, 5), RandomParams(rng, 0.7f, 0, 0.9f, 0.0f, 5),
        RandomParams(rng, 1.2f, 30, 0.95f, 0.01f, 5), RandomParams(rng, 0.0f, 0, 1.0f, 0.0f, 5)};
    const DeviceRows got = RunSampler(GetParam(), logits, vocab, params, {});
    for (int r = 0; r < rows; ++r) {
      near += CheckRow(got, Reference(logits, vocab, r, params[r], {}), vocab, r, "masked");
      EXPECT_NE((size_t(r) * vocab + got.tokens[r]) % 4, 0u) << "drew a masked token";
      EXPECT_TRUE(std::isfinite(got.logprobs[r]));
    }
  }
  EXPECT_LE(near, 1);
}

TEST_P(SamplingKernelTest, RowResultDoesNotDependOnBatchNeighbours) {
  std::mt19937 rng(31);
  const int vocab = 1000, rows = 3;
  std::vector<float> logits = RandomLogits(rows, vocab, rng, false);
  std::vector<SamplingRowParams> params;
  for (int r = 0; r < rows; ++r) params.push_back(RandomParams(rng, 1.0f, 50, 0.9f, 0.01f, 5));
  const DeviceRows first = RunSampler(GetParam(), logits, vocab, params, {});
  // New neighbours (rows 0 and 2): other logits, seeds, positions and filters.
  const std::vector<float> other = RandomLogits(rows, vocab, rng, false);
  std::copy(other.begin(), other.begin() + vocab, logits.begin());
  std::copy(other.begin() + 2 * vocab, other.end(), logits.begin() + 2 * vocab);
  params[0] = RandomParams(rng, 0.5f, 0, 0.5f, 0.0f, 20);
  params[2] = RandomParams(rng, 0.0f, 0, 1.0f, 0.0f, 0);
  const DeviceRows second = RunSampler(GetParam(), logits, vocab, params, {});
  EXPECT_EQ(second.tokens[1], first.tokens[1]);
  EXPECT_EQ(second.logprobs[1], first.logprobs[1]);
  for (int i = 0; i < vocab; ++i) ASSERT_EQ(second.probs[vocab + i], first.probs[vocab + i]);
  for (int t = 0; t < kSamplingMaxLogprobs; ++t) {
    EXPECT_EQ(second.top_ids[kSamplingMaxLogprobs + t], first.top_ids[kSamplingMaxLogprobs + t]);
  }
}

TEST_P(SamplingKernelTest, PaddingRowsAreInert) {
  std::mt19937 rng(37);
  const int vocab = 31, rows = 17;
  const std::vector<float> logits = RandomLogits(rows, vocab, rng, false);
  std::vector<SamplingRowParams> params;
  for (int r = 0; r < rows; ++r) {
    params.push_back(RandomParams(rng, 1.0f, 0, 0.9f, 0.0f, 4));
    params.back().active = r % 3 == 1 ? 0 : 1;
  }
  const DeviceRows got = RunSampler(GetParam(), logits, vocab, params, {});
  for (int r = 0; r < rows; ++r) {
    if (params[r].active) {
      CheckRow(got, Reference(logits, vocab, r, params[r], {}), vocab, r, "active");
      continue;
    }
    EXPECT_EQ(got.tokens[r], kTokenSentinel) << "row " << r;
    EXPECT_EQ(got.logprobs[r], kValueSentinel);
    for (int t = 0; t < kSamplingMaxLogprobs; ++t) {
      EXPECT_EQ(got.top_ids[size_t(r) * kSamplingMaxLogprobs + t], kTokenSentinel);
    }
    for (int i = 0; i < vocab; ++i) EXPECT_EQ(got.probs[size_t(r) * vocab + i], kValueSentinel);
  }
}

// Rows of 3 chunks (8192 + 8192 + 3617 ids): the split-row passes and the finish's two paths.
// Peaked rows with a filter, and greedy rows with logprobs, are served from candidates (a few
// hundred ids); a row without any filter, and one of equal logits under top-p, take the full
// passes; a greedy row without logprobs needs the statistics only. Every row matches the
// reference, penalties included (ids in every chunk).
TEST_P(SamplingKernelTest, SplitRowsServeCandidatesAndFallBackToFullRows) {
  constexpr int kVocab = 2 * kSamplingChunk + 3617;
  std::mt19937 rng(29);
  std::vector<float> logits = reference::HeadLikeLogits(8, kVocab, rng);
  std::fill_n(logits.begin() + 7 * kVocab, kVocab, 1.5f);  // row 7: equal logits
  const auto path = [](SamplingPath p) { return static_cast<int32_t>(p); };
  std::vector<SamplingRowParams> params = {
      RandomParams(rng, 0.8f, 0, 0.95f, 0.0f, 5),   // top-p + logprobs
      RandomParams(rng, 1.0f, 40, 1.0f, 0.0f, 0),   // top-k
      RandomParams(rng, 0.7f, 0, 1.0f, 0.05f, 0),   // min-p
      RandomParams(rng, 0.0f, 0, 1.0f, 0.0f, 20),   // greedy + logprobs
      RandomParams(rng, 0.0f, 0, 1.0f, 0.0f, 0),    // greedy
      RandomParams(rng, 1.0f, 0, 1.0f, 0.0f, 3),    // no filter: every id may be drawn
      RandomParams(rng, 0.9f, 50, 0.9f, 0.02f, 2),  // everything, with penalties
      RandomParams(rng, 1.0f, 0, 0.9f, 0.0f, 1)};   // equal logits
  // Without the probabilities output, the row without filters draws within one chunk.
  std::vector<int32_t> want_paths = {
      path(SamplingPath::kCandidates), path(SamplingPath::kCandidates),
      path(SamplingPath::kCandidates), path(SamplingPath::kCandidates),
      path(SamplingPath::kStatsOnly),  path(SamplingPath::kChunkDraw),
      path(SamplingPath::kCandidates), path(SamplingPath::kFullRows)};
  std::vector<std::vector<PenaltyEntry>> lists(params.size());
  params[6].repetition_penalty = 1.4f;
  params[6].frequency_penalty = 0.3f;
  const float* row6 = logits.data() + 6 * size_t(kVocab);
  std::vector<int32_t> ids = {5, kSamplingChunk + 7, kVocab - 1,
                              static_cast<int32_t>(std::max_element(row6, row6 + kVocab) - row6)};
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) lists[6].push_back({id, 2, true});
  int near = 0;
  for (bool with_probs : {false, true}) {
    const DeviceRows got = RunSampler(GetParam(), logits, kVocab, params, lists, with_probs);
    if (with_probs) want_paths[5] = path(SamplingPath::kFullRows);  // probs: the whole row
    for (size_t r = 0; r < params.size(); ++r) {
      near += CheckRow(got, Reference(logits, kVocab, int(r), params[r], lists[r]), kVocab,
                       int(r), with_probs ? "split rows, probs" : "split rows");
      EXPECT_EQ(got.paths[r], want_paths[r]) << "row " << r << (with_probs ? ", probs" : "");
    }
  }
  EXPECT_EQ(near, 0);
}

// Rows without any filter over 3 chunks of spread-out logits (every chunk holds mass): the
// draw picks a chunk by the chunks' masses and narrows within it; the tokens are the reference's.
TEST_P(SamplingKernelTest, RowsWithoutFiltersDrawWithinOneChunk) {
  constexpr int kVocab = 2 * kSamplingChunk + 1001, kRows = 12;
  std::mt19937 rng(31);
  const std::vector<float> logits = RandomLogits(kRows, kVocab, rng, false);
  std::vector<SamplingRowParams> params;
  std::vector<std::vector<PenaltyEntry>> lists(kRows);
  for (int r = 0; r < kRows; ++r) {
    params.push_back(RandomParams(rng, r % 2 ? 1.5f : 0.6f, 0, 1.0f, 0.0f, r % 3));
    if (r % 4 == 1) {
      params.back().repetition_penalty = 1.3f;
      for (int32_t id : {3, kSamplingChunk + 11, kVocab - 2}) lists[r].push_back({id, 1, false});
    }
  }
  const DeviceRows got = RunSampler(GetParam(), logits, kVocab, params, lists, false);
  int near = 0;
  for (int r = 0; r < kRows; ++r) {
    near += CheckRow(got, Reference(logits, kVocab, r, params[r], lists[r]), kVocab, r,
                     "no filter");
    EXPECT_EQ(got.paths[r], static_cast<int32_t>(SamplingPath::kChunkDraw)) << "row " << r;
  }
  EXPECT_LE(near, 1);
}

// SmolLM2's vocab, under the first test schedule only (emulator time).
class SamplingKernelLargeVocabTest : public simt::SingleKernelTest {};

TEST_F(SamplingKernelLargeVocabTest, MatchesReference) {
  std::mt19937 rng(41);
  const simt::Schedule schedule = simt::TestSchedules().front();
  int near = CheckFilters(schedule, 2, 49152, rng, 0.8f, 0, 0.95f, 0.001f, false, "top_p");
  near += CheckFilters(schedule, 1, 49152, rng, 1.0f, 1000, 0.9f, 0.0f, true, "top_k + top_p");
  EXPECT_EQ(near, 0);
}

// A vocabulary whose penalty bitmap (52 KB) is beyond CUDA's default 48 KiB of shared memory:
// the launch fails unless the kernel opted in (the emulator models the limit as a GPU applies
// it), and after opting in it matches the reference. Greedy rows keep the emulator time short.
TEST_F(SamplingKernelLargeVocabTest, LargePenaltyBitmapIsALaunchErrorWithoutTheOptIn) {
  constexpr int kVocab = 416003;
  ASSERT_GT(SamplingPenaltyBitmapBytes(kVocab), size_t{48} * 1024);
  std::mt19937 rng(43);
  const std::vector<float> logits = RandomLogits(1, kVocab, rng, false);
  SamplingRowParams p = RandomParams(rng, 0.0f, 0, 1.0f, 0.0f, 2);
  p.repetition_penalty = 1.3f;
  const std::vector<std::vector<PenaltyEntry>> penalties = {
      {{.token = 17, .generated_count = 1, .in_prompt = true},
       {.token = kVocab - 2, .generated_count = 2, .in_prompt = false}}};
  DeviceBuffer<float> d_logits{std::span<const float>(logits)};
  DeviceBuffer<SamplingRowParams> d_params{std::span<const SamplingRowParams>(&p, 1)};
  const std::vector<int32_t> offsets = {0, 2}, tokens = {17, kVocab - 2}, counts = {1, 2};
  const std::vector<uint8_t> in_prompt = {1, 0};
  DeviceBuffer<int32_t> d_offsets{std::span<const int32_t>(offsets)};
  DeviceBuffer<int32_t> d_tokens{std::span<const int32_t>(tokens)};
  DeviceBuffer<int32_t> d_counts{std::span<const int32_t>(counts)};
  DeviceBuffer<uint8_t> d_prompt{std::span<const uint8_t>(in_prompt)};
  DeviceBuffer<int32_t> d_token(1), d_top_ids(kSamplingMaxLogprobs);
  DeviceBuffer<float> d_logprob(1), d_top_logprobs(kSamplingMaxLogprobs);
  const SamplingPenalties pen{d_offsets.get(), d_tokens.get(), d_counts.get(), d_prompt.get()};
  const SamplingOutputs out{d_token.get(), d_logprob.get(), d_top_ids.get(),
                            d_top_logprobs.get(), nullptr};
  DeviceBuffer<uint8_t> workspace(SamplingWorkspaceBytes(1, kVocab));
  simt::TestLauncher launcher(simt::TestSchedules().front());
  const auto without = LaunchSampling(launcher, static_cast<const float*>(d_logits.get()), 1,
                                      kVocab, static_cast<const SamplingRowParams*>(d_params.get()),
                                      pen, out, workspace.get());
  EXPECT_FALSE(without.ok()) << "52 KB of dynamic shared memory launched without opting in";
  DeviceRows got = RunSampler(simt::TestSchedules().front(), logits, kVocab, {p}, penalties);
  CheckRow(got, Reference(logits, kVocab, 0, p, penalties.front()), kVocab, 0, "large vocab");
}

INSTANTIATE_TEST_SUITE_P(Schedules, SamplingKernelTest, ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
