// Our decoders against reference values from the gguf Python package (gguf-py), written by
// tools/oracle/gguf_dequant_reference.py into tests/data/gguf_reference/dequant_reference.txt:
// random blocks of every format it decodes (hermetic), and slices of the real SmolLM2 tensors
// (needs models/, fetched by scripts/fetch_model.sh). Tolerance 0: the formats are exact.
#include <bit>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

constexpr char kReferencePath[] = "tests/data/gguf_reference/dequant_reference.txt";
constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Record {
  std::string kind;  // "tensor" or "block"
  std::string name;  // tensor name (tensor records)
  std::string type;
  uint64_t first = 0;
  uint64_t count = 0;
  std::vector<uint8_t> bytes;  // block records
  std::vector<uint32_t> bits;  // expected f32 bit patterns
};

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<Record> LoadReference() {
  std::ifstream in(kReferencePath);
  EXPECT_TRUE(in.good()) << kReferencePath << " missing; run from the repository root";
  std::vector<Record> records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string head;
    fields >> head;
    if (head == "tensor" || head == "block") {
      Record r;
      r.kind = head;
      if (head == "tensor")
        fields >> r.name >> r.type >> r.first >> r.count;
      else
        fields >> r.type >> r.count;
      records.push_back(std::move(r));
    } else if (head == "bytes") {
      std::string hex;
      fields >> hex;
      records.back().bytes = FromHex(hex);
    } else {
      records.back().bits.push_back(static_cast<uint32_t>(std::stoul(head, nullptr, 16)));
      std::string word;
      while (fields >> word)
        records.back().bits.push_back(static_cast<uint32_t>(std::stoul(word, nullptr, 16)));
    }
  }
  return records;
}

GgmlType TypeByName(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = LookupGgmlType(id);
    if (info.has_value() && name == info->name) return info->type;
  }
  ADD_FAILURE() << "unknown type " << name;
  return GgmlType::kF32;
}

void ExpectBitsEqual(const std::vector<float>& actual, const std::vector<uint32_t>& expected,
                     uint64_t first) {
  ASSERT_GE(actual.size(), first + expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(actual[first + i]), expected[i])
        << "element " << first + i << ": got " << actual[first + i] << ", want "
        << std::bit_cast<float>(expected[i]);
  }
}

TEST(GgufOracleTest, RandomBlocksMatchGgufPy) {
  int checked = 0;
  for (const Record& r : LoadReference()) {
    if (r.kind != "block") continue;
    SCOPED_TRACE(r.type);
    ASSERT_EQ(r.bits.size(), r.count);
    auto values = DequantizeToF32(TypeByName(r.type), r.bytes, r.count);
    ASSERT_TRUE(values.ok()) << values.status();
    ExpectBitsEqual(*values, r.bits, 0);
    ++checked;
  }
  EXPECT_EQ(checked, 12);  // F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K
}

TEST(GgufOracleTest, SmolLm2TensorsMatchGgufPy) {
  ASSERT_TRUE(std::filesystem::exists(kModelPath))
      << kModelPath << " is missing: run scripts/fetch_model.sh from the repository root";
  auto file = GgufFile::Open(kModelPath);
  ASSERT_TRUE(file.ok()) << file.status();
  int checked = 0;
  for (const Record& r : LoadReference()) {
    if (r.kind != "tensor") continue;
    SCOPED_TRACE(r.name);
    const GgufTensorInfo* t = (*file)->FindTensor(r.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(GgmlTypeName(t->type), r.type);
    auto values = DequantizeToF32(t->type, (*file)->TensorData(*t), t->num_elements);
    ASSERT_TRUE(values.ok()) << values.status();
    ExpectBitsEqual(*values, r.bits, r.first);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

}  // namespace
}  // namespace tessera::gguf
