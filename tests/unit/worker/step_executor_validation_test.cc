// Plan validation: every bad plan gets INVALID_ARGUMENT naming the field, changes nothing (the
// slot table and block counts are the same afterwards), and the next valid plan still computes
// exactly what it would have without the bad ones.
#include <cstring>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/unit/worker/tiny_model_fixture.h"
#include "worker/step_executor.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 128;
constexpr int kMaxNumSeqs = 4;

v1::NewSequence* AddNew(v1::StepPlan& plan, int slot, const std::vector<int32_t>& tokens,
                        int num_cached = 0) {
  v1::NewSequence* seq = plan.add_new_sequences();
  seq->set_slot(slot);
  *seq->mutable_sampling() = testing::DefaultSampling();
  for (int32_t t : tokens) seq->add_tokens(t);
  seq->set_num_prompt_tokens(static_cast<int32_t>(tokens.size()));
  seq->set_num_cached_tokens(num_cached);
  return seq;
}

v1::SequenceStep* AddStep(v1::StepPlan& plan, int slot, int num_tokens,
                          const std::vector<int32_t>& blocks = {}) {
  v1::SequenceStep* step = plan.add_sequences();
  step->set_slot(slot);
  step->set_num_tokens(num_tokens);
  for (int32_t b : blocks) step->add_new_blocks(b);
  return step;
}

// Everything a plan could change, as text (so a mismatch prints readably).
std::string Snapshot(const StepExecutor& executor) {
  const SlotTable& t = executor.slots();
  std::string out = absl::StrCat("last_step ", executor.last_step(), " active ", t.num_active());
  for (int s = 0; s < t.max_num_seqs(); ++s) {
    const Slot& slot = t.at(s);
    absl::StrAppend(&out, "\nslot ", s, ": active ", slot.active, " tokens [",
                    absl::StrJoin(slot.tokens, ","), "] prompt ", slot.num_prompt_tokens,
                    " computed ", slot.num_computed, " cached ", slot.num_cached_tokens,
                    " blocks [", absl::StrJoin(slot.block_table, ","), "]");
  }
  for (int32_t b = 0; b < t.num_blocks(); ++b) {
    if (t.block_refs(b) != 0 || t.cached_refs(b) != 0) {
      absl::StrAppend(&out, "\nblock ", b, ": refs ", t.block_refs(b), " cached ",
                      t.cached_refs(b));
    }
  }
  return out;
}

class StepExecutorValidationTest : public testing::TinyModelTest {
 protected:
  // Plans 1 and 2 leave: slot 0 (8 known, 7 computed, blocks [1, 2]); slot 1 a prefix hit on
  // slot 0's block 1 (cached 4, blocks [1, 3], 8 known, 7 computed); slot 2 (3 known, 2
  // computed, blocks [4], block 4 partly filled); slot 3 free.
  static std::vector<v1::StepPlan> SetupPlans() {
    const std::vector<int32_t> p0 = Prompt(6, 1);
    v1::StepPlan one;
    one.set_step(1);
    AddNew(one, 0, p0);
    AddStep(one, 0, 6, {1, 2});
    v1::StepPlan two;
    two.set_step(2);
    AddNew(two, 1, {p0[0], p0[1], p0[2], p0[3], 50, 51, 52}, /*num_cached=*/4);
    AddNew(two, 2, {60, 61});
    AddStep(two, 0, 1);
    AddStep(two, 1, 3, {1, 3});
    AddStep(two, 2, 2, {4});
    return {one, two};
  }

  // The valid step 3: one decode token for each live slot.
  static v1::StepPlan DecodeAll() {
    v1::StepPlan plan;
    plan.set_step(3);
    for (int slot = 0; slot < 3; ++slot) AddStep(plan, slot, 1);
    return plan;
  }

  static std::vector<v1::StepResult> RunAll(StepExecutor& executor,
                                            const std::vector<v1::StepPlan>& plans) {
    std::vector<v1::StepResult> results(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      absl::Status status = executor.Execute(plans[i], StepExecutor::Clock::now(), &results[i]);
      EXPECT_TRUE(status.ok()) << "plan " << i + 1 << ": " << status;
    }
    return results;
  }
};

struct BadPlan {
  std::string name;
  std::function<void(v1::StepPlan&)> edit;  // applied to DecodeAll()
  std::string message;                      // expected substring
};

std::vector<BadPlan> BadPlans(int vocab) {
  return {
      {"step gap", [](v1::StepPlan& p) { p.set_step(5); }, "plan 5: step = 5, expected 3"},
      {"drop out of range", [](v1::StepPlan& p) { p.add_drop_slots(4); },
       "plan 3: drop_slots[0] = 4 is outside [0, 4)"},
      {"drop free slot", [](v1::StepPlan& p) { p.add_drop_slots(3); },
       "drop_slots[0] = 3 is a free slot"},
      {"drop twice", [](v1::StepPlan& p) { p.add_drop_slots(2); p.add_drop_slots(2); },
       "drop_slots[1] = 2 is listed twice"},
      {"admit busy slot", [](v1::StepPlan& p) { AddNew(p, 0, {5}); },
       "new_sequences[0].slot = 0 is busy (not dropped in this plan)"},
      {"admit slot out of range", [](v1::StepPlan& p) { AddNew(p, -2, {5}); },
       "new_sequences[0].slot = -2 is outside [0, 4)"},
      {"admit twice", [](v1::StepPlan& p) { AddNew(p, 3, {5}); AddNew(p, 3, {6}); },
       "new_sequences[1].slot = 3 is already admitted by new_sequences[0]"},
      {"no tokens", [](v1::StepPlan& p) { AddNew(p, 3, {}); },
       "new_sequences[0].tokens is empty"},
      {"token outside vocab", [vocab](v1::StepPlan& p) { AddNew(p, 3, {5, vocab}); },
       absl::StrCat("new_sequences[0].tokens[1] = ", vocab, " is outside the vocabulary [0, ",
                    vocab, ")")},
      {"negative token", [](v1::StepPlan& p) { AddNew(p, 3, {-1}); },
       "new_sequences[0].tokens[0] = -1 is outside the vocabulary"},
      {"too many tokens", [](v1::StepPlan& p) { AddNew(p, 3, std::vector<int32_t>(257, 5)); },
       "new_sequences[0].tokens has 257 tokens, more than max_context 256"},
      {"no prompt", [](v1::StepPlan& p) { AddNew(p, 3, {5, 6})->set_num_prompt_tokens(0); },
       "new_sequences[0].num_prompt_tokens = 0 is outside [1, 2]"},
      {"prompt past tokens",
       [](v1::StepPlan& p) { AddNew(p, 3, {5, 6})->set_num_prompt_tokens(3); },
       "new_sequences[0].num_prompt_tokens = 3 is outside [1, 2]"},
      {"cached not block multiple", [](v1::StepPlan& p) { AddNew(p, 3, {5, 6, 7, 8, 9}, 3); },
       "new_sequences[0].num_cached_tokens = 3 must be a multiple of block_size 4"},
      {"cached covers all tokens", [](v1::StepPlan& p) { AddNew(p, 3, {5, 6, 7, 8}, 4); },
       "new_sequences[0].num_cached_tokens = 4 must be a multiple of block_size 4 in [0, 4)"},
      {"bad top_p",
       [](v1::StepPlan& p) { AddNew(p, 3, {5})->mutable_sampling()->set_top_p(1.5f); },
       "new_sequences[0].sampling.top_p must be in (0, 1], got 1.5"},
      {"bad temperature",
       [](v1::StepPlan& p) { AddNew(p, 3, {5})->mutable_sampling()->set_temperature(-1); },
       "new_sequences[0].sampling.temperature must be"},
      {"top_logprobs too many",
       [](v1::StepPlan& p) { AddNew(p, 3, {5})->mutable_sampling()->set_top_logprobs(21); },
       "new_sequences[0].sampling.top_logprobs = 21 is outside [0, 20]"},
      {"cached hit without blocks", [](v1::StepPlan& p) { AddNew(p, 3, {5, 6, 7, 8, 9}, 4); },
       "new_sequences[0] (slot 3) has num_cached_tokens = 4 but no sequences[] entry"},
      {"sequence slot out of range", [](v1::StepPlan& p) { AddStep(p, -1, 1); },
       "sequences[3].slot = -1 is outside [0, 4)"},
      {"sequence on free slot", [](v1::StepPlan& p) { AddStep(p, 3, 1); },
       "sequences[3].slot = 3 has no sequence (free, or dropped in this plan)"},
      {"sequence on dropped slot", [](v1::StepPlan& p) { p.add_drop_slots(2); },
       "sequences[2].slot = 2 has no sequence (free, or dropped in this plan)"},
      {"slot scheduled twice", [](v1::StepPlan& p) { AddStep(p, 0, 1); },
       "sequences[3].slot = 0 is already scheduled by sequences[0]"},
      {"no tokens to compute", [](v1::StepPlan& p) { p.mutable_sequences(0)->set_num_tokens(0); },
       "sequences[0].num_tokens = 0 must be >= 1"},
      {"past known tokens", [](v1::StepPlan& p) { p.mutable_sequences(0)->set_num_tokens(2); },
       "sequences[0].num_tokens = 2: slot 0 has 7 of 8 known tokens computed, so at most 1 "
       "remain"},
      {"block out of range", [](v1::StepPlan& p) { p.mutable_sequences(0)->add_new_blocks(128); },
       "plan 3: sequences[0].new_blocks[0] = 128 is outside [1, 128)"},
      {"null block", [](v1::StepPlan& p) { p.mutable_sequences(1)->add_new_blocks(0); },
       "sequences[1].new_blocks[0] = 0 is outside [1, 128)"},
      {"block already in table",
       [](v1::StepPlan& p) { p.mutable_sequences(0)->add_new_blocks(2); },
       "sequences[0].new_blocks[0] = 2 is already in slot 0's block table"},
      {"block listed twice",
       [](v1::StepPlan& p) {
         p.mutable_sequences(0)->add_new_blocks(9);
         p.mutable_sequences(0)->add_new_blocks(9);
       },
       "sequences[0].new_blocks[1] = 9 is already in slot 0's block table"},
      {"table too short",
       [](v1::StepPlan& p) {
         AddNew(p, 3, std::vector<int32_t>(9, 5));
         AddStep(p, 3, 9, {10, 11});
       },
       "sequences[3].new_blocks: slot 3's block table would have 2 blocks, positions up to 9 "
       "need 3"},
      {"table too long",
       [](v1::StepPlan& p) {
         AddNew(p, 3, {5});
         std::vector<int32_t> blocks;
         for (int b = 10; b < 75; ++b) blocks.push_back(b);
         AddStep(p, 3, 1, blocks);
       },
       "sequences[3].new_blocks makes slot 3's block table 65 blocks long, more than the 64 "
       "that max_context 256 needs"},
      {"write into a cached block",
       [](v1::StepPlan& p) {
         AddNew(p, 3, {5, 6, 7, 8});
         AddStep(p, 3, 4, {1});
       },
       "sequences[3] (slot 3) would write positions [0, 4) into block 1 (logical block 0), "
       "which a live sequence holds as cached"},
      {"write into another slot's block",
       [](v1::StepPlan& p) {
         AddNew(p, 3, {5, 6});
         AddStep(p, 3, 2, {3});
       },
       // Slot 1, block 3's owner, comes first in the plan: its write is the one refused.
       "sequences[1] (slot 1) would write positions [7, 8) into block 3 (logical block 1), "
       "which another live sequence's block table also lists"},
      {"two sequences write one block",
       [](v1::StepPlan& p) {
         p.add_drop_slots(2);
         p.mutable_sequences()->RemoveLast();
         AddNew(p, 2, {5});
         AddNew(p, 3, {6});
         AddStep(p, 2, 1, {10});
         AddStep(p, 3, 1, {10});
       },
       "into block 10 (logical block 0), which another live sequence's block table also lists"},
      {"owner writes a block another sequence caches",
       [](v1::StepPlan& p) {
         AddNew(p, 3, {60, 61, 62, 63, 70, 71}, 4);
         AddStep(p, 3, 2, {4, 10});
       },
       "sequences[2] (slot 2) would write positions [2, 3) into block 4 (logical block 0), "
       "which a live sequence holds as cached"},
  };
}

TEST_F(StepExecutorValidationTest, EveryBadPlanIsRejectedNamingTheFieldAndChangesNothing) {
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  StepExecutor executor(runner.get(), {.max_num_seqs = kMaxNumSeqs});
  RunAll(executor, SetupPlans());
  const std::string before = Snapshot(executor);
  for (const BadPlan& bad : BadPlans(config().vocab_size)) {
    v1::StepPlan plan = DecodeAll();
    bad.edit(plan);
    v1::StepResult result;
    const absl::Status status = executor.Execute(plan, StepExecutor::Clock::now(), &result);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(bad.message)) << bad.name;
    EXPECT_EQ(Snapshot(executor), before) << bad.name;
  }
  // The valid step 3 still computes exactly what an executor that never saw them computes.
  v1::StepResult after_bad;
  ASSERT_TRUE(executor.Execute(DecodeAll(), StepExecutor::Clock::now(), &after_bad).ok());
  auto reference_runner = MakeRunner(kBlockSize, kNumBlocks);
  StepExecutor reference(reference_runner.get(), {.max_num_seqs = kMaxNumSeqs});
  std::vector<v1::StepPlan> plans = SetupPlans();
  plans.push_back(DecodeAll());
  const v1::StepResult expected = RunAll(reference, plans).back();
  ASSERT_EQ(after_bad.sampled_size(), 3);
  ASSERT_EQ(expected.sampled_size(), 3);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(after_bad.sampled(k).slot(), k);
    EXPECT_EQ(after_bad.sampled(k).token_id(), expected.sampled(k).token_id());
    const float a = after_bad.sampled(k).logprob(), b = expected.sampled(k).logprob();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof(float)), 0) << "slot " << k;
  }
}

TEST_F(StepExecutorValidationTest, PositionsPastMaxContextAreRejected) {
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  StepExecutor executor(runner.get(), {.max_num_seqs = kMaxNumSeqs});
  v1::StepPlan full;  // exactly max_context tokens is fine; its sample lands at position 256
  full.set_step(1);
  AddNew(full, 0, Prompt(256, 3));
  std::vector<int32_t> blocks;
  for (int b = 1; b <= 64; ++b) blocks.push_back(b);
  AddStep(full, 0, 256, blocks);
  v1::StepResult result;
  ASSERT_TRUE(executor.Execute(full, StepExecutor::Clock::now(), &result).ok());
  v1::StepPlan next;
  next.set_step(2);
  AddStep(next, 0, 1);
  const absl::Status status = executor.Execute(next, StepExecutor::Clock::now(), &result);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("plan 2: sequences[0].num_tokens = 1: positions [256, 257) of slot 0 run "
                        "past max_context 256"));
}

TEST_F(StepExecutorValidationTest, DropAndAdmitTheSameSlotInOnePlanIsValid) {
  auto runner = MakeRunner(kBlockSize, kNumBlocks);
  StepExecutor executor(runner.get(), {.max_num_seqs = kMaxNumSeqs});
  RunAll(executor, SetupPlans());
  v1::StepPlan plan = DecodeAll();
  plan.add_drop_slots(2);
  plan.mutable_sequences()->RemoveLast();
  AddNew(plan, 2, {9, 8, 7});
  AddStep(plan, 2, 3, {4});  // slot 2's old block, free again after the drop
  v1::StepResult result;
  const absl::Status status = executor.Execute(plan, StepExecutor::Clock::now(), &result);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(result.sampled_size(), 3);
  EXPECT_EQ(result.active_slots(), 3);
  EXPECT_EQ(executor.slots().at(2).num_known(), 4);
}

}  // namespace
}  // namespace tessera::worker
