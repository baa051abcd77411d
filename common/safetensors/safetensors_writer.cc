#include "common/safetensors/safetensors_writer.h"

#include <fstream>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "nlohmann/json.hpp"

namespace tessera::safetensors {

void SafetensorsWriter::Add(std::string name, Dtype dtype, std::vector<uint64_t> shape,
                            std::span<const uint8_t> data) {
  uint64_t elements = 1;
  for (uint64_t d : shape) elements *= d;
  TESSERA_CHECK(data.size() == elements * DtypeSize(dtype),
                "SafetensorsWriter::Add: data size does not match the shape");
  tensors_.push_back({std::move(name), dtype, std::move(shape), {data.begin(), data.end()}});
}

std::vector<uint8_t> SafetensorsWriter::Serialize() const {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const Pending& t : tensors_) {
    header[t.name] = {{"dtype", std::string(DtypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const Pending& t : tensors_) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

absl::Status SafetensorsWriter::WriteToFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace tessera::safetensors
