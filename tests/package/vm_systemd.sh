# diskpulse.service from the .deb under the guest's own systemd (a Debian 12 root on vda, real cgroup2 device filters): SMART of the emulated NVMe and SATA disks, and which capability each needs.
# timeout: 420
# runbook: DiskpulseSmartReadsFailing, DiskpulseSmartDataStale, DiskpulseUnsafeShutdown
# Run by tests/package/check_vm.py (vmtest.py run --root-image); the root has the package
# installed and diskpulse.service enabled by its postinst. lib.sh's helpers scrape
# 127.0.0.1:9477, where diskpulse.socket listens.

same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$2', expected '$3'"; fi; }
capfield() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }
main_pid() { systemctl show -p MainPID --value diskpulse.service; }
helper_pid() {
	for _p in /proc/[0-9]*; do
		[ "$(cat "$_p/comm" 2>/dev/null)" = diskpulse-priv ] && echo "${_p#/proc/}" && return 0
	done
	return 1
}
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
# attempted DEV...: each device has a SMART read behind it, successful or counted as an error.
attempted() {
	scrape || return 1
	for _d in "$@"; do
		[ "$(metric "diskpulse_smart_up{device=\"$_d\"}")" = 1 ] ||
			[ "$(metric_count "diskpulse_smart_read_errors_total{device=\"$_d\"}")" != 0 ] || return 1
	done
}

state=$(systemctl is-system-running --wait)
note "system state: $state; failed units: $(systemctl --failed --no-legend | tr '\n' ' ')"
check "diskpulse.service active after boot" systemctl is-active --quiet diskpulse.service
check "diskpulse.socket active after boot" systemctl is-active --quiet diskpulse.socket
check "/metrics answers on the socket" wait_for 30 scrape
check "udev's database is there" [ -e /run/udev/data/b259:0 ]

# SMART under the shipped unit (the values QEMU's devices report; tests/vm/scenarios/smart_*.sh
# compare every field with smartctl).
check "SMART of nvme0n1 read within 30 s" wait_for 30 smart_up nvme0n1
check "SMART of sda read within 30 s" wait_for 30 smart_up sda
scrape
for dev in nvme0n1 sda; do
	check_metric "diskpulse_smart_read_errors_total{device=\"$dev\"}" absent
	check_metric "diskpulse_smart_healthy{device=\"$dev\"}" == 1
done
check_metric 'diskpulse_smart_info{device="nvme0n1",protocol="nvme",serial="DPNVME0"}' == 1
check_metric 'diskpulse_smart_info{device="sda",protocol="ata",serial="DPSATA0"}' == 1
# QEMU's NVMe reports a fixed 323 K, its IDE SMART attribute 190 the value 69.
check_metric 'diskpulse_nvme_temperature_celsius{device="nvme0n1"}' == 50
check_metric 'diskpulse_nvme_critical_warning{device="nvme0n1"}' == 0
check_metric 'diskpulse_nvme_power_on_seconds_total{device="nvme0n1"}' present
check_metric 'diskpulse_ata_attribute_raw{device="sda",id="9",name="Power_On_Hours"}' present
check_metric 'diskpulse_disk_rotation_rate_rpm{device="sda"}' == 7200
check_metric 'diskpulse_disk_info{device="nvme0n1",serial="DPNVME0"}' == 1
check_metric 'diskpulse_smart_temperature_celsius{device="nvme0n1"}' == 50
check_metric 'diskpulse_ata_attribute_value{device="sda",id="190"}' == 69
check_metric 'diskpulse_sync_target_up{path="/var/lib/diskpulse"}' == 1

# Privileges as the kernel shows them, under the unit.
pid=$(main_pid)
for f in CapEff CapPrm CapInh CapAmb; do
	same "serving process $f" "$(capfield $f "$pid")" 0000000000000000
done
same "serving process NoNewPrivs" "$(capfield NoNewPrivs "$pid")" 1
same "serving process Seccomp" "$(capfield Seccomp "$pid")" 2
same "serving process runs as diskpulse" "$(awk '$1 == "Uid:" { print $2 }' /proc/"$pid"/status)" "$(id -u diskpulse)"
h=$(helper_pid)
same "helper CapEff: CAP_SYS_ADMIN CAP_SYS_RAWIO CAP_DAC_READ_SEARCH" "$(capfield CapEff "$h")" 0000000000220004
same "helper CapAmb" "$(capfield CapAmb "$h")" 0000000000000000
note "device nodes: $(ls -l /dev/nvme0n1 /dev/sda | awk '{ print $1, $3, $4, $NF }' | tr '\n' ';')"

# Which capability each device needs: the unit with one taken away, through a drop-in (an empty
# assignment first, as both settings add up otherwise).
variant() { # NAME CAPS [EXTRA_LINE]
	mkdir -p /etc/systemd/system/diskpulse.service.d
	printf '[Service]\nCapabilityBoundingSet=\nCapabilityBoundingSet=%s\nAmbientCapabilities=\nAmbientCapabilities=%s\n%s\n' \
		"$2" "$2" "${3:-}" >/etc/systemd/system/diskpulse.service.d/variant.conf
	systemctl daemon-reload
	systemctl restart diskpulse.service
	wait_for 30 attempted nvme0n1 sda || fail "$1: a SMART read of both disks" "none within 30 s"
	note "$1: $(grep -e '^diskpulse_smart_up{' -e '^diskpulse_smart_read_errors_total{' "$METRICS" | tr '\n' ' ')"
}
# expect_read VARIANT DEV up|permission
expect_read() {
	if [ "$3" = up ]; then
		same "$1: $2 read" "$(metric "diskpulse_smart_up{device=\"$2\"}")" 1
	else
		same "$1: $2 not read" "$(metric "diskpulse_smart_up{device=\"$2\"}")" 0
		check "$1: $2 fails with reason=\"permission\"" \
			num_cmp "$(metric "diskpulse_smart_read_errors_total{device=\"$2\",reason=\"permission\"}")" '>=' 1
	fi
}
variant "without CAP_SYS_ADMIN" "CAP_SYS_RAWIO CAP_DAC_READ_SEARCH"
expect_read "without CAP_SYS_ADMIN" nvme0n1 permission
expect_read "without CAP_SYS_ADMIN" sda up
# The runbook's systemd commands where the unit lost a capability (tests/runbook/guest.py; the
# other commands of these sections run in tests/vm/scenarios/runbook_smart.sh).
runbook DiskpulseSmartReadsFailing systemd DEV=nvme0n1
runbook DiskpulseSmartDataStale systemd DEV=nvme0n1
runbook DiskpulseUnsafeShutdown systemd DEV=nvme0n1
variant "without CAP_SYS_RAWIO" "CAP_SYS_ADMIN CAP_DAC_READ_SEARCH"
expect_read "without CAP_SYS_RAWIO" nvme0n1 up
expect_read "without CAP_SYS_RAWIO" sda permission
variant "without CAP_DAC_READ_SEARCH" "CAP_SYS_ADMIN CAP_SYS_RAWIO"
expect_read "without CAP_DAC_READ_SEARCH" nvme0n1 permission
expect_read "without CAP_DAC_READ_SEARCH" sda permission
variant "disk group instead of CAP_DAC_READ_SEARCH" "CAP_SYS_ADMIN CAP_SYS_RAWIO" "SupplementaryGroups=disk"
expect_read "disk group instead of CAP_DAC_READ_SEARCH" nvme0n1 up
expect_read "disk group instead of CAP_DAC_READ_SEARCH" sda up
# ... and what the disk group would give the serving process itself: the raw disks.
pid=$(main_pid)
same "with the disk group the serving process is in it" \
	"$(awk '$1 == "Groups:" { for (i = 2; i <= NF; i++) if ($i == 6) print "disk" }' /proc/"$pid"/status)" disk
rm -r /etc/systemd/system/diskpulse.service.d
systemctl daemon-reload
systemctl restart diskpulse.service
check "the shipped unit again: both disks read" wait_for 30 eval 'smart_up nvme0n1 && smart_up sda'

# A clean stop.
systemctl stop diskpulse.socket diskpulse.service
same "stop: result" "$(systemctl show -p Result --value diskpulse.service)" success
same "stop: exit status" "$(systemctl show -p ExecMainStatus --value diskpulse.service)" 0
check "stop: no diskpulse process left" eval '! helper_pid'
note "journal: $(journalctl -u diskpulse.service -p warning --no-pager -o cat | tail -n 5 | tr '\n' ' ')"
