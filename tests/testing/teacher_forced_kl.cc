// TeacherForcedLogits and the KL summary of teacher_forced_kl.h.
#include "tests/testing/teacher_forced_kl.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <span>

#include "common/tokenizer/tokenizer.h"
#include "common/util/check.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::testing_util {

std::string LoadKlFixture(const char* path, std::unique_ptr<worker::LoadedModel>* model,
                          std::vector<int32_t>* tokens) {
  if (!std::filesystem::exists(path)) {
    return std::string(path) + " is missing: run scripts/fetch_model.sh";
  }
  absl::StatusOr<std::unique_ptr<worker::LoadedModel>> loaded = worker::LoadModel(path);
  if (!loaded.ok()) return loaded.status().ToString();
  auto tokenizer = tokenizer::Tokenizer::FromGguf(*(*loaded)->file);
  if (!tokenizer.ok()) return tokenizer.status().ToString();
  *tokens = (*tokenizer)->Encode(kKlText, {.add_special = false});
  *model = std::move(*loaded);
  return "";
}

std::vector<std::vector<float>> TeacherForcedLogits(const worker::LoadedModel& model,
                                                    worker::CpuRunnerOptions options,
                                                    const std::vector<int32_t>& tokens) {
  kernels::cpu::ThreadPool pool(2);
  const int64_t blocks = static_cast<int64_t>(tokens.size()) / 16 + 2;
  options.block_size = 16;
  options.num_kv_blocks = blocks;
  worker::CpuModelRunner runner(model.config, &model.plan, model.weights.get(), &pool, options);
  std::vector<int32_t> table(blocks - 1);
  std::iota(table.begin(), table.end(), 1);
  std::vector<std::vector<float>> all;
  worker::StepLogits logits;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const worker::SequenceWork work{.tokens = std::span(tokens).subspan(t, 1),
                                    .start_pos = static_cast<int32_t>(t),
                                    .block_table = table,
                                    .needs_logits = true,
                                    // a hybrid's recurrent state lives in a slot
                                    .slot = model.config.hybrid.has_value() ? 0 : -1};
    const absl::Status status = runner.Forward({&work, 1}, &logits);
    TESSERA_CHECK(status.ok(), "TeacherForcedLogits: Forward failed");
    all.emplace_back(logits.Row(0).begin(), logits.Row(0).end());
  }
  return all;
}

double KlDivergence(const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
  auto log_softmax = [](const std::vector<float>& x) {
    const double max = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (float v : x) sum += std::exp(v - max);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - max - std::log(sum);
    return out;
  };
  const std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

KlSummary CompareLogits(const std::vector<std::vector<float>>& exact,
                        const std::vector<std::vector<float>>& lossy) {
  TESSERA_CHECK(exact.size() == lossy.size(), "CompareLogits: row counts differ");
  KlSummary s{.positions = exact.size()};
  int agree = 0;
  const auto argmax = [](const std::vector<float>& v) {
    return std::max_element(v.begin(), v.end()) - v.begin();
  };
  for (size_t t = 0; t < exact.size(); ++t) {
    const double kl = KlDivergence(exact[t], lossy[t]);
    s.mean_kl += kl;
    s.max_kl = std::max(s.max_kl, kl);
    agree += argmax(exact[t]) == argmax(lossy[t]);
  }
  if (!exact.empty()) {
    s.mean_kl /= static_cast<double>(exact.size());
    s.top1_agreement = static_cast<double>(agree) / static_cast<double>(exact.size());
  }
  return s;
}

}  // namespace tessera::testing_util
