// The model's name in the OpenAI API (`--served-model-name`, as vLLM's): by default the model
// file's name without `.gguf` is reported and `general.name` still accepted; given names replace
// both, the first reported and every one accepted; another name is a 404 naming the served one.
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/serving_harness.h"

namespace tessera::e2e {
namespace {

using Json = nlohmann::json;

struct Http {
  explicit Http(const std::string& host_port)
      : client(host_port.substr(0, host_port.rfind(':')),
               std::stoi(host_port.substr(host_port.rfind(':') + 1))) {
    client.set_read_timeout(60);
  }
  // GET /v1/models: the listed ids.
  std::vector<std::string> Models() {
    httplib::Result r = client.Get("/v1/models");
    EXPECT_TRUE(r && r->status == 200);
    std::vector<std::string> ids;
    if (!r) return ids;
    const Json listed = Json::parse(r->body);
    for (const Json& m : listed["data"]) ids.push_back(m["id"]);
    return ids;
  }
  // POST /v1/completions naming `model`: the status, and the answer's model (or error message).
  std::pair<int, std::string> Complete(const std::string& model) {
    const Json body = {{"model", model}, {"prompt", "Hello"}, {"max_tokens", 2}};
    httplib::Result r = client.Post("/v1/completions", body.dump(), "application/json");
    if (!r) return {0, ""};
    const Json answer = Json::parse(r->body);
    return {r->status, r->status == 200 ? answer["model"].get<std::string>()
                                        : answer["error"]["message"].get<std::string>()};
  }
  httplib::Client client;
};

TEST(ServedModelNameTest, DefaultIsTheFileStemAndGeneralNameStillWorks) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "1"}, {"--http-port", "-1"}).ok());
  Http http(serving.router_http_address());
  EXPECT_EQ(http.Models(), std::vector<std::string>{"SmolLM2-135M-Instruct.Q4_1"});
  EXPECT_EQ(http.Complete("SmolLM2-135M-Instruct.Q4_1"),
            std::make_pair(200, std::string("SmolLM2-135M-Instruct.Q4_1")));
  EXPECT_EQ(http.Complete("Smollm2 135M 8k Lc100K Mix1 Ep2").first, 200);  // general.name
  EXPECT_EQ(http.Complete("").first, 200);
  const auto [status, message] = http.Complete("gpt-4");
  EXPECT_EQ(status, 404);
  EXPECT_NE(message.find("serves 'SmolLM2-135M-Instruct.Q4_1'"), std::string::npos) << message;
}

TEST(ServedModelNameTest, GivenNamesReplaceTheDefaults) {
  ServingProcesses serving;
  ASSERT_TRUE(serving.Start({"--threads", "1"},
                            {"--http-port", "-1", "--served-model-name", "smol",
                             "--served-model-name", "org/smol-instruct"})
                  .ok());
  Http http(serving.router_http_address());
  EXPECT_EQ(http.Models(), std::vector<std::string>{"smol"});
  EXPECT_EQ(http.Complete("org/smol-instruct"), std::make_pair(200, std::string("smol")));
  EXPECT_EQ(http.Complete("smol").first, 200);
  EXPECT_EQ(http.Complete("SmolLM2-135M-Instruct.Q4_1").first, 404);
  EXPECT_EQ(http.Complete("Smollm2 135M 8k Lc100K Mix1 Ep2").first, 404);
}

}  // namespace
}  // namespace tessera::e2e
