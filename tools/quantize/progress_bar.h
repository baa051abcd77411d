// A one-line progress bar for `tessera quantize` on a terminal: percent of the input bytes, a
// bar, tensors done of total and the tensor in hand, redrawn in place (carriage return) at most
// every 100 ms and once at the end. Where the stream is not a terminal (a log, a pipe) it prints
// nothing, so logs keep only the summary.
// Not thread-safe: driven by the converting thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "tools/quantize/quantize_model.h"

namespace tessera::quantize {

// The bar's text for `p`, `width` characters of bar (no carriage return, no newline).
std::string FormatProgressLine(const QuantizeProgress& p, int width = 30);

class TerminalProgressBar {
 public:
  explicit TerminalProgressBar(std::FILE* out);
  void Update(const QuantizeProgress& p);

 private:
  std::FILE* out_;
  bool enabled_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tessera::quantize
