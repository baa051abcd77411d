// SafetensorsFile: the header parser and the layout checks (rules in safetensors_file.h).
#include "common/safetensors/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/absl_compat.h"
#include "nlohmann/json.hpp"

namespace tessera::safetensors {
namespace {

using Json = nlohmann::json;

// A header is an object of objects holding one-level arrays: three levels; one spare.
constexpr int kMaxHeaderDepth = 4;
constexpr size_t kMaxNameInMessage = 120;
constexpr char kMetadataKey[] = "__metadata__";

// A tensor as the header describes it, before its bytes are located.
struct HeaderEntry {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<uint64_t> shape;
  uint64_t num_elements = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Names come from the file: shown escaped and bounded.
std::string Printable(std::string_view name) {
  const std::string_view shown = name.substr(0, kMaxNameInMessage);
  return absl::StrCat(absl::CEscape(util::ToAbsl(shown)), name.size() > shown.size() ? "..." : "");
}

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors '", path_, "': ", util::ToAbsl(what)));
  }
  absl::Status TensorError(std::string_view name, std::string_view what) const {
    return Error(absl::StrCat("tensor '", Printable(name), "': ", util::ToAbsl(what)));
  }

  // The JSON header as an object; a duplicate top-level key or deep nesting is an error.
  absl::StatusOr<Json> ParseJson(std::string_view text) const {
    absl::flat_hash_set<std::string> keys;
    std::optional<std::string> duplicate;
    bool too_deep = false;
    const Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event,
                                                 Json& parsed) {
      if (event == Json::parse_event_t::key && depth == 1) {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys.insert(key).second && !duplicate) duplicate = key;
      }
      if ((event == Json::parse_event_t::object_start ||
           event == Json::parse_event_t::array_start) &&
          depth >= kMaxHeaderDepth) {
        too_deep = true;
        return false;
      }
      return true;
    };
    Json json = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
    if (json.is_discarded()) return Error("the header is not valid JSON");
    if (!json.is_object()) return Error("the header is not a JSON object");
    if (too_deep)
      return Error(absl::StrCat("the header nests deeper than ", kMaxHeaderDepth, " levels"));
    if (duplicate) return TensorError(*duplicate, "appears twice in the header");
    return json;
  }

  absl::StatusOr<HeaderEntry> ParseEntry(const std::string& name, const Json& node) const {
    if (absl::Status s = CheckName(name); !s.ok()) return s;
    if (!node.is_object()) return TensorError(name, "entry is not a JSON object");
    HeaderEntry entry;
    entry.name = name;
    const auto dtype = node.find("dtype");
    if (dtype == node.end() || !dtype->is_string()) return TensorError(name, "has no dtype");
    const std::optional<Dtype> parsed = ParseDtype(dtype->get_ref<const std::string&>());
    if (!parsed) {
      return TensorError(name, absl::StrCat("dtype '", Printable(dtype->get<std::string>()),
                                            "' is unknown or not supported"));
    }
    entry.dtype = *parsed;
    if (absl::Status s = ReadShape(name, node, &entry); !s.ok()) return s;
    if (absl::Status s = ReadOffsets(name, node, &entry); !s.ok()) return s;
    return entry;
  }

  // Sorted by offset, the tensors must tile [0, data_size) exactly.
  absl::Status CheckLayout(std::vector<HeaderEntry>& entries, uint64_t data_size) const {
    std::sort(entries.begin(), entries.end(),
              [](const HeaderEntry& a, const HeaderEntry& b) { return a.begin < b.begin; });
    uint64_t expected = 0;
    const HeaderEntry* previous = nullptr;
    for (const HeaderEntry& e : entries) {
      if (e.end > data_size) {
        return TensorError(e.name, absl::StrCat("data [", e.begin, ", ", e.end,
                                                ") runs past the end of the data section (",
                                                data_size, " bytes)"));
      }
      if (e.begin != expected) {
        const std::string what = e.begin < expected ? "overlaps" : "leaves a gap after";
        return TensorError(
            e.name, absl::StrCat("data [", e.begin, ", ", e.end, ") ", what,
                                 previous ? absl::StrCat(" tensor '", Printable(previous->name),
                                                         "', which ends at ", expected)
                                          : " the start of the data section",
                                 " (tensors must be contiguous)"));
      }
      expected = e.end;
      previous = &e;
    }
    if (expected != data_size) {
      return Error(absl::StrCat("the data section has ", data_size - expected,
                                " bytes after the last tensor's data"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckName(const std::string& name) const {
    if (name.empty()) return Error("a tensor has an empty name");
    for (char c : name) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte == 0x7F) {
        return TensorError(name, "name holds an ASCII control character");
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadShape(const std::string& name, const Json& node, HeaderEntry* entry) const {
    const auto shape = node.find("shape");
    if (shape == node.end() || !shape->is_array()) return TensorError(name, "has no shape array");
    entry->num_elements = 1;
    for (const Json& dim : *shape) {
      if (!dim.is_number_unsigned()) {
        return TensorError(
            name, absl::StrCat("shape ", shape->dump(), " holds a value that is not a size"));
      }
      const uint64_t d = dim.get<uint64_t>();
      if (d != 0 && entry->num_elements > std::numeric_limits<uint64_t>::max() / d) {
        return TensorError(name, absl::StrCat("shape ", shape->dump(), " overflows"));
      }
      entry->shape.push_back(d);
      entry->num_elements *= d;
    }
    return absl::OkStatus();
  }

  absl::Status ReadOffsets(const std::string& name, const Json& node, HeaderEntry* entry) const {
    const auto offsets = node.find("data_offsets");
    if (offsets == node.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      return TensorError(name, "data_offsets is not a [begin, end] pair of sizes");
    }
    entry->begin = (*offsets)[0].get<uint64_t>();
    entry->end = (*offsets)[1].get<uint64_t>();
    if (entry->end < entry->begin) {
      return TensorError(name, absl::StrCat("data_offsets [", entry->begin, ", ", entry->end,
                                            ") end before they begin"));
    }
    const uint64_t size = DtypeSize(entry->dtype);
    if (entry->num_elements > std::numeric_limits<uint64_t>::max() / size ||
        entry->end - entry->begin != entry->num_elements * size) {
      return TensorError(name, absl::StrCat("data_offsets [", entry->begin, ", ", entry->end,
                                            ") hold ", entry->end - entry->begin, " bytes, its ",
                                            util::ToAbsl(DtypeName(entry->dtype)), " shape [",
                                            absl::StrJoin(entry->shape, ", "), "] needs ",
                                            entry->num_elements, " x ", size));
    }
    return absl::OkStatus();
  }

  const std::string& path_;
};

// The header length, checked against the cap and the file.
absl::StatusOr<uint64_t> ReadHeaderLength(const HeaderParser& parser,
                                          std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) {
    return parser.Error(
        absl::StrCat("the file has ", bytes.size(), " bytes, fewer than the 8-byte header length"));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | bytes[i];
  if (length > kMaxHeaderBytes) {
    return parser.Error(absl::StrCat("the header length ", length, " exceeds the limit of ",
                                     kMaxHeaderBytes, " bytes"));
  }
  if (length > bytes.size() - 8) {
    return parser.Error(absl::StrCat("the header length ", length,
                                     " runs past the end of the file (", bytes.size(), " bytes)"));
  }
  return length;
}

absl::StatusOr<std::vector<HeaderEntry>> ParseHeader(const HeaderParser& parser,
                                                     std::span<const uint8_t> bytes,
                                                     uint64_t* data_start) {
  absl::StatusOr<uint64_t> length = ReadHeaderLength(parser, bytes);
  if (!length.ok()) return length.status();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, *length);
  absl::StatusOr<Json> header = parser.ParseJson(text);
  if (!header.ok()) return header.status();
  std::vector<HeaderEntry> entries;
  for (const auto& [name, node] : header->items()) {
    if (name == kMetadataKey) continue;
    absl::StatusOr<HeaderEntry> entry = parser.ParseEntry(name, node);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  *data_start = 8 + *length;
  if (absl::Status s = parser.CheckLayout(entries, bytes.size() - *data_start); !s.ok()) return s;
  return entries;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path,
                                                                       util::FileLoad load) {
  absl::StatusOr<util::MappedFile> mapped = util::MappedFile::Open(path, load);
  if (!mapped.ok()) {
    return absl::Status(mapped.status().code(),
                        absl::StrCat("safetensors: ", mapped.status().message()));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = *std::move(mapped);
  const std::span<const uint8_t> bytes = file->mapping_.bytes();
  const HeaderParser parser(path);
  uint64_t data_start = 0;
  absl::StatusOr<std::vector<HeaderEntry>> entries = ParseHeader(parser, bytes, &data_start);
  if (!entries.ok()) return entries.status();
  for (HeaderEntry& e : *entries) {
    file->tensors_.push_back({.name = std::move(e.name),
                              .dtype = e.dtype,
                              .shape = std::move(e.shape),
                              .num_elements = e.num_elements,
                              .data = bytes.subspan(data_start + e.begin, e.end - e.begin)});
  }
  // After the vector is complete: the keys view its names.
  for (size_t i = 0; i < file->tensors_.size(); ++i)
    file->index_.emplace(file->tensors_[i].name, i);
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tessera::safetensors
