#include "common/tokenizer/special_tokens.h"

#include <cassert>

namespace tessera::tokenizer {

void SpecialTokenMatcher::Add(std::string_view text, TokenId id, bool is_control) {
  assert(!text.empty() && "special token text must not be empty");
  int32_t node = 0;
  for (char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    auto it = nodes_[node].children.find(byte);
    if (it == nodes_[node].children.end()) {
      nodes_.push_back(Node{});
      const auto child = static_cast<int32_t>(nodes_.size() - 1);
      nodes_[node].children.emplace(byte, child);
      node = child;
    } else {
      node = it->second;
    }
  }
  if (nodes_[node].id >= 0) return;
  nodes_[node].id = id;
  nodes_[node].is_control = is_control;
  first_byte_[static_cast<uint8_t>(text[0])] = true;
  ++num_tokens_;
}

std::optional<SpecialTokenMatcher::Match> SpecialTokenMatcher::LongestAt(
    std::string_view text, size_t pos, bool include_control) const {
  std::optional<Match> best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& children = nodes_[node].children;
    auto it = children.find(static_cast<uint8_t>(text[i]));
    if (it == children.end()) break;
    node = it->second;
    const Node& n = nodes_[node];
    if (n.id >= 0 && (include_control || !n.is_control)) best = Match{pos, i + 1 - pos, n.id};
  }
  return best;
}

std::optional<SpecialTokenMatcher::Match> SpecialTokenMatcher::FindNext(
    std::string_view text, size_t pos, bool include_control) const {
  if (num_tokens_ == 0) return std::nullopt;
  for (size_t i = pos; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    if (auto match = LongestAt(text, i, include_control)) return match;
  }
  return std::nullopt;
}

}  // namespace tessera::tokenizer
