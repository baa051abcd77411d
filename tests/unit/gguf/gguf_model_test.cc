// Checks against the real SmolLM2-135M-Instruct Q4_1 model. The model is fetched by
// scripts/fetch_model.sh (CI always runs it first); a missing model is a failure, not a skip, so a
// broken fetch cannot silently turn this test green.
#include <cmath>
#include <filesystem>
#include <map>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class SmolLm2ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModelPath)) return;
    auto file = GgufFile::Open(kModelPath);
    if (file.ok())
      file_ = file->release();
    else
      open_error_ = new std::string(file.status().ToString());
  }
  static void TearDownTestSuite() {
    delete file_;
    file_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kModelPath))
        << kModelPath << " is missing: run scripts/fetch_model.sh from the repository root";
    ASSERT_NE(file_, nullptr) << (open_error_ != nullptr ? *open_error_ : "open failed");
  }

  static GgufFile* file_;
  static std::string* open_error_;
};

GgufFile* SmolLm2ModelTest::file_ = nullptr;
std::string* SmolLm2ModelTest::open_error_ = nullptr;

TEST_F(SmolLm2ModelTest, HeaderAndMetadata) {
  const GgufFile& f = *file_;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 1785664u);
  EXPECT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.block_count"), 30);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 3);
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 49152u);
  EXPECT_GT(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 0.0);
}

TEST_F(SmolLm2ModelTest, TensorInventory) {
  std::map<GgmlType, int> counts;
  for (const GgufTensorInfo& t : file_->tensors()) ++counts[t.type];
  EXPECT_EQ(file_->tensors().size(), 272u);
  EXPECT_EQ(counts[GgmlType::kQ4_1], 210);
  EXPECT_EQ(counts[GgmlType::kF32], 61);
  EXPECT_EQ(counts[GgmlType::kQ8_0], 1);
  const GgufTensorInfo* q = file_->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::kQ4_1);
  EXPECT_THAT(q->dims, ::testing::ElementsAre(576, 576));
  const GgufTensorInfo* k = file_->FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->dims, ::testing::ElementsAre(576, 192));  // 3 KV heads of 64
  const GgufTensorInfo* embd = file_->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_THAT(embd->dims, ::testing::ElementsAre(576, 49152));
}

// Every tensor decodes to finite values in a sane range.
TEST_F(SmolLm2ModelTest, EveryTensorDequantizesToFiniteValues) {
  for (const GgufTensorInfo& t : file_->tensors()) {
    SCOPED_TRACE(t.name);
    auto values = DequantizeToF32(t.type, file_->TensorData(t), t.num_elements);
    ASSERT_TRUE(values.ok()) << values.status();
    float max_abs = 0;
    double sum_sq = 0;
    for (float v : *values) {
      ASSERT_TRUE(std::isfinite(v));
      max_abs = std::max(max_abs, std::fabs(v));
      sum_sq += static_cast<double>(v) * v;
    }
    EXPECT_LT(max_abs, 100.0f);
    EXPECT_GT(sum_sq, 0.0);  // no all-zero tensors
  }
}

TEST_F(SmolLm2ModelTest, WeightStatisticsLookLikeATrainedModel) {
  auto stats = [&](const char* name) {
    const GgufTensorInfo* t = file_->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    auto v = DequantizeToF32(t->type, file_->TensorData(*t), t->num_elements);
    EXPECT_TRUE(v.ok());
    double sum = 0, sum_sq = 0;
    for (float x : *v) {
      sum += x;
      sum_sq += static_cast<double>(x) * x;
    }
    const double mean = sum / v->size();
    return std::make_pair(mean, std::sqrt(sum_sq / v->size() - mean * mean));
  };
  const auto [q_mean, q_std] = stats("blk.0.attn_q.weight");
  EXPECT_LT(std::fabs(q_mean), 0.01);
  EXPECT_GT(q_std, 0.01);
  EXPECT_LT(q_std, 1.0);
  const auto [e_mean, e_std] = stats("token_embd.weight");
  EXPECT_LT(std::fabs(e_mean), 0.05);
  EXPECT_GT(e_std, 0.01);
  EXPECT_LT(e_std, 1.0);
  // The final RMSNorm gains sit well above 0 (gguf-py reports mean 1.80, std 0.29).
  const auto [n_mean, n_std] = stats("output_norm.weight");
  EXPECT_GT(n_mean, 1.5);
  EXPECT_LT(n_mean, 2.1);
}

}  // namespace
}  // namespace tessera::gguf
