# Installing diskpulse as a service (`cmake --install`) and its Debian package (`cpack -G DEB`):
# the daemon in sbin, the systemd units, the sysusers.d user, the manual page, the config file,
# example drop-ins and the documentation. Included by the top-level CMakeLists.txt, which also
# installs the binary and the Prometheus/Grafana files.
include(GNUInstallDirs)

# systemd's directories, from its pkg-config file when the prefix is /usr (Debian 12: units in
# /lib/systemd/system), else below the prefix (systemd also reads /usr/local/lib/systemd/system).
set(_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
set(_sysusersdir "${CMAKE_INSTALL_PREFIX}/lib/sysusers.d")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  pkg_get_variable(_pc_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_pc_sysusersdir systemd sysusersdir)
  if(_pc_unitdir)
    set(_unitdir "${_pc_unitdir}")
  endif()
  if(_pc_sysusersdir)
    set(_sysusersdir "${_pc_sysusersdir}")
  endif()
endif()
set(DISKPULSE_SYSTEMD_UNITDIR "${_unitdir}" CACHE PATH "where the systemd units are installed")
set(DISKPULSE_SYSUSERSDIR "${_sysusersdir}" CACHE PATH "where the sysusers.d file is installed")
set(DISKPULSE_CONFDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/diskpulse")

# The units name the binary and the config file by their installed paths (/usr/sbin and
# /etc/diskpulse with the /usr prefix, as in the files under systemd/).
set(_unit_build "${CMAKE_BINARY_DIR}/systemd")
foreach(unit diskpulse.service diskpulse.socket)
  file(READ "${CMAKE_SOURCE_DIR}/systemd/${unit}" _text)
  string(REPLACE "/usr/sbin/diskpulse" "${CMAKE_INSTALL_FULL_SBINDIR}/diskpulse" _text "${_text}")
  string(REPLACE "/etc/diskpulse/" "${DISKPULSE_CONFDIR}/" _text "${_text}")
  # Written, then copied where it changed (configure_file): CMake 3.18's file(CONFIGURE), Debian
  # 11's, drops every newline of CONTENT (a unit systemd 247 then refuses: no ExecStart=).
  file(WRITE "${_unit_build}/${unit}.in" "${_text}")
  configure_file("${_unit_build}/${unit}.in" "${_unit_build}/${unit}" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/systemd/${unit}")
endforeach()
install(FILES "${_unit_build}/diskpulse.service" "${_unit_build}/diskpulse.socket"
  DESTINATION "${DISKPULSE_SYSTEMD_UNITDIR}")
install(FILES systemd/diskpulse.sysusers DESTINATION "${DISKPULSE_SYSUSERSDIR}" RENAME diskpulse.conf)
# Inactive: an administrator links it into /etc/tmpfiles.d once PostgreSQL is installed (the
# file says why and how).
install(FILES systemd/postgresql-canary.tmpfiles DESTINATION ${CMAKE_INSTALL_DATADIR}/diskpulse/tmpfiles.d
  RENAME postgresql-canary.conf)
install(FILES etc/diskpulse.conf DESTINATION "${DISKPULSE_CONFDIR}")
install(FILES systemd/examples/ip-allow.conf systemd/examples/canary-paths.conf
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES README.md packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Compressed as Debian wants them (gzip -9n: no name or time stamp, so the bytes are reproducible).
find_program(GZIP_PROGRAM gzip REQUIRED)
# The time of every file in the package and of the manual page (SOURCE_DATE_EPOCH, as
# reproducible-builds.org defines it): the environment's when set, else the commit's date, so that
# two builds of one commit make the same bytes.
set(DISKPULSE_SOURCE_DATE_EPOCH "$ENV{SOURCE_DATE_EPOCH}")
if(NOT DISKPULSE_SOURCE_DATE_EPOCH AND GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} log -1 --format=%ct
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE DISKPULSE_SOURCE_DATE_EPOCH
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()

set(DISKPULSE_DEB_MAINTAINER "diskpulse maintainers <maintainers@diskpulse.example>"
  CACHE STRING "Maintainer: field of the .deb")
# The package's changelog: packaging/debian/changelog, whose newest entry is the release; a build
# between releases (DISKPULSE_SNAPSHOT) adds an entry of its own version on top, dated with the
# commit (SOURCE_DATE_EPOCH), as Debian's snapshot tools do.
set(_changelog "${CMAKE_BINARY_DIR}/debian-changelog") # not "changelog": the target of that name
file(READ "${CMAKE_SOURCE_DIR}/packaging/debian/changelog" _released)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/packaging/debian/changelog")
if(DISKPULSE_SNAPSHOT)
  set(_env_sde "$ENV{SOURCE_DATE_EPOCH}")
  set(ENV{SOURCE_DATE_EPOCH} "${DISKPULSE_SOURCE_DATE_EPOCH}")
  string(TIMESTAMP _date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  set(ENV{SOURCE_DATE_EPOCH} "${_env_sde}")
  string(PREPEND _released "diskpulse (${DISKPULSE_VERSION}) unstable; urgency=medium\n\n"
    "  * Snapshot: ${DISKPULSE_SNAPSHOT} (revision ${DISKPULSE_REVISION}).\n\n"
    " -- ${DISKPULSE_DEB_MAINTAINER}  ${_date}\n\n")
endif()
file(WRITE "${_changelog}.new" "${_released}")
configure_file("${_changelog}.new" "${_changelog}" COPYONLY) # rewritten only when it changed
set(_changelog_gz "${CMAKE_BINARY_DIR}/changelog.gz")
add_custom_command(OUTPUT "${_changelog_gz}"
  COMMAND sh -c "'${GZIP_PROGRAM}' -9n < '${_changelog}' > '${_changelog_gz}'"
  DEPENDS "${_changelog}" VERBATIM)
add_custom_target(changelog ALL DEPENDS "${_changelog_gz}")
install(FILES "${_changelog_gz}" DESTINATION ${CMAKE_INSTALL_DOCDIR})

# diskpulse(8) from docs/diskpulse.8.scd. Hyphenation is turned off (after .TH, which turns it
# back on) so that metric and flag names are never broken across lines.
find_program(SCDOC_PROGRAM scdoc)
if(SCDOC_PROGRAM)
  set(_man "${CMAKE_BINARY_DIR}/diskpulse.8")
  # scdoc takes the page's date from SOURCE_DATE_EPOCH.
  set(_epoch "${DISKPULSE_SOURCE_DATE_EPOCH}")
  if(_epoch)
    set(_env env SOURCE_DATE_EPOCH=${_epoch})
  else()
    set(_env env)
  endif()
  add_custom_command(OUTPUT "${_man}" "${_man}.gz"
    COMMAND ${_env} sh -c "'${SCDOC_PROGRAM}' < '${CMAKE_SOURCE_DIR}/docs/diskpulse.8.scd' | sed '/^\\.TH /a .nh' > '${_man}'"
    COMMAND sh -c "'${GZIP_PROGRAM}' -9n < '${_man}' > '${_man}.gz'"
    DEPENDS docs/diskpulse.8.scd VERBATIM)
  add_custom_target(manpage ALL DEPENDS "${_man}" "${_man}.gz")
  install(FILES "${_man}.gz" DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
else()
  message(WARNING "scdoc not found (Debian package scdoc): no diskpulse(8) manual page")
endif()

# cpack -G DEB: diskpulse_<version>_<arch>.deb. Depends: the libraries as dpkg-shlibdeps finds
# them, plus what the maintainer scripts run (systemd-sysusers, as dh_installsysusers adds it).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME diskpulse)
set(CPACK_PACKAGE_VERSION "${DISKPULSE_VERSION}")
set(CPACK_PACKAGE_VENDOR "diskpulse")
set(CPACK_PACKAGE_CONTACT "${DISKPULSE_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "block device health and fdatasync latency as Prometheus metrics")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "diskpulse samples /proc/diskstats and derives the numbers iostat -x prints,
reads SMART and NVMe health through a small privileged helper process, and
runs a continuous fdatasync canary that measures what a database commit costs
on each filesystem. It serves everything as Prometheus metrics on port 9477.
.
The package runs it as a hardened systemd service (diskpulse.service, with
diskpulse.socket) under its own system user, and ships Prometheus rules, an
Alertmanager routing and a Grafana dashboard in /usr/share/diskpulse.")
# A package built for an older release carries a suffix that sorts below the plain version
# (tests/package/build_bullseye.py: "~deb11", so 0.1.0~deb11 < 0.1.0 and an upgrade to Debian 12's build of the
# same version replaces it).
set(DISKPULSE_DEB_VERSION_SUFFIX "" CACHE STRING "appended to the .deb's version (~deb11)")
set(CPACK_DEBIAN_PACKAGE_VERSION "${DISKPULSE_VERSION}${DISKPULSE_DEB_VERSION_SUFFIX}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/diskpulse/diskpulse")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libyaml and libcrypt are loaded with dlopen() when a web config file or its users are
# configured (lib/dynlib.h), so dpkg-shlibdeps does not see them: they are named here, and stay
# dependencies, since a web config is part of every install's choices.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "systemd | systemd-standalone-sysusers | systemd-sysusers, libyaml-0-2, libcrypt1")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${CMAKE_SOURCE_DIR}/packaging/debian/postinst" "${CMAKE_SOURCE_DIR}/packaging/debian/prerm"
  "${CMAKE_SOURCE_DIR}/packaging/debian/postrm" "${CMAKE_SOURCE_DIR}/packaging/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
# A .deb is made only from a /usr build: with another prefix the conffile, the units and the
# documentation would land where Debian's package tools and systemd do not look. cpack (and the
# package target) stop with this error before installing anything (packaging/check_prefix.cmake).
set(CPACK_DISKPULSE_BUILD_PREFIX "${CMAKE_INSTALL_PREFIX}") # CPACK_*: copied into CPackConfig.cmake
set(CPACK_PROJECT_CONFIG_FILE "${CMAKE_SOURCE_DIR}/packaging/check_prefix.cmake")
# The DEB generator (CMake 3.13 and later) stamps the package's files and archives with the
# environment's SOURCE_DATE_EPOCH (cpack_gen/deb.rst, "Reproducible packages"), else with the
# current time: check_prefix.cmake sets it to this one when cpack's environment has none.
set(CPACK_DISKPULSE_SOURCE_DATE_EPOCH "${DISKPULSE_SOURCE_DATE_EPOCH}")
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(WARNING "CMAKE_INSTALL_PREFIX is ${CMAKE_INSTALL_PREFIX}: `cmake --install` works, but "
    "cpack will refuse to make the .deb, which installs under /usr only (configure without "
    "CMAKE_INSTALL_PREFIX, or with -DCMAKE_INSTALL_PREFIX=/usr, or use the presets)")
endif()
include(CPack)
