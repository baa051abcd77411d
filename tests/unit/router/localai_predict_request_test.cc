// LocalAI's PredictOptions/ModelOptions in tessera's terms (router/localai/predict_request.h):
// LocalAI's zeros mean "default", a negative seed means random, chat messages need
// UseTokenizerTemplate, the model file resolves ModelFile > ModelPath/Model > Model and is made
// canonical (one file, one name).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "router/localai/predict_request.h"

namespace tessera::router::localai {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LocalAiPredictRequestTest, SetFieldsReachTheGenerateRequest) {
  ::backend::PredictOptions options;
  options.set_prompt("Once");
  options.set_tokens(12);
  options.set_temperature(0.7f);
  options.set_topk(40);
  options.set_topp(0.9f);
  options.set_minp(0.05f);
  options.set_penalty(1.1f);
  options.set_frequencypenalty(0.5f);
  options.set_presencepenalty(-0.5f);
  options.set_seed(9);
  options.add_stopprompts("\n");
  options.add_stopprompts("");
  options.set_ignoreeos(true);
  absl::StatusOr<::tessera::v1::GenerateRequest> r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text(), "Once");
  EXPECT_EQ(r->max_tokens(), 12u);
  EXPECT_FLOAT_EQ(r->sampling().temperature(), 0.7f);
  EXPECT_EQ(r->sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(r->sampling().top_p(), 0.9f);
  EXPECT_FLOAT_EQ(r->sampling().min_p(), 0.05f);
  EXPECT_FLOAT_EQ(r->sampling().repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(r->sampling().frequency_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(r->sampling().presence_penalty(), -0.5f);
  EXPECT_EQ(r->sampling().seed(), 9u);
  EXPECT_THAT(r->stop(), ElementsAre("\n")) << "empty stop strings are dropped";
  EXPECT_TRUE(r->ignore_eos());
  EXPECT_FALSE(r->has_structured()) << "no Grammar: free text";
}

// LocalAI's Grammar (backend.proto field 29: the GBNF it makes from a JSON schema or from
// function definitions) becomes the request's grammar constraint.
TEST(LocalAiPredictRequestTest, GrammarBecomesTheStructuredConstraint) {
  ::backend::PredictOptions options;
  options.set_prompt("Once");
  options.set_grammar("root ::= \"yes\" | \"no\"");
  absl::StatusOr<::tessera::v1::GenerateRequest> r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->structured().grammar(), "root ::= \"yes\" | \"no\"");
}

// LocalAI's LogitBias (field 23): a JSON object of token id -> bias, as OpenAI's logit_bias.
TEST(LocalAiPredictRequestTest, LogitBiasReachesTheRequest) {
  ::backend::PredictOptions options;
  options.set_prompt("Once");
  options.set_logitbias(R"({"15": -100, "7": 2.5})");
  absl::StatusOr<::tessera::v1::GenerateRequest> r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->logit_bias_size(), 2);
  EXPECT_FLOAT_EQ(r->logit_bias().at(15), -100.0f);
  EXPECT_FLOAT_EQ(r->logit_bias().at(7), 2.5f);
  for (const char* bad : {"[1]", R"({"x": 1})", R"({"1": "up"})", "{not json"}) {
    options.set_logitbias(bad);
    EXPECT_EQ(ToGenerateRequest(options).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// LocalAI's tool-calling fields (backend.proto: Tools 48, ToolChoice 49; Message name 3,
// tool_call_id 4, reasoning_content 5, tool_calls 6) reach the chat the template renders.
TEST(LocalAiPredictRequestTest, ToolsAndToolMessagesReachTheChat) {
  ::backend::PredictOptions options;
  options.set_usetokenizertemplate(true);
  ::backend::Message* user = options.add_messages();
  user->set_role("user");
  user->set_content("Weather in Lyon?");
  ::backend::Message* call = options.add_messages();
  call->set_role("assistant");
  call->set_reasoning_content("I should look it up.");
  call->set_tool_calls(R"([{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}])");
  ::backend::Message* result = options.add_messages();
  result->set_role("tool");
  result->set_name("w");
  result->set_tool_call_id("c1");
  result->set_content("rain");
  options.set_tools(R"([{"type": "function", "function": {"name": "w"}}])");
  options.set_toolchoice("\"auto\"");
  absl::StatusOr<::tessera::v1::GenerateRequest> r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok()) << r.status();
  const ::tessera::v1::Chat& chat = r->chat();
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(1).reasoning_content(), "I should look it up.");
  EXPECT_THAT(chat.messages(1).tool_calls_json(), HasSubstr("\"name\": \"w\""));
  EXPECT_EQ(chat.messages(2).tool_call_id(), "c1");
  EXPECT_EQ(chat.messages(2).name(), "w");
  EXPECT_EQ(chat.tools_json(), options.tools());
  options.set_toolchoice("none");
  EXPECT_EQ(ToGenerateRequest(options)->chat().tools_json(), "");
  // A forced call offers the tools as "auto" does; LocalAI sends its own Grammar to force it.
  options.set_toolchoice("required");
  options.set_grammar(R"(root ::= "{\"name\": \"w\"}")");
  r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chat().tools_json(), options.tools());
  EXPECT_EQ(r->structured().grammar(), options.grammar());
  options.set_toolchoice(R"({"type": "function", "function": {"name": "w"}})");
  EXPECT_EQ(ToGenerateRequest(options)->chat().tools_json(), options.tools());
}

TEST(LocalAiPredictRequestTest, ZerosMeanDefaults) {
  ::backend::PredictOptions options;
  options.set_prompt("x");
  options.set_seed(-1);
  absl::StatusOr<::tessera::v1::GenerateRequest> r = ToGenerateRequest(options);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_max_tokens());
  EXPECT_FALSE(r->sampling().has_top_p());
  EXPECT_FALSE(r->sampling().has_top_k());
  EXPECT_FALSE(r->sampling().has_min_p());
  EXPECT_FALSE(r->sampling().has_repetition_penalty());
  EXPECT_FALSE(r->sampling().has_seed()) << "negative = random";
  EXPECT_EQ(r->sampling().temperature(), 0.0f) << "0 is greedy, as LocalAI means it";
  EXPECT_FALSE(r->logprobs()) << "Logprobs 0: none";
  EXPECT_EQ(r->top_logprobs(), 0u);
}

// Logprobs / TopLogprobs (fields 50, 51): LocalAI sends both equal to OpenAI's top_logprobs (1
// for a bare `logprobs: true`); TopLogprobs wins when both are set, either alone turns them on.
TEST(LocalAiPredictRequestTest, LogprobsAndTopLogprobs) {
  const auto convert = [](int32_t logprobs, int32_t top) {
    ::backend::PredictOptions options;
    options.set_prompt("x");
    options.set_logprobs(logprobs);
    options.set_toplogprobs(top);
    return ToGenerateRequest(options);
  };
  for (const auto& [logprobs, top, want_top] :
       {std::tuple{1, 1, 1u}, {3, 3, 3u}, {5, 0, 5u}, {0, 4, 4u}, {2, 7, 7u}}) {
    absl::StatusOr<::tessera::v1::GenerateRequest> r = convert(logprobs, top);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->logprobs()) << logprobs << " " << top;
    EXPECT_EQ(r->top_logprobs(), want_top) << logprobs << " " << top;
  }
  absl::StatusOr<::tessera::v1::GenerateRequest> negative = convert(-1, 0);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("Logprobs"));
  negative = convert(1, -2);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("TopLogprobs"));
}

TEST(LocalAiPredictRequestTest, MessagesNeedTheTokenizerTemplate) {
  ::backend::PredictOptions options;
  ::backend::Message* message = options.add_messages();
  message->set_role("user");
  message->set_content("Hi");
  EXPECT_EQ(ToGenerateRequest(options).status().code(), absl::StatusCode::kInvalidArgument)
      << "no Prompt and no UseTokenizerTemplate";
  options.set_prompt("rendered by LocalAI");
  EXPECT_EQ(ToGenerateRequest(options)->text(), "rendered by LocalAI");
  options.set_usetokenizertemplate(true);
  absl::StatusOr<::tessera::v1::GenerateRequest> chat = ToGenerateRequest(options);
  ASSERT_TRUE(chat.ok());
  ASSERT_EQ(chat->chat().messages_size(), 1);
  EXPECT_EQ(chat->chat().messages(0).content(), "Hi");
}

TEST(LocalAiPredictRequestTest, ModelFile) {
  ::backend::ModelOptions options;
  EXPECT_EQ(ModelFileOf(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.set_model("m.gguf");
  EXPECT_EQ(*ModelFileOf(options), "m.gguf");
  options.set_modelpath("/models");
  EXPECT_EQ(*ModelFileOf(options), "/models/m.gguf");
  options.set_modelfile("/elsewhere/f.gguf");
  EXPECT_EQ(*ModelFileOf(options), "/elsewhere/f.gguf");
}

// Every spelling of one file (`.`, `..`, repeated `/`, a symlink) resolves to one name.
TEST(LocalAiPredictRequestTest, CanonicalModelFileMakesOneNamePerFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("canonical_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const fs::path file = dir / "sub" / "m.gguf";
  std::ofstream(file) << "GGUF";
  fs::create_symlink(file, dir / "link.gguf");
  const std::string expected = fs::canonical(file).string();
  const std::string sub = (dir / "sub").string();
  ::backend::ModelOptions options;
  for (const std::string& spelling :
       {sub + "/./m.gguf", "/" + sub + "//m.gguf", sub + "/../sub/m.gguf",
        (dir / "link.gguf").string()}) {
    options.set_modelfile(spelling);
    EXPECT_EQ(*CanonicalModelFile(options), expected) << spelling;
  }
  options.set_modelfile("");
  options.set_model("./m.gguf");
  options.set_modelpath(sub + "/");
  EXPECT_EQ(*CanonicalModelFile(options), expected);
  fs::remove_all(dir);
}

TEST(LocalAiPredictRequestTest, CanonicalModelFileRefusesWhatIsNoFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("refuse_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::backend::ModelOptions options;
  EXPECT_EQ(CanonicalModelFile(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.set_modelfile((dir / "missing.gguf").string());
  EXPECT_EQ(CanonicalModelFile(options).status().code(), absl::StatusCode::kNotFound);
  options.set_modelfile(dir.string());
  EXPECT_THAT(CanonicalModelFile(options).status().message(), HasSubstr("not a regular file"));
  // A FIFO would block the loader's open() forever.
  const fs::path fifo = dir / "fifo.gguf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  options.set_modelfile(fifo.string());
  EXPECT_EQ(CanonicalModelFile(options).status().code(), absl::StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::router::localai
