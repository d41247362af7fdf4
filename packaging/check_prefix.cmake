# Read by cpack before it makes a package (CPACK_PROJECT_CONFIG_FILE, set in install.cmake).
# The package's time stamps: SOURCE_DATE_EPOCH, the commit's date unless cpack's environment gives
# one, so that the .deb is reproducible (install.cmake).
if(CPACK_DISKPULSE_SOURCE_DATE_EPOCH AND NOT DEFINED ENV{SOURCE_DATE_EPOCH})
  set(ENV{SOURCE_DATE_EPOCH} "${CPACK_DISKPULSE_SOURCE_DATE_EPOCH}")
endif()
# The prefix: a Debian package installs under /usr, so a build directory configured with another
# CMAKE_INSTALL_PREFIX makes none. Its install rules put the conffile, the units and the
# documentation below that prefix (/usr/local/etc/diskpulse, ...), where dpkg's conffiles list,
# systemd and the runbook links do not look.
if(NOT CPACK_DISKPULSE_BUILD_PREFIX STREQUAL "/usr" OR NOT CPACK_PACKAGING_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "diskpulse: this build directory installs under "
    "CMAKE_INSTALL_PREFIX=${CPACK_DISKPULSE_BUILD_PREFIX}, not /usr: no .deb is made from it. "
    "Configure the build directory again with -DCMAKE_INSTALL_PREFIX=/usr (the default, and "
    "the presets': cmake --preset default), or run scripts/package.sh.")
endif()
# A cross build (cmake/aarch64-linux-gnu.cmake sets the package's architecture): dpkg-shlibdeps
# computes Depends: for that architecture, from its libraries' shlibs and symbols files and with
# its objdump, as dpkg-buildpackage's environment would tell it.
if(CPACK_DEBIAN_PACKAGE_ARCHITECTURE AND NOT DEFINED ENV{DEB_HOST_ARCH})
  set(ENV{DEB_HOST_ARCH} "${CPACK_DEBIAN_PACKAGE_ARCHITECTURE}")
endif()
