# Installs headers, the library, the weft program, a CMake package
# (find_package(weft) -> weft::weft) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS weft EXPORT weftTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS weft_flags EXPORT weftTargets)

install(EXPORT weftTargets NAMESPACE weft:: FILE weftTargets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(cmake/weftConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)

# Relocatable: the prefix is found from the .pc file's own location, so
# `cmake --install --prefix DIR` yields a working pkg-config file. Its Cflags
# name no language standard: weft's headers need C++20, which users pass
# themselves (-std=c++20 or later); find_package users get it from
# target_compile_features(cxx_std_20), a minimum rather than a choice.
file(RELATIVE_PATH WEFT_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(cmake/weft.pc.in ${CMAKE_CURRENT_BINARY_DIR}/weft.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
