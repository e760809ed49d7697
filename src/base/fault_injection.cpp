#include "base/fault_injection.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::fault {
namespace detail {
std::atomic<bool> g_armed{false};
}  // namespace detail

namespace {

constexpr std::array<std::string_view, kSiteCount> kNames = {
    "prefill",      "decode",       "alloc",       "kv_block",
    "client_write", "device_alloc", "device_lost", "shader"};

// Per site: arrivals since arming, and the one that fails (0: disarmed).
std::array<std::atomic<int64_t>, kSiteCount> g_arrivals{};
std::array<std::atomic<int64_t>, kSiteCount> g_target{};

size_t index_of(Site site) {
  return static_cast<size_t>(site);
}

// The process arms itself before main() from CORTIQ_FAULT. A value it cannot
// read ends the process: a test that meant to inject a fault must not pass
// because none was injected.
const bool g_from_environment = [] {
  const char* spec = std::getenv("CORTIQ_FAULT");
  if (spec == nullptr || *spec == '\0') return false;
  try {
    arm_from_spec(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CORTIQ_FAULT: %s\n", e.what());
    std::exit(2);
  }
  return true;
}();

}  // namespace

std::string_view site_name(Site site) {
  return kNames[index_of(site)];
}

void arm(Site site, int64_t nth) {
  if (nth < 1) {
    throw Error(
        strfmt("fault injection: arrival %lld is not 1 or more", static_cast<long long>(nth)));
  }
  g_arrivals[index_of(site)].store(0);
  g_target[index_of(site)].store(nth);
  detail::g_armed.store(true);
}

void disarm() {
  detail::g_armed.store(false);
  for (auto& target : g_target) target.store(0);
  for (auto& arrivals : g_arrivals) arrivals.store(0);
}

void arm_from_spec(std::string_view spec) {
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    size_t site = 0;
    while (site < kNames.size() && kNames[site] != name) ++site;
    if (site == kNames.size() || colon == std::string_view::npos) {
      throw Error("'" + std::string(item) +
                  "' is not SITE:N with SITE one of prefill, decode, alloc, kv_block, "
                  "client_write");
    }
    const std::string count(item.substr(colon + 1));
    char* end = nullptr;
    const long long nth = std::strtoll(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || nth < 1) {
      throw Error("'" + std::string(item) + "': the arrival to fail must be a number, 1 or more");
    }
    arm(static_cast<Site>(site), nth);
  }
}

namespace detail {

bool arrive(Site site) {
  const int64_t target = g_target[index_of(site)].load();
  return target > 0 && ++g_arrivals[index_of(site)] == target;
}

void fail(Site site) {
  if (site == Site::alloc) throw std::bad_alloc();
  throw Error("injected fault: " + std::string(site_name(site)));
}

}  // namespace detail
}  // namespace cortiq::fault
