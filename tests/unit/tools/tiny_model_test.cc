#include "tools/convert/tiny_model.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat/chat_template.h"
#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "common/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/convert/tiny_vocab.h"

namespace tessera::convert {
namespace {

using gguf::GgmlType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/tiny_model_test_", getpid(), "_", name, ".gguf");
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Writes a model with `options` to a temp file and opens it with the real reader.
std::unique_ptr<gguf::GgufFile> WriteAndOpen(const TinyModelOptions& options,
                                             const std::string& name) {
  const std::string path = TempPath(name);
  absl::Status written = WriteTinyLlamaGguf(options, path);
  EXPECT_TRUE(written.ok()) << written;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  return file.ok() ? *std::move(file) : nullptr;
}

int64_t Int(const gguf::GgufFile& f, std::string_view key) {
  absl::StatusOr<int64_t> v = f.GetInt(key);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : -1;
}

TEST(TinyModelTest, HyperParametersReadBack) {
  TinyModelOptions options;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(options, "hparams");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(Int(*f, "llama.block_count"), 2);
  EXPECT_EQ(Int(*f, "llama.context_length"), 256);
  EXPECT_EQ(Int(*f, "llama.embedding_length"), 64);
  EXPECT_EQ(Int(*f, "llama.feed_forward_length"), 128);
  EXPECT_EQ(Int(*f, "llama.attention.head_count"), 4);
  EXPECT_EQ(Int(*f, "llama.attention.head_count_kv"), 2);
  EXPECT_EQ(Int(*f, "llama.rope.dimension_count"), 16);
  EXPECT_FLOAT_EQ(*f->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_FLOAT_EQ(*f->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  const int64_t vocab = Int(*f, "llama.vocab_size");
  EXPECT_EQ(static_cast<size_t>(vocab), f->GetStringArray("tokenizer.ggml.tokens")->size());
  EXPECT_GT(vocab, 3 + 256 + 100);  // specials + bytes + most of the 200 merges
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(Int(*f, "tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(Int(*f, "tokenizer.ggml.eos_token_id"), 2);  // <|im_end|>, as in SmolLM2-Instruct
  EXPECT_EQ(Int(*f, "tokenizer.ggml.padding_token_id"), 2);
  EXPECT_EQ(Int(*f, "tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_FALSE(*f->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_THAT(f->GetStringArray("tokenizer.ggml.merges")->size(), testing::Le(200u));
}

// qwen2 and qwen3: the llama tensors under their own keys, plus Q/K/V biases or Q/K norms.
TEST(TinyModelTest, QwenVariantsAddBiasesOrQkNorms) {
  for (TinyDenseArch arch : {TinyDenseArch::kQwen2, TinyDenseArch::kQwen3}) {
    const std::string name(TinyDenseArchName(arch));
    std::unique_ptr<gguf::GgufFile> f = WriteAndOpen({.arch = arch}, name);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(*f->GetString("general.architecture"), name);
    EXPECT_EQ(Int(*f, name + ".block_count"), 2);
    const bool qwen2 = arch == TinyDenseArch::kQwen2;
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = absl::StrCat("blk.", layer, ".");
      EXPECT_EQ(f->FindTensor(p + "attn_k.bias") != nullptr, qwen2) << name;
      EXPECT_EQ(f->FindTensor(p + "attn_q_norm.weight") != nullptr, !qwen2) << name;
    }
    const gguf::GgufTensorInfo* extra =
        f->FindTensor(qwen2 ? "blk.1.attn_v.bias" : "blk.1.attn_k_norm.weight");
    ASSERT_NE(extra, nullptr);
    EXPECT_EQ(extra->dims, (std::vector<uint64_t>{qwen2 ? 32u : 16u}));  // kv dim / head dim
  }
  EXPECT_EQ(ParseTinyDenseArch("qwen3"), TinyDenseArch::kQwen3);
  EXPECT_EQ(ParseTinyDenseArch("qwen35"), std::nullopt);
}

TEST(TinyModelTest, EveryTensorHasItsShapeAndTheTypesAreMixed) {
  TinyModelOptions options;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(options, "tensors");
  ASSERT_NE(f, nullptr);
  const uint64_t vocab = static_cast<uint64_t>(Int(*f, "llama.vocab_size"));
  std::map<std::string, std::vector<uint64_t>> expected = {{"token_embd.weight", {64, vocab}},
                                                           {"output_norm.weight", {64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    expected[p + "attn_norm.weight"] = {64};
    expected[p + "attn_q.weight"] = {64, 64};
    expected[p + "attn_k.weight"] = {64, 32};
    expected[p + "attn_v.weight"] = {64, 32};
    expected[p + "attn_output.weight"] = {64, 64};
    expected[p + "ffn_norm.weight"] = {64};
    expected[p + "ffn_gate.weight"] = {64, 128};
    expected[p + "ffn_up.weight"] = {64, 128};
    expected[p + "ffn_down.weight"] = {128, 64};
  }
  EXPECT_EQ(f->tensors().size(), expected.size());
  std::set<GgmlType> types;
  for (const auto& [name, dims] : expected) {
    const gguf::GgufTensorInfo* info = f->FindTensor(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dims, dims) << name;
    types.insert(info->type);
    if (dims.size() == 1) {
      EXPECT_EQ(info->type, GgmlType::kF32) << name;
    }
  }
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, GgmlType::kQ4_1);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_up.weight")->type, GgmlType::kF16);
  EXPECT_EQ(f->FindTensor("blk.1.attn_q.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_up.weight")->type, GgmlType::kQ4_1);
  EXPECT_EQ(types,
            (std::set<GgmlType>{GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_1}));
}

TEST(TinyModelTest, OneLayerStillHasEveryType) {
  TinyModelOptions options;
  options.num_layers = 1;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(options, "one_layer");
  ASSERT_NE(f, nullptr);
  std::set<GgmlType> types;
  for (const gguf::GgufTensorInfo& t : f->tensors()) types.insert(t.type);
  EXPECT_EQ(types,
            (std::set<GgmlType>{GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_1}));
}

TEST(TinyModelTest, UntiedAddsOutputWeight) {
  TinyModelOptions options;
  options.tied_embeddings = false;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(options, "untied");
  ASSERT_NE(f, nullptr);
  const gguf::GgufTensorInfo* out = f->FindTensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_THAT(out->dims, ElementsAre(64u, static_cast<uint64_t>(Int(*f, "llama.vocab_size"))));
}

TEST(TinyModelTest, WeightsDequantizeToFiniteValuesAtRealisticScales) {
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(TinyModelOptions{}, "values");
  ASSERT_NE(f, nullptr);
  for (const gguf::GgufTensorInfo& t : f->tensors()) {
    absl::StatusOr<std::vector<float>> values =
        gguf::DequantizeToF32(t.type, f->TensorData(t), t.num_elements);
    ASSERT_TRUE(values.ok()) << t.name << ": " << values.status();
    double sum = 0, sum_sq = 0;
    for (float v : *values) {
      ASSERT_TRUE(std::isfinite(v)) << t.name;
      sum += v;
      sum_sq += static_cast<double>(v) * v;
    }
    const double mean = sum / values->size();
    const double stddev = std::sqrt(std::max(0.0, sum_sq / values->size() - mean * mean));
    if (t.dims.size() == 1) {  // norm weights ~ 1
      EXPECT_NEAR(mean, 1.0, 0.01) << t.name;
    } else {  // matrices ~ N(0, 0.02); Q4_1 rounding adds a little noise
      EXPECT_NEAR(mean, 0.0, 0.005) << t.name;
      EXPECT_NEAR(stddev, 0.02, 0.005) << t.name;
    }
  }
}

TEST(TinyModelTest, TokenizerLoadsAndRoundTrips) {
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(TinyModelOptions{}, "tokenizer");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::FromGguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->info().bos_id, kTinyImStartId);
  EXPECT_EQ((*tok)->info().eos_id, kTinyImEndId);
  EXPECT_EQ((*tok)->info().unk_id, kTinyEndOfTextId);

  const std::string text = "The river runs to the sea, and the baker opens at 7am! Ünïcödé too.";
  std::vector<tokenizer::TokenId> ids = (*tok)->Encode(text, {});
  EXPECT_LT(ids.size(), text.size());  // merges applied: fewer tokens than bytes
  EXPECT_EQ(*(*tok)->Decode(ids, {}), text);

  std::vector<tokenizer::TokenId> chat = (*tok)->Encode("<|im_start|>user\nHi<|im_end|>\n", {});
  ASSERT_GE(chat.size(), 3u);
  EXPECT_EQ(chat.front(), kTinyImStartId);
  EXPECT_NE(std::find(chat.begin(), chat.end(), kTinyImEndId), chat.end());
  EXPECT_EQ(*(*tok)->Decode(chat, {}), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(TinyModelTest, ChatTemplateIsRecognized) {
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(TinyModelOptions{}, "chat");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::FromGguf(*f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), "chatml-default-system");
  EXPECT_EQ(*t->default_system_prompt(), kTinyDefaultSystemPrompt);
  std::vector<chat::ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(
      *t->Apply(messages, true),
      "<|im_start|>system\nYou are a tiny test model.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n");
}

// --chat-style llama3: Llama 3 Instruct's control tokens (BOS <|begin_of_text|>, EOS
// <|eot_id|>) and its template, which renders through them.
TEST(TinyModelTest, Llama3ChatStyleHasItsTokensAndTemplate) {
  std::unique_ptr<gguf::GgufFile> f =
      WriteAndOpen(TinyModelOptions{.chat_style = TinyChatStyle::kLlama3}, "llama3");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::FromGguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->TokenText((*tok)->info().bos_id), "<|begin_of_text|>");
  EXPECT_EQ((*tok)->TokenText((*tok)->info().eos_id), "<|eot_id|>");
  for (const char* control : {"<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>"}) {
    const std::optional<tokenizer::TokenId> id = (*tok)->FindToken(control);
    ASSERT_TRUE(id.has_value()) << control;
    EXPECT_EQ((*tok)->GetTokenType(*id), tokenizer::TokenType::kControl) << control;
  }
  absl::StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::FromGguf(*f);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<chat::ChatMessage> messages = {{"system", "Be brief."}, {"user", " Hi "}};
  EXPECT_EQ(*t->Apply(messages, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(TinyModelTest, DeterministicForASeedAndDifferentAcrossSeeds) {
  TinyModelOptions options;
  const std::string a = TempPath("det_a"), b = TempPath("det_b"), c = TempPath("det_c");
  ASSERT_TRUE(WriteTinyLlamaGguf(options, a).ok());
  ASSERT_TRUE(WriteTinyLlamaGguf(options, b).ok());
  options.seed = 2;
  ASSERT_TRUE(WriteTinyLlamaGguf(options, c).ok());
  std::vector<uint8_t> bytes_a = ReadBytes(a), bytes_b = ReadBytes(b), bytes_c = ReadBytes(c);
  EXPECT_FALSE(bytes_a.empty());
  EXPECT_EQ(bytes_a, bytes_b);
  EXPECT_EQ(bytes_a.size(), bytes_c.size());
  EXPECT_NE(bytes_a, bytes_c);
  absl::StatusOr<std::vector<uint8_t>> in_memory = BuildTinyLlamaGguf(TinyModelOptions{});
  ASSERT_TRUE(in_memory.ok());
  EXPECT_EQ(*in_memory, bytes_a);
  for (const std::string& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(TinyModelTest, InvalidOptionsAreRejectedNamingTheField) {
  auto expect_bad = [](TinyModelOptions o, const std::string& field) {
    absl::Status s = ValidateTinyModelOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(s.message(), HasSubstr(field));
    EXPECT_EQ(BuildTinyLlamaGguf(o).status().code(), absl::StatusCode::kInvalidArgument);
  };
  TinyModelOptions o;
  o.hidden = 48;
  expect_bad(o, "hidden = 48");
  o = {};
  o.ffn = 100;
  expect_bad(o, "ffn = 100");
  o = {};
  o.num_heads = 3;
  expect_bad(o, "num_heads = 3");
  o = {};
  o.num_heads = 64;  // head_dim 1: odd
  expect_bad(o, "even head_dim");
  o = {};
  o.num_kv_heads = 3;
  expect_bad(o, "num_kv_heads = 3");
  o = {};
  o.num_layers = 0;
  expect_bad(o, "num_layers = 0");
  o = {};
  o.num_merges = -1;
  expect_bad(o, "num_merges = -1");
  o = {};
  o.rms_eps = 0;
  expect_bad(o, "rms_eps");
  EXPECT_TRUE(ValidateTinyModelOptions(TinyModelOptions{}).ok());
}

TEST(TinyModelTest, WriteToBadPathFails) {
  absl::Status s = WriteTinyLlamaGguf(TinyModelOptions{}, "/nonexistent-dir/x/model.gguf");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace tessera::convert
