// Protobuf from clients cannot recurse without bound: gRPC deserializes a request with
// protobuf's default recursion limit (100), and our messages have no recursive fields, so the
// only deep nesting a client can send is unknown groups, which the parser counts against the
// limit. A request of 60,000 nested groups (deserialized exactly as the gRPC server does) is
// refused, not a stack overflow. Guards against anyone raising the default limit.
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <gtest/gtest.h>

#include "tessera/v1/tessera.pb.h"

namespace tessera {
namespace {

// Field 99 as a start group (wire type 3) `depth` times, then as many end groups (wire type 4).
std::string NestedUnknownGroups(int depth) {
  const char start[] = {static_cast<char>(0x9b), 0x06};  // (99 << 3) | 3, varint
  const char end[] = {static_cast<char>(0x9c), 0x06};    // (99 << 3) | 4
  std::string out;
  for (int i = 0; i < depth; ++i) out.append(start, 2);
  for (int i = 0; i < depth; ++i) out.append(end, 2);
  return out;
}

grpc::Status Deserialize(const std::string& bytes, v1::GenerateRequest* out) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buffer(&slice, 1);
  return grpc::SerializationTraits<v1::GenerateRequest>::Deserialize(&buffer, out);
}

TEST(ProtoDepthTest, DeepUnknownGroupsAreRefusedNotRecursedInto) {
  v1::GenerateRequest shallow;
  EXPECT_TRUE(Deserialize(NestedUnknownGroups(10), &shallow).ok()) << "within the limit";
  v1::GenerateRequest deep;
  const grpc::Status status = Deserialize(NestedUnknownGroups(60000), &deep);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
}

}  // namespace
}  // namespace tessera
