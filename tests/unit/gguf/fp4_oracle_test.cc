// MXFP4 / NVFP4 against gguf-py (the `gguf` package, ggml-org's Python implementation): random
// blocks made here are decoded by both, bit for bit, and random MXFP4 inputs are encoded by both,
// byte for byte. gguf-py runs from .venv-e2e (scripts/install_python_test_deps.sh pins it; the
// test fails, naming that script, when the interpreter or the package is missing).
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/dequantize.h"
#include "gtest/gtest.h"
#include "tests/unique_temp_path.h"

namespace tessera::gguf {
namespace {

constexpr char kPython[] = ".venv-e2e/bin/python";
constexpr char kScript[] = "tests/unit/gguf/fp4_oracle.py";

template <typename T>
void WriteFile(const std::string& path, const std::vector<T>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(T)));
}

template <typename T>
std::vector<T> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Runs the oracle script with `args`; true on success, else reports its stderr.
bool RunOracle(const std::string& args) {
  if (!std::filesystem::exists(kPython)) {
    ADD_FAILURE() << kPython << " is missing: run scripts/install_python_test_deps.sh (from the "
                  << "repository root, where the tests run)";
    return false;
  }
  const std::string log = testing_util::UniqueTempPath("fp4_oracle.log");
  const std::string command =
      std::string(kPython) + " " + kScript + " " + args + " 2> " + log;
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::ifstream err(log);
    ADD_FAILURE() << command << " failed (" << status << "):\n"
                  << std::string(std::istreambuf_iterator<char>(err), {})
                  << "\n(the gguf package comes from scripts/install_python_test_deps.sh)";
    return false;
  }
  return true;
}

// Our decoding of `blocks` and gguf-py's, as f32 bit patterns.
void ExpectSameDecoding(GgmlType type, const std::vector<uint8_t>& blocks) {
  const GgmlTypeInfo& info = GetGgmlTypeInfo(type);
  const uint64_t n = blocks.size() / info.type_size * info.block_size;
  const auto ours = DequantizeToF32(type, blocks, n);
  ASSERT_TRUE(ours.ok()) << ours.status();
  const std::string in = testing_util::UniqueTempPath("fp4_blocks.bin");
  const std::string out = testing_util::UniqueTempPath("fp4_values.bin");
  WriteFile(in, blocks);
  ASSERT_TRUE(RunOracle(std::string("dequantize ") + info.name + " " + in + " " + out));
  const std::vector<uint32_t> theirs = ReadFile<uint32_t>(out);
  ASSERT_EQ(theirs.size(), n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>((*ours)[i]), theirs[i])
        << info.name << " element " << i << " (block " << i / info.block_size << ")";
  }
}

// Every E8M0 scale byte once (block e has scale e), then random blocks; codes random.
TEST(Fp4OracleTest, Mxfp4DecodesLikeGgufPy) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> blocks;
  for (int b = 0; b < 256 + 256; ++b) {
    blocks.push_back(static_cast<uint8_t>(b < 256 ? b : byte(rng)));
    for (int j = 0; j < 16; ++j) blocks.push_back(static_cast<uint8_t>(byte(rng)));
  }
  ExpectSameDecoding(GgmlType::kMxfp4, blocks);
}

// Every UE4M3 scale byte once (0x7F, 0x80 and 0xFF included), then random blocks.
TEST(Fp4OracleTest, Nvfp4DecodesLikeGgufPy) {
  std::mt19937 rng(2025);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> blocks;
  for (int b = 0; b < 64 + 256; ++b) {
    for (int s = 0; s < 4; ++s) blocks.push_back(static_cast<uint8_t>(b < 64 ? 4 * b + s : byte(rng)));
    for (int j = 0; j < 32; ++j) blocks.push_back(static_cast<uint8_t>(byte(rng)));
  }
  ExpectSameDecoding(GgmlType::kNvfp4, blocks);
}

// gguf-py's MXFP4 encoder is a port of ggml's quantize_row_mxfp4_ref: same bytes as ours, for
// blocks of very different magnitudes (and a zero block).
TEST(Fp4OracleTest, Mxfp4EncodesLikeGgufPy) {
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<float> x;
  for (int b = 0; b < 400; ++b) {
    const float scale = b == 7 ? 0.0f : std::ldexp(1.0f, exponent(rng));
    for (int j = 0; j < 32; ++j) x.push_back(normal(rng) * scale);
  }
  const auto ours = QuantizeFromF32(GgmlType::kMxfp4, x);
  ASSERT_TRUE(ours.ok());
  const std::string in = testing_util::UniqueTempPath("fp4_input.bin");
  const std::string out = testing_util::UniqueTempPath("fp4_encoded.bin");
  WriteFile(in, x);
  ASSERT_TRUE(RunOracle("quantize MXFP4 " + in + " " + out));
  const std::vector<uint8_t> theirs = ReadFile<uint8_t>(out);
  ASSERT_EQ(theirs.size(), ours->size());
  for (size_t i = 0; i < theirs.size(); ++i) {
    ASSERT_EQ((*ours)[i], theirs[i]) << "byte " << i << " (block " << i / 17 << ")";
  }
}

}  // namespace
}  // namespace tessera::gguf
