# cmake -DINPUTS="a.spv|b.spv" -DOUTPUT=FILE.cpp -P embed_spirv.cmake
# Writes a C++ source defining cortiq::vulkan::spirv_modules(): each SPIR-V
# module as 32-bit words, named by its file name without .spv, sorted by
# name. Modelled on embed_file.cmake: nothing is read from disk at run time.
string(REPLACE "|" ";" inputs "${INPUTS}")
list(SORT inputs)
# Eight words a line. CMake's regex has no {8}: the group is spelled out.
set(word "0x[0-9a-f]+u, ")
set(eight "")
foreach(i RANGE 1 8)
  string(APPEND eight "${word}")
endforeach()

set(arrays "")
set(table "")
foreach(input IN LISTS inputs)
  get_filename_component(name "${input}" NAME_WE)
  file(READ "${input}" hex HEX)
  string(LENGTH "${hex}" length)
  math(EXPR remainder "${length} % 8")
  if(length EQUAL 0 OR NOT remainder EQUAL 0)
    message(FATAL_ERROR "${input}: not a SPIR-V module (${length} hex digits)")
  endif()
  math(EXPR n_words "${length} / 8")
  # Bytes a b c d of each word, little-endian, become 0xdcbau.
  string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u, " words "${hex}")
  string(REGEX REPLACE "(${eight})" "\\1\n    " words "${words}")
  string(REPLACE " \n" "\n" words "${words}")
  string(STRIP "${words}" words)
  string(MAKE_C_IDENTIFIER "k_${name}" array)
  string(APPEND arrays "// ${name}.spv
constexpr uint32_t ${array}[${n_words}] = {
    ${words}};

")
  string(APPEND table "      {\"${name}\", std::span<const uint32_t>(${array})},\n")
endforeach()

if(table)
  set(body "  static constexpr SpirvModule kModules[] = {\n${table}  };\n  return kModules;")
else()
  set(body "  return {};")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from src/backends/vulkan/shaders by cmake/embed_spirv.cmake: do not edit.
#include <cstdint>
#include <span>

#include \"backends/vulkan/spirv_modules.hpp\"

namespace cortiq::vulkan {
namespace {

${arrays}}  // namespace

std::span<const SpirvModule> spirv_modules() {
${body}
}

}  // namespace cortiq::vulkan
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
