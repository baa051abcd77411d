// Test helpers: scrape a /metrics endpoint and read one series' value from its text.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include <httplib.h>

namespace tessera::e2e {

// The body of GET http://HOST:PORT/metrics ("" when it does not answer 200).
inline std::string ScrapeMetrics(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  httplib::Client client(host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1)));
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Result result = client.Get("/metrics");
  return result && result->status == 200 ? result->body : "";
}

// The value of the first /metrics line that starts with `series` (-1 when there is none).
inline double SeriesValue(const std::string& metrics, const std::string& series) {
  size_t at = 0;
  while ((at = metrics.find(series, at)) != std::string::npos) {
    if (at == 0 || metrics[at - 1] == '\n') {
      const size_t space = metrics.find(' ', at + series.size());
      return std::stod(metrics.substr(space + 1, metrics.find('\n', space) - space - 1));
    }
    at += series.size();
  }
  return -1;
}

// Finished requests (status "length") on worker `worker` of a router with several.
inline double FinishedOn(const std::string& metrics, int worker) {
  return SeriesValue(metrics, "tessera_requests_total{status=\"length\",worker=\"" +
                                  std::to_string(worker) + "\"}");
}

// Polls /metrics (up to 10 s) until `series` reaches `at_least`; returns the last scrape.
inline std::string AwaitSeries(const std::string& address, const std::string& series,
                               double at_least) {
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = ScrapeMetrics(address);
    if (SeriesValue(m, series) >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return m;
}

}  // namespace tessera::e2e
