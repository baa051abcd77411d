// The router refuses a worker whose EOS ids its tokenizer cannot represent (the stop checker
// would otherwise abort on the first request), and accepts one whose ids all fit.
#include "router/worker_compatibility.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace tessera::router {
namespace {

using ::testing::HasSubstr;

TEST(WorkerCompatibility, EosIdsInsideTheTokenizerAreAccepted) {
  const std::vector<int32_t> eos = {0, 2, 458};
  EXPECT_TRUE(CheckWorkerEosFitsTokenizer(eos, 459).ok());
  EXPECT_TRUE(CheckWorkerEosFitsTokenizer({}, 459).ok());
}

TEST(WorkerCompatibility, AnEosIdOutsideTheTokenizerIsRefusedNamingIt) {
  const std::vector<int32_t> eos = {2, 151645};
  const absl::Status status = CheckWorkerEosFitsTokenizer(eos, 459);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("EOS id 151645"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("459 ids"));
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(CheckWorkerEosFitsTokenizer(negative, 459).ok());
  const std::vector<int32_t> at_end = {459};
  EXPECT_FALSE(CheckWorkerEosFitsTokenizer(at_end, 459).ok());
}

}  // namespace
}  // namespace tessera::router
