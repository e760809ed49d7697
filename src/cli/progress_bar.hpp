// A progress display on stderr for long commands: on a terminal one line
// redrawn in place (at most 10 times a second); otherwise, as in a log or a
// pipe, a plain line every few seconds so the output stays readable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace cortiq::cli {

class ProgressBar {
 public:
  // `tty` < 0: ask isatty() about `out`.
  explicit ProgressBar(std::FILE* out = stderr, int tty = -1);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // items: tensors done / total; bytes: work done / total, for the rate and
  // the time left.
  void update(size_t items_done, size_t items_total, uint64_t bytes_done, uint64_t bytes_total,
              double seconds);
  // Ends the in-place line (if any) so that what follows starts clean.
  void finish();

 private:
  std::string render(size_t items_done, size_t items_total, uint64_t bytes_done,
                     uint64_t bytes_total, double seconds) const;

  std::FILE* out_;
  bool tty_;
  bool drawn_ = false;
  double last_draw_;
};

}  // namespace cortiq::cli
