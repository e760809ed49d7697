// The table of architecture families (families.def) and the lookups over it.
#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/family.hpp"

namespace cortiq {

namespace {

// families.def, one line per architecture name.
constexpr const Family* kFamilies[] = {
#define CORTIQ_FAMILY(name) &name,
#include "model/families.def"
#undef CORTIQ_FAMILY
};

}  // namespace

std::span<const Family* const> families() {
  return kFamilies;
}

const Family* find_family(std::string_view arch) {
  for (const Family* family : kFamilies) {
    if (family->arch == arch) return family;
  }
  return nullptr;
}

std::string supported_architecture_list() {
  std::string list;
  for (const Family* family : kFamilies) {
    list += (list.empty() ? "" : ", ") + std::string(family->arch);
  }
  return list;
}

const Family& family_of(const gguf::GgufFile& file) {
  const std::string arch = file.architecture();
  if (arch.empty()) throw Error(file.path() + ": missing key general.architecture");
  if (const Family* family = find_family(arch)) return *family;
  throw Error(file.path() + ": unsupported architecture \"" + arch +
              "\" (supported: " + supported_architecture_list() + ")");
}

}  // namespace cortiq
