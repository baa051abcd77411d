#include "router/console/console_routes.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/util/check.h"
#include "nlohmann/json.hpp"
#include "router/console/console_assets.h"

namespace tessera::router::console {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr std::chrono::milliseconds kStatsInterval{1000};

http::HeaderList PageHeaders() {
  return {{"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
           "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
          {"X-Content-Type-Options", "nosniff"},
          {"Cache-Control", "no-cache"}};
}

// GET `path`: the embedded file served there; the page's "@KEY_REQUIRED@" becomes whether this
// server wants an API key, so the page asks for it before it sends a request.
http::Route AssetRoute(const std::string& path, bool key_required) {
  const std::optional<ConsoleAsset> asset = FindConsoleAsset(path);
  TESSERA_CHECK(asset.has_value(), "ConsoleRoutes: a route for a file that is not embedded");
  http::Response response;
  response.content_type = std::string(asset->content_type);
  response.body = std::string(asset->body);
  response.headers = PageHeaders();
  if (path == "/") {
    response.body = absl::StrReplaceAll(response.body,
                                        {{"@KEY_REQUIRED@", key_required ? "true" : "false"}});
  }
  http::Route route;
  route.method = "GET";
  route.path = path;
  route.execution = http::Execution::kInline;
  route.handle = [response](const http::Request&, http::Responder& responder) {
    responder.Send(response);
  };
  return route;
}

std::string StatsEvent(const RequestEngine& engine, uint64_t dropped) {
  Json workers = Json::array();
  for (const WorkerStatus& w : engine.workers()) {
    const EngineStats& s = w.stats;
    workers.push_back(Json{{"index", w.index},
                           {"address", w.address},
                           {"serving", w.serving},
                           {"running", s.requests_running},
                           {"waiting", s.requests_waiting},
                           {"kv_blocks_used", s.kv_blocks_used},
                           {"kv_blocks_cached", s.kv_blocks_cached},
                           {"kv_blocks_total", s.kv_blocks_total},
                           {"prefix_query_tokens", s.prefix_cache_query_tokens},
                           {"prefix_hit_tokens", s.prefix_cache_hit_tokens},
                           {"steps", s.steps},
                           {"preemptions", s.preemptions}});
  }
  const Json stats{{"workers", std::move(workers)}, {"dropped", dropped}};
  return absl::StrCat("event: stats\ndata: ", stats.dump(), "\n\n");
}

// Streams stats every second and the step records in between, until the viewer leaves or the
// server stops (a write then fails).
void ServeEvents(StepFeed& feed, const RequestEngine& engine, http::Responder& responder) {
  const std::unique_ptr<StepFeed::Subscription> subscription = feed.Subscribe();
  if (subscription == nullptr) {
    http::Response busy;
    busy.status = 503;
    busy.body = absl::StrCat("the console's live view has ", feed.max_subscribers(),
                             " viewers already; close one and retry\n");
    responder.Send(std::move(busy));
    return;
  }
  if (!responder.Begin(200, "text/event-stream",
                       {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})) {
    return;
  }
  Clock::time_point next_stats = Clock::now();
  while (!responder.ClientGone()) {
    if (Clock::now() >= next_stats) {
      if (!responder.Write(StatsEvent(engine, subscription->dropped()))) break;
      next_stats = Clock::now() + kStatsInterval;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_stats - Clock::now());
    std::string events;
    for (const std::string& record :
         subscription->Take(std::max(wait, std::chrono::milliseconds(0)))) {
      absl::StrAppend(&events, "event: step\ndata: ", record, "\n\n");
    }
    if (!events.empty() && !responder.Write(events)) break;
  }
  responder.End();
}

}  // namespace

std::vector<http::Route> ConsoleRoutes(
    StepFeed* feed, const RequestEngine* engine, bool key_required,
    std::function<std::optional<http::Response>(const http::Request& head)> admit) {
  std::vector<http::Route> routes;
  routes.push_back(AssetRoute("/", key_required));
  for (size_t i = 0; i < kConsoleFilesCount; ++i) {
    if (kConsoleFiles[i].name == "index.html") continue;  // served at "/"
    routes.push_back(
        AssetRoute("/console/" + std::string(kConsoleFiles[i].name), key_required));
  }
  http::Route events;
  events.method = "GET";
  events.path = "/v1/console/events";
  events.execution = http::Execution::kPool;
  events.admit = std::move(admit);
  events.handle = [feed, engine](const http::Request&, http::Responder& responder) {
    ServeEvents(*feed, *engine, responder);
  };
  routes.push_back(std::move(events));
  return routes;
}

}  // namespace tessera::router::console
