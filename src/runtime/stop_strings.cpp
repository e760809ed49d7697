// Stop strings over streamed text, byte-wise. The held tail is the longest
// suffix of the pending text that is a proper prefix of some stop string; a
// stop string is valid UTF-8 and so starts on a character boundary, which
// keeps every cut on one. A cut is also moved back before an incomplete
// trailing character, so a piece that ends inside a character (a byte token)
// is held until the character is complete.
#include "runtime/stop_strings.hpp"

#include <algorithm>
#include <utility>

namespace cortiq {
namespace {

bool is_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Expected length of the UTF-8 sequence a lead byte starts (1 for ASCII and
// for bytes that cannot start a sequence: those are passed through).
size_t sequence_length(char c) {
  const auto b = static_cast<unsigned char>(c);
  if (b >= 0xF0 && b <= 0xF7) return 4;
  if (b >= 0xE0) return b <= 0xEF ? 3 : 1;
  if (b >= 0xC0) return 2;
  return 1;
}

// The largest cut <= `cut` that does not split a UTF-8 character of `text`.
size_t char_boundary_before(const std::string& text, size_t cut) {
  // Back to the start of the character the cut falls in.
  size_t start = cut;
  while (start > 0 && start < text.size() && is_continuation(text[start])) --start;
  if (start < cut) return start;
  // The cut is on a lead byte (or at the end): is the character before it
  // complete? Find its lead byte, at most 3 bytes back.
  size_t lead = cut;
  while (lead > 0 && cut - lead < 4) {
    --lead;
    if (!is_continuation(text[lead])) break;
  }
  if (lead < cut && !is_continuation(text[lead]) && lead + sequence_length(text[lead]) > cut)
    return lead;
  return cut;
}

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  pending_.append(piece);

  // The earliest complete stop string ends the text.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    result.emit = pending_.substr(0, first);
    result.stopped = stopped_ = true;
    pending_.clear();
    return result;
  }

  // Hold the longest suffix that could still grow into a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t longest = std::min(pending_.size(), s.size() - 1);
    for (size_t len = longest; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t cut = char_boundary_before(pending_, pending_.size() - hold);
  result.emit = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return result;
}

std::string StopStringMatcher::flush() {
  return std::exchange(pending_, std::string());
}

void StopStringMatcher::reset() {
  pending_.clear();
  stopped_ = false;
}

}  // namespace cortiq
