// cortiq: the command-line front end. Dispatches to a subcommand and turns
// errors into messages and exit codes (1 = failure, 2 = usage).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/error.hpp"
#include "base/version.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#if CORTIQ_HAVE_VULKAN
#include "backends/vulkan/vulkan_device.hpp"
#endif

namespace {

using cortiq::cli::Command;

void print_help() {
  std::printf(
      "usage: cortiq [--version] [--help] COMMAND [ARGS]\n\n"
      "Cortiq runs large language models from GGUF files.\n\ncommands:\n");
  for (const Command& c : cortiq::cli::commands()) std::printf("  %-12s %s\n", c.name, c.summary);
  std::printf(
      "\n'cortiq COMMAND --help' describes a command.\n"
      "Environment: CORTIQ_LOG=debug|info|warn|error sets the log level;\n"
      "             CORTIQ_SIMD=scalar|avx2|avx512 caps the SIMD level.\n");
}

// One line per Vulkan device. A failure to list them is a line too: the
// version must print on any machine, with or without a Vulkan driver.
void print_vulkan_devices() {
#if CORTIQ_HAVE_VULKAN
  try {
    const std::vector<cortiq::vulkan::VulkanDeviceInfo> devices =
        cortiq::vulkan::list_vulkan_devices();
    if (devices.empty()) std::printf("vulkan: no devices\n");
    for (const cortiq::vulkan::VulkanDeviceInfo& device : devices) {
      std::printf("vulkan: %u: %s\n", device.index, cortiq::vulkan::describe(device).c_str());
    }
  } catch (const std::exception& e) {
    std::printf("vulkan: cannot list devices: %s\n", cortiq::describe(e).c_str());
  }
#else
  std::printf("vulkan: not built (configured with CORTIQ_VULKAN=OFF or without the Vulkan SDK)\n");
#endif
}

void print_version() {
  std::printf("cortiq %s (commit %s)\n", cortiq::kVersion, cortiq::kGitCommit);
  std::printf("cpu features: %s; kernels: %s\n", cortiq::cpu_features_string().c_str(),
              cortiq::simd_level_name(cortiq::simd_level()));
  print_vulkan_devices();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help();
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_help();
    return 0;
  }
  if (first == "--version" || first == "-V" || first == "version") {
    print_version();
    return 0;
  }
  for (const Command& c : cortiq::cli::commands()) {
    if (first != c.name) continue;
    const std::vector<std::string> args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const cortiq::cli::UsageError& e) {
      std::fprintf(stderr, "cortiq %s: %s\nsee 'cortiq %s --help'\n", c.name, e.what(), c.name);
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cortiq %s: error: %s\n", c.name, cortiq::describe(e).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "cortiq: unknown command '%s'; see 'cortiq --help'\n", first.c_str());
  return 2;
}
