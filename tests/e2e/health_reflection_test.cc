// The router's standard gRPC services: grpc.health.v1 follows the worker (NOT_SERVING without
// one, SERVING once it described itself, NOT_SERVING again when it is lost), and server
// reflection lists and describes the public API.
#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

namespace health = ::grpc::health::v1;
namespace reflection = ::grpc::reflection::v1alpha;
using ::testing::Contains;
using ::testing::HasSubstr;

health::HealthCheckResponse::ServingStatus HealthOf(const std::string& address) {
  auto stub = health::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  health::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, health::HealthCheckRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// Polls until the router's health is `want` (the router refreshes it every 100 ms).
bool HealthBecomes(const std::string& address, health::HealthCheckResponse::ServingStatus want) {
  for (int i = 0; i < 100; ++i) {
    if (HealthOf(address) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(HealthTest, FollowsTheWorker) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.StartWorker({"--threads", "1"}).ok());
  const int worker_port = serving.worker_port();
  serving.KillWorker();  // the router starts with nothing to talk to
  ASSERT_TRUE(serving.StartRouter().ok());
  const std::string router = serving.router_address();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(HealthOf(router), health::HealthCheckResponse::NOT_SERVING);

  // NOT_SERVING above may be no more than the health service's initial state; the two cycles
  // below prove the status follows the worker both ways: SERVING -> NOT_SERVING on its loss and
  // back to SERVING when it returns, twice.
  for (int cycle = 0; cycle < 2; ++cycle) {
    SCOPED_TRACE(cycle);
    ASSERT_TRUE(serving.StartWorker({"--threads", "1"}, worker_port).ok());
    ASSERT_TRUE(HealthBecomes(router, health::HealthCheckResponse::SERVING));
    EXPECT_EQ(HealthOf(router), health::HealthCheckResponse::SERVING);  // stays, not a flicker
    serving.KillWorker();
    EXPECT_TRUE(HealthBecomes(router, health::HealthCheckResponse::NOT_SERVING));
  }

  // A worker back on the same port is picked up again; each transition is one structured log
  // line on the router's stderr (issue 15, item 5).
  ASSERT_TRUE(serving.StartWorker({"--threads", "1"}, worker_port).ok());
  EXPECT_TRUE(HealthBecomes(router, health::HealthCheckResponse::SERVING));
  const std::string log = serving.RouterStderrTail();
  EXPECT_THAT(log, HasSubstr("level=info component=tessera-router event=worker_connected "));
  EXPECT_THAT(log, HasSubstr("level=warning component=tessera-router event=worker_lost "));
  EXPECT_THAT(log, HasSubstr("level=info component=tessera-router event=worker_restored "));
}

TEST(ReflectionTest, ListsAndDescribesThePublicApi) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.StartWorker({"--threads", "1"}).ok());
  ASSERT_TRUE(serving.StartRouter().ok());
  auto stub = reflection::ServerReflection::NewStub(
      grpc::CreateChannel(serving.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);

  reflection::ServerReflectionRequest list;
  list.set_list_services("*");
  ASSERT_TRUE(stream->Write(list));
  reflection::ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  std::vector<std::string> services;
  for (const auto& service : listed.list_services_response().service()) {
    services.push_back(service.name());
  }
  EXPECT_THAT(services, Contains("tessera.v1.Tessera"));
  EXPECT_THAT(services, Contains("grpc.health.v1.Health"));

  reflection::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("tessera.v1.Tessera");
  ASSERT_TRUE(stream->Write(describe));
  reflection::ServerReflectionResponse described;
  ASSERT_TRUE(stream->Read(&described));
  ASSERT_GE(described.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(described.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "tessera/v1/tessera.proto");
  bool generate_streams = false;
  for (const auto& service : file.service()) {
    for (const auto& method : service.method()) {
      if (method.name() == "Generate") generate_streams = method.server_streaming();
    }
  }
  EXPECT_TRUE(generate_streams) << "Generate must be server-streaming in the served descriptor";
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace tessera::e2e
