// The step-trace plotter (tools/trace/plot_steps.py --check) on a trace the current router writes
// with --trace-steps: one long decode, then a second request whose prefill joins it, so the trace
// must hold steps mixing a prefill chunk with another request's decode. The plotter validates
// every line against the schema in router/step_recorder.h and renders the PNG; a router writing a
// different schema, or not batching the prefill with the decode, fails here.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/e2e/serving_harness.h"
#include "tests/unique_temp_path.h"

namespace tessera::e2e {
namespace {

v1::GenerateRequest Greedy(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

TEST(StepTracePlotTest, PlotterChecksATraceTheRouterJustWrote) {
  const std::string trace = testing_util::UniqueTempPath("router_steps.jsonl");
  const std::string png = testing_util::UniqueTempPath("router_steps.png");
  {
    ServingProcesses serving;
    ASSERT_TRUE(serving.Start({"--threads", "2"}, {"--trace-steps", trace}).ok());
    auto stub = serving.NewStub();
    std::future<StreamResult> late;
    std::string long_prompt;
    for (int i = 0; i < 12; ++i) {
      long_prompt += absl::StrCat("Paragraph ", i, ": the river town woke slowly that spring. ");
    }
    // When the first request streams its first token, start the second: its prefill chunks ride
    // in the steps that decode the first.
    const StreamResult first = RunGenerate(
        *stub, Greedy("Tell me a long story about a lighthouse.", 48),
        [&](const v1::GenerateResponse&, grpc::ClientContext&) {
          if (late.valid()) return;
          late = std::async(std::launch::async, [&] {
            auto own_stub = serving.NewStub();
            return RunGenerate(*own_stub, Greedy(long_prompt, 4));
          });
        });
    ASSERT_TRUE(first.status.ok()) << first.status.error_message();
    ASSERT_TRUE(late.valid());
    const StreamResult second = late.get();
    ASSERT_TRUE(second.status.ok()) << second.status.error_message();
    EXPECT_EQ(serving.StopRouter(), 0);  // flushes and closes the trace
  }
  ASSERT_TRUE(std::filesystem::exists(trace));
  const std::string command =
      absl::StrCat("/usr/bin/python3 tools/trace/plot_steps.py '", trace, "' -o '", png,
                   "' --check --min-mixed-steps 1");
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << command;
  EXPECT_GT(std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0, 1000u);
  std::filesystem::remove(trace);
  std::filesystem::remove(png);
}

}  // namespace
}  // namespace tessera::e2e
