// The web console's routes on the OpenAI HTTP server (router/openai/openai_server.h):
//
//   GET /                  the page (index.html); GET /console/NAME its script and style sheet.
//                          Public like /health: the page holds no data; it is told whether the
//                          server wants an API key, and asks for it before any request.
//   GET /v1/console/events the live batch view's server-sent events (needs the API key like
//                          every /v1 route):
//       event: stats   every second: {"workers":[{"index":0,"address":"127.0.0.1:50051",
//                      "serving":true,"running":3,"waiting":0,"kv_blocks_used":40,
//                      "kv_blocks_cached":12,"kv_blocks_total":2048,"prefix_query_tokens":900,
//                      "prefix_hit_tokens":512,"steps":1234,"preemptions":0}],
//                      "dropped":0}   (dropped: step records this viewer lost, below)
//       event: step    one per step a worker ran while the viewer watched: the step record of
//                      router/step_recorder.h with "worker" (the --worker index) in front.
//   A viewer that reads slower than steps arrive loses its oldest step records (StepFeed's
//   bounded queue, counted in `dropped` and tessera_console_records_dropped_total); more
//   viewers than the feed takes get 503.
//
// Responses carry a Content-Security-Policy that lets the page load and connect to this origin
// only: the console works air-gapped and cannot be made to reach another host.
//
// Threading: the page's routes run on the I/O thread; the events route holds a pool thread
// while its viewer watches (it notices a departed viewer within a second).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "common/http/http_server.h"
#include "router/console/step_feed.h"
#include "router/request_engine.h"

namespace tessera::router::console {

// `admit` guards the events route (the server's API-key check; null = open); `key_required`
// tells the page whether to ask for the key before it sends anything.
std::vector<http::Route> ConsoleRoutes(
    StepFeed* feed, const RequestEngine* engine, bool key_required,
    std::function<std::optional<http::Response>(const http::Request& head)> admit);

}  // namespace tessera::router::console
