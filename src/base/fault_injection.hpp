// Failures on purpose, where real ones happen: a forward pass, its working
// memory, a KV cache block, a write to an HTTP client, a GPU's memory, a
// GPU that stops answering, a shader that is not there. The tests use them to
// check what every failure must leave behind (docs/testing.md, "The failure
// model"): the error reaches the caller, nothing leaks, and the next request
// runs as on a fresh session.
//
// Off unless armed: by a test through arm(), or for a whole process by the
// environment, CORTIQ_FAULT=SITE:N[,SITE:N...], which fails the Nth arrival
// at SITE (counting from 1) and no other. Disarmed, a site costs one relaxed
// atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace cortiq::fault {

enum class Site : uint8_t {
  prefill,       // a forward pass with prompt rows, after its layers ran
  decode,        // a forward pass with generated rows, after its layers ran
  alloc,         // a request for forward-pass working memory (std::bad_alloc)
  kv_block,      // taking a KV cache block
  client_write,  // writing a response to an HTTP client (which then looks gone)
  device_alloc,  // a device buffer's memory (VK_ERROR_OUT_OF_DEVICE_MEMORY)
  device_lost,   // a device submit (VK_ERROR_DEVICE_LOST)
  shader,        // a device pipeline's shader module (as if it were not embedded)
};
inline constexpr int kSiteCount = 8;

std::string_view site_name(Site site);

// Fails the nth arrival at `site` from now on (n >= 1); replaces an earlier
// arming of the site.
void arm(Site site, int64_t nth);
// Disarms every site.
void disarm();
// Arms the sites a CORTIQ_FAULT value names; throws cortiq::Error naming
// what it cannot read. The process arms itself from the environment at start.
void arm_from_spec(std::string_view spec);

namespace detail {
extern std::atomic<bool> g_armed;
bool arrive(Site site);
[[noreturn]] void fail(Site site);
}  // namespace detail

// Counts an arrival at `site`; true exactly at the armed one.
inline bool due(Site site) {
  return detail::g_armed.load(std::memory_order_relaxed) && detail::arrive(site);
}

// Throws the site's failure when due: std::bad_alloc for alloc, else
// cortiq::Error("injected fault: ..."). The device sites are raised by the
// device code itself (due()), as the error the device would give.
inline void hit(Site site) {
  if (due(site)) detail::fail(site);
}

}  // namespace cortiq::fault
