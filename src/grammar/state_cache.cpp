#include "grammar/state_cache.hpp"

namespace cortiq::grammar {

size_t StateCache::Hash::operator()(const MatchState& s) const {
  uint64_t h =
      1469598103934665603ull ^ (uint64_t{s.partial} << 16) ^ (uint64_t{s.pending} << 8) ^ s.length;
  const auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const auto& stack : s.stacks) {
    mix(stack.size());
    for (const uint32_t slot : stack) mix(slot);
  }
  return static_cast<size_t>(h);
}

uint32_t StateCache::intern(const MatchState& state) {
  if (const auto it = ids_.find(state); it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(states_.size());
  ids_.emplace(state, id);
  states_.push_back(state);
  can_end_.push_back(grammar_.can_end(state) ? 1 : 0);
  std::array<int32_t, 256> unknown;
  unknown.fill(kUnknown);
  moves_.push_back(unknown);
  return id;
}

int32_t StateCache::next(uint32_t from, uint8_t byte) {
  int32_t& move = moves_[from][byte];
  if (move != kUnknown) return move;
  MatchState after = states_[from];
  // intern() may grow the tables: the reference above is not used after it.
  const int32_t to = grammar_.advance(after, byte) ? static_cast<int32_t>(intern(after)) : kDead;
  moves_[from][byte] = to;
  return to;
}

void StateCache::clear() {
  ids_.clear();
  states_.clear();
  can_end_.clear();
  moves_.clear();
}

}  // namespace cortiq::grammar
