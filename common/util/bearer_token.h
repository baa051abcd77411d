// Shared-secret checks for tessera's APIs: the public gRPC and HTTP APIs take an API key as
// `authorization: Bearer <key>`, and the router presents the router⇄worker secret to the worker
// in the same form. Comparisons of equal-length values take the same time wherever they differ.
//
// Threading: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

namespace tessera::util {

inline constexpr char kAuthorizationHeader[] = "authorization";

// True when `a` equals `b`; for equal lengths, in time independent of where they differ.
inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// "Bearer <token>" carries `token` (always true when `token` is empty: no key configured). The
// scheme is case-insensitive and may be followed by several spaces (RFC 7235).
inline bool BearerMatches(std::string_view header_value, const std::string& token) {
  if (token.empty()) return true;
  constexpr std::string_view kScheme = "bearer";
  if (header_value.size() <= kScheme.size() || header_value[kScheme.size()] != ' ') return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = header_value[i];
    if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != kScheme[i]) return false;
  }
  std::string_view credentials = header_value.substr(kScheme.size());
  while (!credentials.empty() && credentials.front() == ' ') credentials.remove_prefix(1);
  return ConstantTimeEquals(credentials, token);
}

// A gRPC call's metadata carries `authorization: Bearer <token>`; UNAUTHENTICATED otherwise.
inline grpc::Status CheckBearer(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                                const std::string& token, std::string_view what) {
  if (token.empty()) return grpc::Status::OK;
  auto it = metadata.find(kAuthorizationHeader);
  if (it != metadata.end() &&
      BearerMatches(std::string_view(it->second.data(), it->second.size()), token)) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(what) + ": missing or wrong 'authorization: Bearer <key>'");
}

}  // namespace tessera::util
