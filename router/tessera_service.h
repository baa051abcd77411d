// The public tessera.v1.Tessera service (gRPC callback API): Generate streams through the engine;
// Tokenize, Detokenize, ModelInfo and ServerStats answer on the handler thread.
//
// With an API key, every Tessera call needs metadata `authorization: Bearer <key>`
// (UNAUTHENTICATED otherwise); grpc.health.v1 and reflection stay open.
//
// Threading: handlers run on gRPC's callback threads; they validate requests themselves and talk
// to the engine only through Engine::Submit/Cancel and its thread-safe getters.
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <string>

#include "router/request_engine.h"
#include "router/model_frontend.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::router {

class TesseraService final : public ::tessera::v1::Tessera::CallbackService {
 public:
  // `api_key` "" = no key required.
  TesseraService(RequestEngine* engine, const ModelFrontend* model, std::string api_key = "");

  grpc::ServerWriteReactor<::tessera::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const ::tessera::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const ::tessera::v1::TokenizeRequest* request,
                                     ::tessera::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const ::tessera::v1::DetokenizeRequest* request,
                                       ::tessera::v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* context,
                                      const ::tessera::v1::ModelInfoRequest* request,
                                      ::tessera::v1::ModelInfoResponse* response) override;
  grpc::ServerUnaryReactor* ServerStats(grpc::CallbackServerContext* context,
                                        const ::tessera::v1::ServerStatsRequest* request,
                                        ::tessera::v1::ServerStatsResponse* response) override;

 private:
  uint64_t NextSeed();
  absl::Status CheckKey(const grpc::CallbackServerContext& context) const;

  RequestEngine* engine_;
  const ModelFrontend* model_;
  const std::string api_key_;
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;   // seeds for requests that give none
};

}  // namespace tessera::router
