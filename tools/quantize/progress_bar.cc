// TerminalProgressBar: FormatProgressLine redrawn over itself on a tty.
#include "tools/quantize/progress_bar.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace tessera::quantize {

std::string FormatProgressLine(const QuantizeProgress& p, int width) {
  const double fraction =
      p.bytes_total == 0 ? 1.0 : static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total);
  const int filled = std::clamp(static_cast<int>(fraction * width + 0.5), 0, width);
  return absl::StrFormat("%3d%% [%s%s] %d/%d %s", static_cast<int>(fraction * 100.0 + 1e-9),
                         std::string(filled, '#'), std::string(width - filled, ' '),
                         p.tensors_done, p.tensors_total, p.current);
}

TerminalProgressBar::TerminalProgressBar(std::FILE* out)
    : out_(out), enabled_(isatty(fileno(out)) != 0) {}

void TerminalProgressBar::Update(const QuantizeProgress& p) {
  if (!enabled_) return;
  const bool done = p.tensors_done == p.tensors_total;
  const auto now = std::chrono::steady_clock::now();
  if (!done && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  // \x1b[K clears what a longer previous tensor name left on the line.
  std::fprintf(out_, "\r%s\x1b[K%s", FormatProgressLine(p).c_str(), done ? "\n" : "");
  std::fflush(out_);
}

}  // namespace tessera::quantize
