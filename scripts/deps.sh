#!/usr/bin/env bash
# Installs the Debian 12 packages diskpulse needs: "build" to build and run it, "package" to make
# its .deb as well, "test" to run every test. Uses sudo only when not root; runs apt-get only when
# something is missing.
set -euo pipefail

build_pkgs=(gcc make cmake pkg-config libsystemd-dev libmicrohttpd-dev libudev-dev zlib1g-dev
            libyaml-dev libgnutls28-dev libcrypt-dev scdoc)
package_pkgs=(dpkg-dev file)
test_pkgs=(libcmocka-dev python3 clang-format valgrind sysstat fio systemd util-linux e2fsprogs
           procps qemu-system-x86 linux-image-amd64 busybox-static smartmontools dmsetup sdparm
           kmod cpio udev ioping python3-prometheus-client python3-yaml
           prometheus prometheus-alertmanager openssl curl apache2-utils whois wrk
           prometheus-node-exporter lintian man-db debootstrap systemd-container "${package_pkgs[@]}")

want=("${build_pkgs[@]}")
[ "${1:-build}" = package ] && want+=("${package_pkgs[@]}")
[ "${1:-build}" = test ] && want+=("${test_pkgs[@]}")

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
echo "deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
