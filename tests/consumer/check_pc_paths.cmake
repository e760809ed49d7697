# cmake -DTEMPLATE=src/capi/cortiq.pc.in -DWORK=dir -P check_pc_paths.cmake
# The pkg-config file that cmake/pkg_config.cmake's paths make, read back by
# pkg-config: relative install dirs give a file that finds the tree it lies
# in (moved or not), absolute ones the absolute paths.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/pkg_config.cmake)
set(PROJECT_VERSION 0.1.0)

function(expect_flags libdir includedir prefix pc_dir want)
  cortiq_pc_paths("${libdir}" "${includedir}" "${prefix}")
  file(MAKE_DIRECTORY "${pc_dir}")
  configure_file("${TEMPLATE}" "${pc_dir}/cortiq.pc" @ONLY)
  execute_process(COMMAND pkg-config --libs --cflags "${pc_dir}/cortiq.pc"
                  OUTPUT_VARIABLE got OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  # pkg-config leaves pkgconfig/../.. in the paths: compare them normalized.
  separate_arguments(flags UNIX_COMMAND "${got}")
  set(got "")
  foreach(flag IN LISTS flags)
    if(flag MATCHES "^(-[IL])(.+)$")
      set(path "${CMAKE_MATCH_2}")
      cmake_path(NORMAL_PATH path)
      set(flag "${CMAKE_MATCH_1}${path}")
    endif()
    string(APPEND got " ${flag}")
  endforeach()
  string(STRIP "${got}" got)
  if(NOT rc EQUAL 0 OR NOT got STREQUAL "${want}")
    message(FATAL_ERROR "libdir ${libdir}, includedir ${includedir}: pkg-config gave "
                        "\"${got}\" (status ${rc}), want \"${want}\"")
  endif()
  message(STATUS "libdir ${libdir}, includedir ${includedir}: ${got}")
endfunction()

# Relative: the tree under WORK/moved, wherever it was installed.
expect_flags(lib include /usr/local "${WORK}/moved/lib/pkgconfig"
             "-I${WORK}/moved/include -L${WORK}/moved/lib -lcortiq")
expect_flags(lib/x86_64-linux-gnu include /usr "${WORK}/deb/lib/x86_64-linux-gnu/pkgconfig"
             "-I${WORK}/deb/include -L${WORK}/deb/lib/x86_64-linux-gnu -lcortiq")
# Absolute: the paths as given, the file wherever it lies.
expect_flags(/opt/cortiq/lib64 include /opt/cortiq "${WORK}/abs/lib64/pkgconfig"
             "-I/opt/cortiq/include -L/opt/cortiq/lib64 -lcortiq")
expect_flags(/opt/cortiq/lib64 /opt/headers /opt/cortiq "${WORK}/abs2/lib64/pkgconfig"
             "-I/opt/headers -L/opt/cortiq/lib64 -lcortiq")
