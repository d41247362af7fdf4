# The biolatency BPF program's build: biolatency.bpf.c compiled by clang -target bpf into an
# object, and the object turned by bpftool into a skeleton header (biolatency.skel.h, in the
# build directory) that biolatency_load.c includes and links against libbpf. Needs clang, bpftool
# and libbpf (pkg-config); the build machine's kernel is not used (the program carries its own
# kernel types: biolatency_kernel.h, CO-RE).
#
# DISKPULSE_BIOLATENCY: AUTO builds the program when all three are found, ON requires them, OFF
# does without. Without it the collector is still built and says at runtime that it cannot load
# (biolatency_load() returns -EOPNOTSUPP). Sets DISKPULSE_BPF (ON/OFF) and defines
# diskpulse_bpf_skeleton(TARGET), which gives TARGET the skeleton, DISKPULSE_HAVE_BPF=1 and libbpf.
set(DISKPULSE_BIOLATENCY AUTO CACHE STRING
  "biolatency's BPF program: AUTO (when clang, bpftool and libbpf are found), ON (required), OFF")
set_property(CACHE DISKPULSE_BIOLATENCY PROPERTY STRINGS AUTO ON OFF)
if(NOT DISKPULSE_BIOLATENCY MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DISKPULSE_BIOLATENCY is ${DISKPULSE_BIOLATENCY}: AUTO, ON or OFF")
endif()
set(DISKPULSE_BPF_DIR ${CMAKE_CURRENT_LIST_DIR})
# DISKPULSE_LIBBPF_STATIC: link libbpf.a and what its pkg-config file names for a static link
# (libelf, zlib) instead of libbpf.so, for a release whose libbpf is too old for the program and
# its loader (Debian 11's 0.3: tests/package/build_bullseye.py builds Debian 12's libbpf 1.1 for it and points
# PKG_CONFIG_PATH at it).
option(DISKPULSE_LIBBPF_STATIC "Link libbpf statically (libbpf.a found by pkg-config)" OFF)

set(DISKPULSE_BPF OFF)
set(_bpf_missing)
if(DISKPULSE_BIOLATENCY STREQUAL "OFF")
  set(_bpf_why "DISKPULSE_BIOLATENCY=OFF")
else()
  find_program(DISKPULSE_BPF_CLANG NAMES clang clang-14 clang-15 clang-16 clang-17 clang-18 clang-19
    DOC "clang for the BPF target")
  find_program(DISKPULSE_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin DOC "bpftool (skeletons)")
  pkg_check_modules(LIBBPF QUIET IMPORTED_TARGET libbpf)
  if(NOT DISKPULSE_BPF_CLANG)
    list(APPEND _bpf_missing clang)
  endif()
  if(NOT DISKPULSE_BPFTOOL)
    list(APPEND _bpf_missing bpftool)
  endif()
  if(NOT LIBBPF_FOUND)
    list(APPEND _bpf_missing "libbpf (pkg-config libbpf; Debian: libbpf-dev)")
  endif()
  # The __TARGET_ARCH_* of libbpf's bpf_tracing.h, by the machine the daemon is built for.
  set(_arch ${CMAKE_SYSTEM_PROCESSOR})
  if(_arch MATCHES "^(x86_64|amd64|AMD64|i.86)$")
    set(DISKPULSE_BPF_ARCH x86)
  elseif(_arch MATCHES "^(aarch64|arm64)$")
    set(DISKPULSE_BPF_ARCH arm64)
  elseif(_arch MATCHES "^arm")
    set(DISKPULSE_BPF_ARCH arm)
  elseif(_arch MATCHES "^(ppc|powerpc)")
    set(DISKPULSE_BPF_ARCH powerpc)
  elseif(_arch MATCHES "^s390")
    set(DISKPULSE_BPF_ARCH s390)
  elseif(_arch MATCHES "^riscv")
    set(DISKPULSE_BPF_ARCH riscv)
  elseif(_arch MATCHES "^loongarch")
    set(DISKPULSE_BPF_ARCH loongarch)
  elseif(_arch MATCHES "^mips")
    set(DISKPULSE_BPF_ARCH mips)
  else()
    list(APPEND _bpf_missing "a known __TARGET_ARCH for ${_arch}")
  endif()
endif()

if(_bpf_missing)
  list(JOIN _bpf_missing ", " _bpf_missing)
  if(DISKPULSE_BIOLATENCY STREQUAL "ON")
    message(FATAL_ERROR "DISKPULSE_BIOLATENCY=ON but missing: ${_bpf_missing}")
  endif()
  set(_bpf_why "missing: ${_bpf_missing}")
endif()
if(_bpf_why)
  message(STATUS "biolatency: without BPF (${_bpf_why}); the biolatency collector "
    "is built without its BPF program and reports that at runtime")
else()
  set(DISKPULSE_BPF ON)
  message(STATUS "biolatency: BPF program with ${DISKPULSE_BPF_CLANG}, ${DISKPULSE_BPFTOOL}, "
    "libbpf ${LIBBPF_VERSION}")
endif()

function(diskpulse_bpf_skeleton target)
  if(NOT DISKPULSE_BPF)
    return()
  endif()
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/bpf)
  set(obj ${gen}/biolatency.bpf.o)
  set(skel ${gen}/biolatency.skel.h)
  set(src ${DISKPULSE_BPF_DIR}/biolatency.bpf.c)
  set(incs -I${DISKPULSE_BPF_DIR})
  foreach(d IN LISTS LIBBPF_INCLUDE_DIRS)
    list(APPEND incs -I${d})
  endforeach()
  # -mcpu=v3: the 32-bit atomics and compare-and-swap (kernel 5.12+); -g: the BTF CO-RE needs; the
  # prefix maps: no path of this build in the object, which the skeleton embeds in the binary.
  add_custom_command(OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}
    COMMAND ${DISKPULSE_BPF_CLANG} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_${DISKPULSE_BPF_ARCH}
      -Wall -Werror ${DISKPULSE_PREFIX_MAPS} ${incs} -c ${src} -o ${obj}
    DEPENDS ${src} ${DISKPULSE_BPF_DIR}/biolatency_kernel.h ${DISKPULSE_BPF_DIR}/biolatency_shared.h
    COMMENT "Compiling the BPF program biolatency.bpf.c" VERBATIM)
  # No "name" argument (bpftool 5.10, Debian 11's, has none): the name comes from the object's,
  # biolatency.bpf.o, as biolatency_bpf.
  add_custom_command(OUTPUT ${skel}
    COMMAND ${DISKPULSE_BPFTOOL} gen skeleton ${obj} > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "Generating the BPF skeleton biolatency.skel.h" VERBATIM)
  target_sources(${target} PRIVATE ${skel})
  target_include_directories(${target} PRIVATE ${gen})
  target_compile_definitions(${target} PRIVATE DISKPULSE_HAVE_BPF=1)
  if(DISKPULSE_LIBBPF_STATIC)
    target_include_directories(${target} PRIVATE ${LIBBPF_STATIC_INCLUDE_DIRS})
    target_link_libraries(${target} PRIVATE ${LIBBPF_STATIC_LDFLAGS})
  else()
    target_link_libraries(${target} PRIVATE PkgConfig::LIBBPF)
  endif()
endfunction()
