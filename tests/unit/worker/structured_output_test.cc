// Structured outputs through the step executor (worker/sampler/slot_grammars.h) on the tiny
// model, cpu backend and cuda runner on the emulated device (the mask kernel,
// kernels/cuda/token_mask.cuh), with seeded stochastic sampling so an unmasked token would
// show:
//   - a regex-, a JSON-schema- and a choice-guided request batched with an unguided one: each
//     guided output (up to its stop token) is a sentence of its grammar, then only the stop
//     token may follow;
//   - greedy, both backends give the same tokens (the emulated device sums as the cpu backend
//     does; stochastic draws come from each backend's own generator);
//   - the unguided request's tokens are those it gets alone (guided neighbours change nothing);
//   - a guided request preempted mid-output and re-admitted (the grammar replays its tokens)
//     continues exactly as one never interrupted;
//   - a plan with a grammar the worker cannot compile, or generated tokens the grammar rejects,
//     is INVALID_ARGUMENT naming the field; without a vocabulary a grammar is refused;
//   - logit_bias (the other per-row logits adjustment, applied before the mask): +100 on a token
//     makes greedy decoding pick it every time, -100 on the unbiased greedy choice moves it, the
//     same on both backends, and its batch neighbours are unchanged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/tokenizer/tokenizer.h"
#include "tests/unit/worker/cuda_runner_fixture.h"

namespace tessera::worker::testing {
namespace {

using device::DataType;

constexpr int32_t kEos = 0;

class StructuredOutputTest : public CudaRunnerTest {
 protected:
  void SetUp() override {
    CudaRunnerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto tokenizer = tokenizer::Tokenizer::FromGguf(*model_->file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    vocabulary_ = GrammarVocabularyOf(*tokenizer_);
  }

  static v1::Grammar Grammar(v1::GrammarKind kind, std::string text) {
    v1::Grammar grammar;
    grammar.set_kind(kind);
    grammar.set_text(std::move(text));
    grammar.add_stop_token_ids(kEos);
    return grammar;
  }

  // Stochastic sampling unless greedy (the backends draw from different generators: the cpu
  // sampler's mt19937_64, the device's Philox; greedy tokens are comparable across them).
  static v1::SamplingParams Sampling(uint64_t seed, bool greedy) {
    v1::SamplingParams sampling = DefaultSampling();
    sampling.set_temperature(greedy ? 0.0f : 1.0f);
    sampling.set_seed(seed);
    return sampling;
  }

  // The request's text up to its first stop token; `stopped` says whether there was one, and
  // every token after it must be the stop token again (once complete, only it is allowed) or
  // the unconstrained tail of a terminated grammar: the router would have ended the request.
  std::string TextUntilStop(const SimRequest& r, bool* stopped) const {
    std::vector<int32_t> ids;
    *stopped = false;
    for (int32_t t : r.tokens) {
      if (t == kEos) {
        *stopped = true;
        break;
      }
      ids.push_back(t);
    }
    auto text = tokenizer_->Decode(ids, {});
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  std::vector<SimRequest> Requests(bool greedy = false) const {
    std::vector<SimRequest> reqs;
    reqs.push_back({.prompt = Prompt(9, 1), .sampling = Sampling(11, greedy), .max_tokens = 24,
                    .grammar = Grammar(v1::GRAMMAR_KIND_REGEX, "(yes|no)-[0-9]{2,5}")});
    reqs.push_back({.prompt = Prompt(5, 2), .sampling = Sampling(12, greedy), .max_tokens = 40,
                    .grammar = Grammar(v1::GRAMMAR_KIND_JSON_SCHEMA,
                                       R"({"type": "object", "properties": {"ok": {"type": "boolean"},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99}},
                                           "required": ["ok", "n"]})")});
    reqs.push_back({.prompt = Prompt(7, 3), .sampling = Sampling(13, greedy), .max_tokens = 10});
    reqs.push_back({.prompt = Prompt(4, 4), .sampling = Sampling(14, greedy), .max_tokens = 12,
                    .grammar = Grammar(v1::GRAMMAR_KIND_EBNF,
                                       R"(root ::= "red" | "green" | "blue")")});
    return reqs;
  }

  void ExpectGrammarsHeld(const std::vector<SimRequest>& got) const {
    bool stopped = false;
    const std::string regex_text = TextUntilStop(got[0], &stopped);
    EXPECT_TRUE(stopped) << regex_text;
    EXPECT_TRUE(std::regex_match(regex_text, std::regex("(yes|no)-[0-9]{2,5}"))) << regex_text;

    const std::string json_text = TextUntilStop(got[1], &stopped);
    EXPECT_TRUE(stopped) << json_text;
    const nlohmann::json parsed = nlohmann::json::parse(json_text, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << json_text;
    EXPECT_TRUE(parsed["ok"].is_boolean()) << json_text;
    EXPECT_TRUE(parsed["n"].is_number_integer()) << json_text;
    EXPECT_EQ(parsed.size(), 2u) << json_text;

    const std::string choice = TextUntilStop(got[3], &stopped);
    EXPECT_TRUE(stopped) << choice;
    EXPECT_THAT(choice, ::testing::AnyOf("red", "green", "blue"));
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  GrammarVocabulary vocabulary_;
};

TEST_F(StructuredOutputTest, GuidedRowsFollowTheirGrammarsOnBothBackends) {
  auto cpu = MakeCpuRunner();
  auto cuda = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(cuda, nullptr);
  const std::vector<SimRequest> on_cpu = Serve(*cpu, Requests(), 4, &vocabulary_);
  const std::vector<SimRequest> on_cuda = Serve(*cuda, Requests(), 4, &vocabulary_);
  ExpectGrammarsHeld(on_cpu);
  ExpectGrammarsHeld(on_cuda);
  const std::vector<SimRequest> greedy_cpu = Serve(*cpu, Requests(true), 4, &vocabulary_);
  const std::vector<SimRequest> greedy_cuda = Serve(*cuda, Requests(true), 4, &vocabulary_);
  ExpectGrammarsHeld(greedy_cpu);
  if (!kOnGpu) {
    for (size_t i = 0; i < greedy_cpu.size(); ++i) {
      EXPECT_EQ(greedy_cuda[i].tokens, greedy_cpu[i].tokens) << "request " << i;
    }
  }
  // The unguided request alone: the same tokens as next to guided ones.
  const SimRequest unguided = Requests()[2];
  EXPECT_EQ(Serve(*cpu, {unguided}, 4, &vocabulary_)[0].tokens, on_cpu[2].tokens);
  EXPECT_EQ(Serve(*cuda, {unguided}, 4, &vocabulary_)[0].tokens, on_cuda[2].tokens);
}

TEST_F(StructuredOutputTest, AGuidedRequestContinuesExactlyAcrossPreemption) {
  auto cuda = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(cuda, nullptr);
  const SimRequest request = Requests()[1];
  const std::vector<SimRequest> first = Serve(*cuda, {request}, 4, &vocabulary_);

  StepExecutor executor(cuda.get(), {.max_num_seqs = 4, .grammar_vocabulary = &vocabulary_});
  SimRouter router(kBlockSize, kNumBlocks, 4);
  const int id = router.Add(request);
  v1::StepResult result;
  bool preempted = false;
  for (int step = 0; step < 200 && !router.Done(); ++step) {
    const absl::Status status =
        executor.Execute(router.NextPlan(), StepExecutor::Clock::now(), &result);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_TRUE(router.OnResult(result));
    if (!preempted && router.request(id).tokens.size() == 6) {
      router.Preempt(id, /*keep_cached_blocks=*/1);
      preempted = true;
    }
  }
  EXPECT_TRUE(preempted);
  EXPECT_EQ(router.request(id).tokens, first[0].tokens);
}

TEST_F(StructuredOutputTest, LogitBiasSteersBothBackendsAndOnlyItsRow) {
  auto cpu = MakeCpuRunner();
  auto cuda = MakeCudaRunner({.dtype = DataType::kF32});
  ASSERT_NE(cuda, nullptr);
  const SimRequest plain{.prompt = Prompt(6, 8), .sampling = Sampling(1, true), .max_tokens = 6};
  const std::vector<SimRequest> alone = Serve(*cpu, {plain}, 4);
  SimRequest forced = plain;
  v1::TokenBias* up = forced.sampling.add_logit_bias();
  up->set_token_id(77);
  up->set_bias(100.0f);
  SimRequest banned = plain;
  v1::TokenBias* down = banned.sampling.add_logit_bias();
  down->set_token_id(alone[0].tokens[0]);
  down->set_bias(-100.0f);
  for (ModelRunner* runner : {static_cast<ModelRunner*>(cpu.get()),
                              static_cast<ModelRunner*>(cuda.get())}) {
    const std::vector<SimRequest> got = Serve(*runner, {forced, plain, banned}, 4);
    EXPECT_EQ(got[0].tokens, std::vector<int32_t>(6, 77));
    EXPECT_EQ(got[1].tokens, alone[0].tokens) << "an unbiased neighbour changed";
    EXPECT_NE(got[2].tokens[0], alone[0].tokens[0]);
  }
}

TEST_F(StructuredOutputTest, BadGrammarsAreInvalidPlans) {
  auto cpu = MakeCpuRunner();
  auto plan_with = [&](const v1::Grammar& grammar, std::vector<int32_t> generated) {
    v1::StepPlan plan;
    plan.set_step(1);
    v1::NewSequence* seq = plan.add_new_sequences();
    seq->set_slot(0);
    *seq->mutable_sampling() = DefaultSampling();
    for (int32_t t : Prompt(4, 1)) seq->add_tokens(t);
    for (int32_t t : generated) seq->add_tokens(t);
    seq->set_num_prompt_tokens(4);
    *seq->mutable_grammar() = grammar;
    v1::SequenceStep* step = plan.add_sequences();
    step->set_slot(0);
    step->set_num_tokens(seq->tokens_size());
    for (int b = 1; b <= (seq->tokens_size() + kBlockSize - 1) / kBlockSize; ++b) {
      step->add_new_blocks(b);
    }
    return plan;
  };
  v1::StepResult result;
  {
    StepExecutor executor(cpu.get(), {.max_num_seqs = 4, .grammar_vocabulary = &vocabulary_});
    const absl::Status bad = executor.Execute(
        plan_with(Grammar(v1::GRAMMAR_KIND_REGEX, "a(b"), {}), StepExecutor::Clock::now(), &result);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("new_sequences[0].grammar"));
    // "x" is not a sentence prefix of (yes|no): a re-admission cannot carry it.
    const std::vector<int32_t> x = tokenizer_->Encode("x", {.add_special = false});
    const absl::Status rejected = executor.Execute(
        plan_with(Grammar(v1::GRAMMAR_KIND_REGEX, "(yes|no)"), x), StepExecutor::Clock::now(),
        &result);
    EXPECT_EQ(rejected.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(rejected.message()), ::testing::HasSubstr("not allowed by the grammar"));
  }
  StepExecutor without_vocabulary(cpu.get(), {.max_num_seqs = 4});
  const absl::Status refused = without_vocabulary.Execute(
      plan_with(Grammar(v1::GRAMMAR_KIND_JSON_OBJECT, ""), {}), StepExecutor::Clock::now(),
      &result);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("no vocabulary"));
}

// Two sequences on a runner, three steps (prefill, two decodes); row 0's mask (one allowed
// token per step, `allowed(step)`) is filled by the hook when `guided`. Returns each step's
// tokens [row 0, row 1] and, per step, whether it replayed a graph; counts the hook's calls.
struct TwoRowRun {
  std::vector<std::array<int32_t, 2>> tokens;
  std::vector<bool> replayed;
  int fills = 0;
};

TwoRowRun RunTwoRows(ModelRunner& runner, bool guided, int vocab,
                     const std::vector<int32_t>& prompt_a, const std::vector<int32_t>& prompt_b) {
  auto allowed = [vocab](int step) { return (step * 37 + 11) % vocab; };
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  runner.BeginSequence(0, greedy, prompt_a, {});
  runner.BeginSequence(1, greedy, prompt_b, {});
  const std::vector<int32_t> table_a = {1, 2, 3, 4}, table_b = {5, 6, 7, 8};
  std::vector<int32_t> next_a, next_b;
  std::vector<uint32_t> mask(static_cast<size_t>((vocab + 31) / 32));
  TwoRowRun run;
  for (int step = 0; step < 3; ++step) {
    std::vector<SequenceWork> batch =
        step == 0 ? std::vector{Work(prompt_a, 0, table_a, true, 0), Work(prompt_b, 0, table_b, true, 1)}
                  : std::vector{Work(next_a, static_cast<int>(prompt_a.size()) + step - 1, table_a, true, 0),
                                Work(next_b, static_cast<int>(prompt_b.size()) + step - 1, table_b, true, 1)};
    batch[0].mask_pending = guided;
    const FillPendingMasks fill = [&] {
      ++run.fills;
      std::fill(mask.begin(), mask.end(), 0u);
      mask[allowed(step) / 32] |= 1u << (allowed(step) % 32);
      batch[0].allowed_tokens = mask;
    };
    StepSamples samples;
    const absl::Status status = runner.Step(batch, &samples, guided ? fill : FillPendingMasks());
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || samples.rows.size() != 2) break;
    run.tokens.push_back({samples.rows[0].token, samples.rows[1].token});
    run.replayed.push_back(samples.info.graph_replayed);
    if (guided) EXPECT_EQ(samples.rows[0].token, allowed(step)) << "step " << step;
    next_a = {samples.rows[0].token};
    next_b = {samples.rows[1].token};
  }
  runner.EndSequence(0);
  runner.EndSequence(1);
  return run;
}

// The step executor marks guided rows mask_pending and their masks are filled inside Step
// (ModelRunner's FillPendingMasks): by the cuda runner after it enqueued the forward pass
// (a decode step replaying a forward-only graph), by the cpu runner after its forward pass.
// Directly on both runners: the hook runs once per step, the mask it fills decides the token
// (one allowed token, a different one each step, so a replay that kept a stale mask would
// fail), the unguided neighbour keeps the tokens it gets with no guided row beside it, and
// the cuda runner's second decode step replays the forward-only graph the first captured.
TEST_F(StructuredOutputTest, MasksFilledDuringTheStepDecideTheTokenAndDecodeStepsReplay) {
  auto cpu = MakeCpuRunner();
  auto cuda = MakeCudaRunner({.dtype = DataType::kF32});  // graphs: lazy
  ASSERT_NE(cuda, nullptr);
  const int vocab = config().vocab_size;
  const std::vector<int32_t> a = Prompt(5, 1), b = Prompt(6, 2);
  for (ModelRunner* runner : {static_cast<ModelRunner*>(cpu.get()),
                              static_cast<ModelRunner*>(cuda.get())}) {
    const TwoRowRun free = RunTwoRows(*runner, /*guided=*/false, vocab, a, b);
    const TwoRowRun guided = RunTwoRows(*runner, /*guided=*/true, vocab, a, b);
    ASSERT_EQ(free.tokens.size(), 3u);
    ASSERT_EQ(guided.tokens.size(), 3u);
    EXPECT_EQ(free.fills, 0);
    EXPECT_EQ(guided.fills, 3) << runner->backend_name();
    for (int step = 0; step < 3; ++step) {
      EXPECT_EQ(guided.tokens[step][1], free.tokens[step][1]) << runner->backend_name() << " step " << step;
    }
    if (runner == cuda.get()) {
      EXPECT_TRUE(free.replayed[2] && guided.replayed[2]) << "decode steps replay their graphs";
    }
  }
}

}  // namespace
}  // namespace tessera::worker::testing
