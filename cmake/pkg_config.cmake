# The paths the pkg-config file of the C library (src/capi/cortiq.pc.in)
# names. With relative install dirs its prefix is relative to the file
# itself (${pcfiledir}), so an installed tree can be moved. A dir given as
# an absolute path (CMAKE_INSTALL_LIBDIR=/usr/lib64) does not move with the
# tree, so then the file names absolute paths. With an absolute LIBDIR and
# a relative INCLUDEDIR the include dir is PREFIX/INCLUDEDIR for the PREFIX
# given at configure time (not one given later to cmake --install --prefix).
#   cortiq_pc_paths(LIBDIR INCLUDEDIR PREFIX)
# sets CORTIQ_PC_PREFIX, CORTIQ_PC_LIBDIR and CORTIQ_PC_INCLUDEDIR in the
# caller's scope.
function(cortiq_pc_paths libdir includedir prefix)
  if(IS_ABSOLUTE "${libdir}")
    set(pc_prefix "${prefix}")
    set(pc_libdir "${libdir}")
  else()
    file(RELATIVE_PATH to_prefix "/prefix/${libdir}/pkgconfig" /prefix)
    string(REGEX REPLACE "/$" "" to_prefix "${to_prefix}")
    set(pc_prefix "\${pcfiledir}/${to_prefix}")
    set(pc_libdir "\${prefix}/${libdir}")
  endif()
  if(IS_ABSOLUTE "${includedir}")
    set(pc_includedir "${includedir}")
  else()
    set(pc_includedir "\${prefix}/${includedir}")
  endif()
  set(CORTIQ_PC_PREFIX "${pc_prefix}" PARENT_SCOPE)
  set(CORTIQ_PC_LIBDIR "${pc_libdir}" PARENT_SCOPE)
  set(CORTIQ_PC_INCLUDEDIR "${pc_includedir}" PARENT_SCOPE)
endfunction()
