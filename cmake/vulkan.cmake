# The Vulkan compute backend (src/backends/vulkan). CORTIQ_VULKAN:
#   AUTO (default) builds it when the Vulkan headers/loader and glslc are found,
#   ON   makes their absence a configure error,
#   OFF  never builds it.
# Sets CORTIQ_WITH_VULKAN for src/CMakeLists.txt, which adds the backend's
# sources and calls cortiq_add_vulkan_shaders(libcortiq).
set(CORTIQ_VULKAN AUTO CACHE STRING "Build the Vulkan backend: AUTO, ON or OFF")
set_property(CACHE CORTIQ_VULKAN PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${CORTIQ_VULKAN}" cortiq_vulkan_mode)
if(NOT cortiq_vulkan_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "CORTIQ_VULKAN must be AUTO, ON or OFF (got '${CORTIQ_VULKAN}')")
endif()

set(CORTIQ_WITH_VULKAN OFF)
if(cortiq_vulkan_mode STREQUAL "OFF")
  message(STATUS "Cortiq: Vulkan backend off (CORTIQ_VULKAN=OFF)")
else()
  find_package(Vulkan QUIET)
  find_program(GLSLC glslc)
  set(cortiq_vulkan_missing "")
  if(NOT Vulkan_FOUND)
    list(APPEND cortiq_vulkan_missing "Vulkan headers/loader")
  endif()
  if(NOT GLSLC OR NOT EXISTS "${GLSLC}")
    list(APPEND cortiq_vulkan_missing "glslc")
  endif()
  if(cortiq_vulkan_missing)
    list(JOIN cortiq_vulkan_missing ", " missing_text)
    set(why "not found: ${missing_text}; install libvulkan-dev glslc")
    if(cortiq_vulkan_mode STREQUAL "ON")
      message(FATAL_ERROR "Cortiq: CORTIQ_VULKAN=ON, but the Vulkan backend cannot be built (${why})")
    endif()
    message(STATUS "Cortiq: Vulkan backend off (${why})")
  else()
    set(CORTIQ_WITH_VULKAN ON)
    message(STATUS "Cortiq: Vulkan backend on (Vulkan ${Vulkan_VERSION}, ${GLSLC})")
  endif()
endif()

# Compiles every src/backends/vulkan/shaders/*.comp to SPIR-V and embeds the
# modules in one generated source of TARGET (spirv_modules(), see
# backends/vulkan/spirv_modules.hpp), so nothing is read from disk at run
# time. *.glsl files there are shared code the .comp files #include.
function(cortiq_add_vulkan_shaders target)
  set(shader_dir ${CMAKE_SOURCE_DIR}/src/backends/vulkan/shaders)
  set(spv_dir ${CMAKE_BINARY_DIR}/shaders)
  file(GLOB shaders CONFIGURE_DEPENDS ${shader_dir}/*.comp)
  set(spv_files "")
  foreach(shader IN LISTS shaders)
    get_filename_component(name ${shader} NAME_WE)
    set(spv ${spv_dir}/${name}.spv)
    # -MD: a depfile, so editing an included .glsl recompiles its users.
    add_custom_command(OUTPUT ${spv}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${spv_dir}
      COMMAND ${GLSLC} --target-env=vulkan1.2 -O -Werror -MD -MF ${spv}.d -o ${spv} ${shader}
      DEPENDS ${shader}
      DEPFILE ${spv}.d
      COMMENT "Compiling shader ${name}.comp"
      VERBATIM)
    list(APPEND spv_files ${spv})
  endforeach()
  set(output ${CMAKE_BINARY_DIR}/generated/backends/vulkan/spirv_modules.cpp)
  # The list travels with '|' between its items: a ';' would split the argument.
  list(JOIN spv_files "|" spv_arg)
  add_custom_command(OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUTS=${spv_arg} -DOUTPUT=${output}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${spv_files} ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
    COMMENT "Embedding the Vulkan shaders"
    VERBATIM)
  target_sources(${target} PRIVATE ${output})
  target_compile_definitions(${target} PUBLIC CORTIQ_HAVE_VULKAN=1)
  target_link_libraries(${target} PUBLIC Vulkan::Vulkan)
endfunction()
