# Cross-building diskpulse for arm64 (aarch64) on a Debian amd64 machine, with Debian's cross
# toolchain (crossbuild-essential-arm64) and the arm64 (multiarch) -dev packages
# (scripts/deps.sh arm64). Used by the arm64 preset (CMakePresets.json):
#   cmake --preset arm64 && cmake --build --preset arm64 && (cd build-arm64 && cpack -G DEB)
# Programs run at build time (protoc-c, clang for the BPF object, bpftool, scdoc, python3, gzip)
# are the build machine's; headers, libraries and their pkg-config files are arm64's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(DISKPULSE_TRIPLET aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${DISKPULSE_TRIPLET}-gcc)
set(CMAKE_AR ${DISKPULSE_TRIPLET}-ar CACHE FILEPATH "ar for arm64")
set(CMAKE_RANLIB ${DISKPULSE_TRIPLET}-ranlib CACHE FILEPATH "ranlib for arm64")
# cpack's CPACK_STRIP_FILES and dpkg-shlibdeps' objdump: the binary is arm64's.
set(CMAKE_STRIP ${DISKPULSE_TRIPLET}-strip CACHE FILEPATH "strip for arm64")
set(CMAKE_OBJDUMP ${DISKPULSE_TRIPLET}-objdump CACHE FILEPATH "objdump for arm64")

# pkg-config reads arm64's .pc files only (the multiarch directory, and the arch-independent
# ones such as systemd.pc's unit directories), never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${DISKPULSE_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(PKG_CONFIG_EXECUTABLE pkg-config CACHE FILEPATH "pkg-config (with PKG_CONFIG_LIBDIR of arm64)")

# find_program: the build machine's; find_library, find_path, find_package: arm64's. Debian's
# multiarch layout keeps both under /usr: CMAKE_LIBRARY_ARCHITECTURE picks the aarch64 lib dir.
set(CMAKE_LIBRARY_ARCHITECTURE ${DISKPULSE_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH /usr/${DISKPULSE_TRIPLET} /)

# The .deb's Architecture: (cpack otherwise asks dpkg, which answers the build machine's), and
# dpkg-shlibdeps (cpack's CPACK_DEBIAN_PACKAGE_SHLIBDEPS) reads the arm64 libraries' shlibs and
# symbols files of the multiarch packages.
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
