// Scratch that a pass keeps between calls, so that decoding allocates
// nothing once warm: a buffer only grows, to the largest batch seen.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/fault_injection.hpp"

namespace cortiq {

// Resizes v to at least n elements (never shrinks; no allocation when big
// enough) and gives its first n. Each call is an arrival at the fault site
// "alloc".
template <typename T>
std::span<T> grow_scratch(std::vector<T>& v, size_t n) {
  fault::hit(fault::Site::alloc);
  if (v.size() < n) v.resize(n);
  return {v.data(), n};
}

}  // namespace cortiq
