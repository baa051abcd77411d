// BusyWindow: the GPU-busy ratio over a sliding window, decaying to 0 when idle.
#include "worker/busy_window.h"

#include <gtest/gtest.h>

namespace tessera::worker {
namespace {

using std::chrono::milliseconds;

TEST(BusyWindowTest, RatioIsDeviceTimeOverTheWindowAndDecaysWhenIdle) {
  BusyWindow window(milliseconds(1000));
  const BusyWindow::Clock::time_point t0{};
  EXPECT_DOUBLE_EQ(window.Ratio(t0), 0.0);
  window.Add(t0 + milliseconds(100), 0.2);
  window.Add(t0 + milliseconds(600), 0.3);
  EXPECT_DOUBLE_EQ(window.Ratio(t0 + milliseconds(700)), 0.5);
  // The first step leaves the window at 1100 ms, the second at 1600 ms.
  EXPECT_DOUBLE_EQ(window.Ratio(t0 + milliseconds(1200)), 0.3);
  EXPECT_DOUBLE_EQ(window.Ratio(t0 + milliseconds(1700)), 0.0);
}

TEST(BusyWindowTest, IsCappedAtOne) {
  BusyWindow window(milliseconds(1000));
  const BusyWindow::Clock::time_point t0{};
  window.Add(t0 + milliseconds(10), 0.8);
  window.Add(t0 + milliseconds(20), 0.9);
  EXPECT_DOUBLE_EQ(window.Ratio(t0 + milliseconds(30)), 1.0);
}

}  // namespace
}  // namespace tessera::worker
