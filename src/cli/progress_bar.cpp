#include "cli/progress_bar.hpp"

#include <unistd.h>

#include <algorithm>

#include "base/strings.hpp"

namespace cortiq::cli {

namespace {

constexpr double kTtyInterval = 0.1;  // seconds between redraws on a terminal
constexpr double kLogInterval = 5.0;  // seconds between lines elsewhere
constexpr int kBarWidth = 28;

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return strfmt("%lldh%02lldm", s / 3600, (s / 60) % 60);
  return strfmt("%lld:%02lld", s / 60, s % 60);
}

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, int tty)
    : out_(out), tty_(tty < 0 ? ::isatty(::fileno(out)) != 0 : tty != 0) {
  // In a log the first line waits a full interval: quick jobs print none.
  last_draw_ = tty_ ? -1e9 : 0.0;
}

ProgressBar::~ProgressBar() {
  finish();
}

std::string ProgressBar::render(size_t items_done, size_t items_total, uint64_t bytes_done,
                                uint64_t bytes_total, double seconds) const {
  const double fraction =
      bytes_total == 0 ? 1.0 : std::min(1.0, static_cast<double>(bytes_done) / bytes_total);
  const double mb_per_s = seconds > 0 ? static_cast<double>(bytes_done) / 1e6 / seconds : 0.0;
  std::string text;
  if (tty_) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    text.reserve(kBarWidth + 64);
    text += '[';
    text.append(static_cast<size_t>(filled), '#');
    text.append(static_cast<size_t>(kBarWidth - filled), '.');
    text += "] ";
  }
  text += strfmt("%3.0f%% %zu/%zu tensors, %.1f MB/s", fraction * 100.0, items_done, items_total,
                 mb_per_s);
  if (fraction > 0 && fraction < 1) {
    text += ", " + clock_text(seconds * (1 - fraction) / fraction) + " left";
  }
  return text;
}

void ProgressBar::update(size_t items_done, size_t items_total, uint64_t bytes_done,
                         uint64_t bytes_total, double seconds) {
  const bool last = items_done == items_total;
  const double interval = tty_ ? kTtyInterval : kLogInterval;
  if (!last && seconds - last_draw_ < interval) return;
  if (!tty_ && last && !drawn_) return;  // a quick job needs no progress lines in a log
  last_draw_ = seconds;
  const std::string text = render(items_done, items_total, bytes_done, bytes_total, seconds);
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", text.c_str());  // back to column 0, clear the line
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (tty_ && drawn_) std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace cortiq::cli
