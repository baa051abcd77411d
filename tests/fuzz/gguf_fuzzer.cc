// libFuzzer target for the GGUF reader: any byte string must either parse or fail with
// INVALID_ARGUMENT, without crashes, leaks or undefined behaviour. Parsed files are exercised
// the way a model loader would use them: every metadata value is rendered and read through the
// typed getters, every tensor's bytes are touched and small tensors are dequantized, and the file
// is re-serialized with GgufWriter and parsed again (the result must describe the same model).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"

namespace {

using tessera::gguf::GgufFile;

// Caps keep one input's work small; they bound work per input, not what the parser accepts.
constexpr uint64_t kMaxDequantizeElements = uint64_t{1} << 16;
constexpr uint64_t kMaxRewriteBytes = uint64_t{1} << 20;
// The writer pads to the alignment even without tensors (as ggml does); a file declaring
// alignment 2^31 would make the rewrite allocate gigabytes, so such files are not rewritten.
constexpr uint64_t kMaxRewriteAlignment = uint64_t{1} << 16;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "gguf_fuzzer invariant broken: %s\n", what);
  std::abort();
}

void TouchMetadata(const GgufFile& file) {
  size_t total = 0;
  for (const tessera::gguf::GgufMetadataEntry& entry : file.metadata()) {
    total += entry.value.DebugString().size();
    if (file.FindMetadata(entry.key) != &entry.value) Fail("FindMetadata does not find a key");
    // Getters must answer with a value or a status, whatever the type.
    total += file.GetString(entry.key).ok() + file.GetInt(entry.key).ok() +
             file.GetFloat(entry.key).ok() + file.GetBool(entry.key).ok() +
             file.GetStringArray(entry.key).ok() + file.GetIntArray(entry.key).ok() +
             file.GetFloatArray(entry.key).ok();
  }
  if (total == 1) std::fputc(' ', stderr);  // keep the work observable
}

void TouchTensors(const GgufFile& file) {
  for (const tessera::gguf::GgufTensorInfo& t : file.tensors()) {
    if (file.FindTensor(t.name) != &t) Fail("FindTensor does not find a tensor");
    const std::span<const uint8_t> data = file.TensorData(t);
    if (data.size() != t.num_bytes) Fail("TensorData size differs from num_bytes");
    unsigned sum = 0;
    for (uint8_t b : data) sum += b;
    if (sum == 0xFFFFFFFF) std::fputc(' ', stderr);
    if (tessera::gguf::CanDequantize(t.type) && t.num_elements <= kMaxDequantizeElements) {
      auto values = tessera::gguf::DequantizeToF32(t.type, data, t.num_elements);
      if (!values.ok()) Fail("a validated tensor failed to dequantize");
    }
  }
}

void RewriteAndReparse(const GgufFile& file) {
  uint64_t total = 0;
  for (const auto& t : file.tensors()) total += t.num_bytes;
  if (total > kMaxRewriteBytes || file.alignment() > kMaxRewriteAlignment) return;
  tessera::gguf::GgufWriter writer(file.version(), file.alignment());
  for (const auto& entry : file.metadata()) {
    // The writer emits general.alignment itself for non-default alignments.
    if (entry.key == "general.alignment" && file.alignment() != 32) continue;
    writer.AddValue(entry.key, entry.value);
  }
  for (const auto& t : file.tensors()) writer.AddTensor(t.name, t.dims, t.type, file.TensorData(t));
  auto again = GgufFile::FromBuffer(writer.Serialize());
  if (!again.ok()) Fail("re-serialized file does not parse");
  const GgufFile& b = **again;
  if (b.metadata().size() != file.metadata().size()) Fail("metadata count changed");
  if (b.tensors().size() != file.tensors().size()) Fail("tensor count changed");
  for (const auto& entry : file.metadata()) {
    const auto* other = b.FindMetadata(entry.key);
    if (other == nullptr || other->DebugString(1 << 20) != entry.value.DebugString(1 << 20)) {
      Fail("metadata value changed");
    }
  }
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const auto& x = file.tensors()[i];
    const auto& y = b.tensors()[i];
    if (x.name != y.name || x.dims != y.dims || x.type != y.type) Fail("tensor info changed");
    const auto dx = file.TensorData(x), dy = b.TensorData(y);
    if (!std::equal(dx.begin(), dx.end(), dy.begin(), dy.end())) Fail("tensor data changed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::FromBuffer(std::vector<uint8_t>(data, data + size));
  if (!file.ok()) {
    if (file.status().code() != absl::StatusCode::kInvalidArgument) Fail("unexpected status code");
    if (file.status().message().substr(0, 6) != "gguf: ") Fail("message lacks the gguf: prefix");
    return 0;
  }
  TouchMetadata(**file);
  TouchTensors(**file);
  RewriteAndReparse(**file);
  return 0;
}
