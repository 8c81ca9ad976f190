# cmake --install: headers under include/kiln (the umbrella at include/kiln/kiln.h), the library,
# the tools, and a CMake package so find_package(kiln) gives the target kiln::kiln.
include(CMakePackageConfigHelpers)

install(TARGETS kiln EXPORT kilnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The installed programs, each finding the installed libkiln.so next to it (no LD_LIBRARY_PATH).
# tests/install/run_install_test.cmake runs every one of them from the prefix.
set(KILN_INSTALLED_PROGRAMS kiln-cli kiln-debug)
foreach(program ${KILN_INSTALLED_PROGRAMS})
  if(TARGET ${program})
    set_target_properties(${program} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(FILES core/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
foreach(dir core backends)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(tools/cmake/kilnConfig.cmake.in ${CMAKE_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
