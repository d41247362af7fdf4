#!/usr/bin/env bash
# Installs the Debian 12 packages diskpulse needs: "build" to build and run it, "package" to make
# its .deb as well, "test" to run every test, "arm64" to cross-build it and its .deb for arm64
# (the arm64 preset). Uses sudo only when not root; runs apt-get only when something is missing.
set -euo pipefail

# protobuf-c-compiler (protoc-c) and libprotobuf-c-dev build the protobuf exposition; the unit
# tests decode its pages with libprotobuf-c too. The .deb's Depends gets libprotobuf-c1 from
# dpkg-shlibdeps (packaging/install.cmake), like every library it links.
# clang, libbpf-dev and bpftool build the biolatency collector's BPF program (without them it is
# built without it: collectors/biolatency/bpf.cmake).
# python3 turns docs/runbook.md into the HTML page the daemon serves at /runbook
# (docs/runbook_html.py, run by the build). xfsprogs (xfs_db) and libbpf-tools (biolatency) are
# the runbook's own commands, which tests/runbook runs.
# build_libs are the libraries' -dev packages, the ones the arm64 mode installs for arm64 as well.
build_libs=(libsystemd-dev libmicrohttpd-dev libudev-dev zlib1g-dev libyaml-dev libgnutls28-dev libcrypt-dev
            libpcre2-dev libbpf-dev libprotobuf-c-dev)
build_pkgs=(gcc make cmake pkg-config python3 scdoc clang bpftool protobuf-c-compiler "${build_libs[@]}")
package_pkgs=(dpkg-dev file)
test_pkgs=(libcmocka-dev libprotobuf-c-dev python3 clang-format valgrind sysstat fio systemd util-linux e2fsprogs
           procps qemu-system-x86 linux-image-amd64 busybox-static smartmontools nvme-cli dmsetup sdparm
           kmod cpio udev ioping python3-prometheus-client python3-yaml
           prometheus prometheus-alertmanager openssl curl apache2-utils whois wrk
           prometheus-node-exporter lintian man-db debootstrap systemd-container xfsprogs libbpf-tools
           "${package_pkgs[@]}")

# arm64: Debian's cross toolchain (aarch64-linux-gnu-gcc) and the libraries' arm64 -dev packages
# beside the amd64 ones (multiarch), whose shlibs and symbols files dpkg-shlibdeps reads for the
# .deb's Depends:; the programs run at build time (clang, bpftool, protoc-c, scdoc) stay the build
# machine's. lintian checks the arm64 .deb as tests/package/check_arm64.py does.
arm64_pkgs=(crossbuild-essential-arm64 "${build_libs[@]/%/:arm64}" lintian "${package_pkgs[@]}")

want=("${build_pkgs[@]}")
[ "${1:-build}" = package ] && want+=("${package_pkgs[@]}")
[ "${1:-build}" = test ] && want+=("${test_pkgs[@]}")
[ "${1:-build}" = arm64 ] && want+=("${arm64_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
        sudo=(sudo)
fi
# Another apt (a boot-time apt-daily run, unattended-upgrades, a second install) may hold the dpkg
# or lists lock for a while: wait for it instead of failing. DPkg::Lock::Timeout covers the dpkg
# lock; `apt-get update` takes the lists lock, which it does not wait for, so that is retried.
apt_get() {
        local log rc
        log=$(mktemp)
        for _ in $(seq 60); do
                rc=0
                "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
                        apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1 | tee "$log" || rc=$?
                if [ $rc -ne 0 ] && grep -q "Could not get lock" "$log"; then
                        echo "deps: apt is busy elsewhere; trying again in 10 s" >&2
                        sleep 10
                        continue
                fi
                rm -f "$log"
                return $rc
        done
        rm -f "$log"
        echo "deps: apt stayed locked for 10 minutes" >&2
        return 1
}
# The arm64 packages come from the same archive once dpkg knows the architecture.
if [ "${1:-build}" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        echo "deps: adding the arm64 architecture to dpkg (multiarch)"
        "${sudo[@]}" dpkg --add-architecture arm64
fi
echo "deps: installing ${missing[*]}"
apt_get update -q
apt_get install -y -q --no-install-recommends "${missing[@]}"
