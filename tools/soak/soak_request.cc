#include "tools/soak/soak_request.h"

#include <chrono>
#include <future>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::soak {
namespace {

namespace v1 = ::tessera::v1;

// Prompts share beginnings (the prefix cache is exercised) and end in the request's number.
constexpr const char* kPrompts[] = {
    "Once upon a time",
    "The capital of France is",
    "Write a haiku about the sea:",
    "List three prime numbers:",
};

v1::GenerateRequest WellFormed(std::mt19937& rng, const SoakOptions& options, int index) {
  v1::GenerateRequest request;
  const std::string text = absl::StrCat(kPrompts[rng() % std::size(kPrompts)], " (", index, ")");
  if (rng() % 4 == 0) {
    v1::ChatMessage* message = request.mutable_chat()->add_messages();
    message->set_role("user");
    message->set_content(text);
  } else {
    request.set_text(text);
  }
  request.set_max_tokens(1 + static_cast<int>(rng() % static_cast<uint32_t>(options.max_tokens)));
  request.set_ignore_eos(rng() % 2 == 0);
  request.mutable_sampling()->set_temperature(rng() % 2 == 0 ? 0.0f : 0.8f);
  request.set_request_id(absl::StrCat("soak-", index));
  return request;
}

Behaviour Draw(std::mt19937& rng, const SoakOptions& o) {
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  for (const auto& [behaviour, share] :
       {std::pair{Behaviour::kCancel, o.cancel_fraction},
        std::pair{Behaviour::kSlow, o.slow_fraction},
        std::pair{Behaviour::kMalformed, o.malformed_fraction},
        std::pair{Behaviour::kHttpSlowReader, o.http_slow_reader_fraction},
        std::pair{Behaviour::kHttpDisconnect, o.http_disconnect_fraction},
        std::pair{Behaviour::kHttpSlowSender, o.http_slow_sender_fraction}}) {
    if (u < share) return behaviour;
    u -= share;
  }
  return Behaviour::kPlain;
}

// The HTTP behaviours' knobs: half the slow readers stall, a quarter of the slow senders do;
// disconnects leave after 0..300 ms, half of them from a stream.
void PlanHttp(std::mt19937& rng, SoakRequest* plan) {
  switch (plan->behaviour) {
    case Behaviour::kHttpSlowReader:
      plan->stall = rng() % 2 == 0;
      break;
    case Behaviour::kHttpDisconnect:
      plan->request_stream = rng() % 2 == 0;
      plan->disconnect_after_ms = static_cast<int>(rng() % 301);
      break;
    case Behaviour::kHttpSlowSender:
      plan->request_stream = rng() % 2 == 0;
      plan->stall = rng() % 4 == 0;
      break;
    default:
      break;
  }
}

grpc::Status SendRaw(grpc::GenericStub& generic, const std::string& bytes, double timeout_s) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  std::promise<grpc::Status> done;
  generic.UnaryCall(&context, "/tessera.v1.Tessera/Generate", grpc::StubOptions(), &request,
                    &response, [&done](grpc::Status status) { done.set_value(status); });
  return done.get_future().get();
}

}  // namespace

const char* BehaviourName(Behaviour b) {
  switch (b) {
    case Behaviour::kPlain: return "plain";
    case Behaviour::kCancel: return "cancel";
    case Behaviour::kSlow: return "slow";
    case Behaviour::kMalformed: return "malformed";
    case Behaviour::kHttpSlowReader: return "http-slow-reader";
    case Behaviour::kHttpDisconnect: return "http-disconnect";
    case Behaviour::kHttpSlowSender: return "http-slow-sender";
  }
  return "?";
}

SoakRequest PlanSoakRequest(const SoakOptions& options, int index, bool warmup) {
  std::mt19937 rng(options.seed * 1000003u + static_cast<uint32_t>(index) * 2u + (warmup ? 1 : 0));
  SoakRequest plan;
  plan.request = WellFormed(rng, options, index);
  plan.behaviour = warmup ? Behaviour::kPlain : Draw(rng, options);
  if (plan.behaviour == Behaviour::kCancel) {
    plan.cancel_after_tokens = static_cast<int>(rng() % static_cast<uint32_t>(options.max_tokens));
  }
  PlanHttp(rng, &plan);
  if (plan.behaviour == Behaviour::kMalformed) {
    plan.raw_bytes = rng() % 2 == 0;
    if (plan.raw_bytes) {
      // request_id (field 1) holding invalid UTF-8, or a text (field 2) cut short of its length.
      plan.bytes = rng() % 2 == 0 ? std::string("\x0a\x02\xff\xfe\x12\x02hi", 8)
                                  : std::string("\x12\x64hi", 4);
    } else {
      plan.request.set_request_id(std::string(300, 'x'));  // the limit is 256 bytes
    }
  }
  return plan;
}

SoakOutcome RunSoakRequest(const SoakRequest& plan, const SoakOptions& options,
                           v1::Tessera::Stub& stub, grpc::GenericStub& generic) {
  SoakOutcome outcome;
  if (plan.behaviour == Behaviour::kMalformed && plan.raw_bytes) {
    const grpc::Status status = SendRaw(generic, plan.bytes, options.request_timeout_s);
    outcome.code = status.error_code();
    outcome.message = status.error_message();
    return outcome;
  }
  grpc::ClientContext context;
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_s * 1000)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, plan.request);
  v1::GenerateResponse response;
  bool cancelled = false;
  while (true) {
    if (plan.behaviour == Behaviour::kSlow) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.slow_read_delay_ms));
    }
    if (plan.behaviour == Behaviour::kCancel && !cancelled &&
        outcome.tokens >= plan.cancel_after_tokens) {
      context.TryCancel();  // the stream then ends with CANCELLED (unless it had ended)
      cancelled = true;
    }
    if (!reader->Read(&response)) break;
    outcome.tokens += response.token_ids_size();
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      outcome.finished_reason_seen = true;
    }
  }
  const grpc::Status status = reader->Finish();
  outcome.code = status.error_code();
  outcome.message = status.error_message();
  return outcome;
}

bool ExpectedEnd(const SoakRequest& plan, grpc::StatusCode code, bool during_kill) {
  using grpc::StatusCode;
  if (code == StatusCode::UNAVAILABLE) return during_kill && plan.behaviour != Behaviour::kMalformed;
  switch (plan.behaviour) {
    case Behaviour::kMalformed:
      return code == (plan.raw_bytes ? StatusCode::UNIMPLEMENTED : StatusCode::INVALID_ARGUMENT);
    case Behaviour::kCancel:
    case Behaviour::kHttpSlowReader:
    case Behaviour::kHttpDisconnect:
      return code == StatusCode::CANCELLED || code == StatusCode::OK;
    case Behaviour::kPlain:
    case Behaviour::kSlow:
    case Behaviour::kHttpSlowSender:  // a stalled one: OK = the door cut it off
      return code == StatusCode::OK;
  }
  return false;
}

}  // namespace tessera::soak
