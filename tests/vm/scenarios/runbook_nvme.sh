# The runbook's NVMe sections run where their alerts fire. A failing drive (QEMU's critical warning bit 2, reliability, and a sector that cannot be read) raises DiskpulseSmartUnhealthy and DiskpulseNvmeCriticalWarning in a live Prometheus on the host with the shipped rules; a drive whose own over-temperature threshold is set below its temperature raises the warning's temperature bit. Each section's commands then run in the guest with the Debian tools and show what the runbook says (tests/runbook/guest.py holds what each must show). Sections whose condition QEMU's NVMe cannot produce (wear, spare, unsafe shutdowns, error log, throttling) run on the healthy drive while it is written to.
# timeout: 420
# runbook: DiskpulseSmartUnhealthy, DiskpulseNvmeCriticalWarning, DiskpulseMediaErrorsIncreasing, DiskpulseTemperatureHigh, DiskpulseTemperatureCritical, DiskpulseWearForecast, DiskpulseWearExhausted, DiskpulseSpareLow, DiskpulseUnsafeShutdown, DiskpulseNvmeErrorLogGrowing, DiskpulseNvmeThermalThrottling
# The failing drive: its reads of sector 65536 fail (blkdebug under a raw node; null-co, nothing stored).
# qemu: -blockdev '{"driver":"raw","node-name":"bad1","file":{"driver":"blkdebug","inject-error":[{"event":"read_aio","errno":5,"sector":65536}],"image":{"driver":"null-co","size":67108864,"read-zeroes":true}}}' -device nvme,id=nvme1,serial=DPBAD1,drive=bad1
# prometheus: 1
# The kernel numbers the controllers in the order their probes finish: find them by serial.
check "the failing drive" wait_for 20 nvme_by_serial DPBAD1
NV=$(nvme_by_serial DPNVME0) BAD=$(nvme_by_serial DPBAD1)
ctrl_of() { basename "$(readlink -f "/sys/block/$1/device")"; }
NVC=$(ctrl_of $NV) BADC=$(ctrl_of $BAD)
note "the healthy drive DPNVME0 is $NV on $NVC, the failing one DPBAD1 $BAD on $BADC"
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
# warning QDEV_ID VALUE: QEMU's critical warning byte of the controller (nvme0, nvme1 as in -device)
warning() {
	qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$1\",\"property\":\"smart_critical_warning\",\"value\":$2}}" >/dev/null
}

# The runbook's Conventions: `nvme list -v` pairs a namespace with its controller.
"$RUNBOOK_BIN/nvme" list -v >/tmp/nvme-list 2>&1
check "nvme list -v pairs $BAD with its controller $BADC" grep -q -E "^$BADC +DPBAD1 .* $BAD\$" /tmp/nvme-list

daemon_start --smart.interval=2s || exit 1
check "SMART of $NV and $BAD" wait_for 30 eval 'smart_up $NV && smart_up $BAD'
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'
check "Prometheus has both drives healthy" wait_for 30 eval \
	'prom_has "diskpulse_smart_healthy{device=\"$NV\"} == 1" && prom_has "diskpulse_smart_healthy{device=\"$BAD\"} == 1"'

# The healthy drive, written to all along by one process (pidstat names who writes): 512-byte
# direct writes take tens of seconds for the 64 MiB; started again if they end.
( while dd if=/dev/zero of=/dev/$NV bs=512 count=131072 oflag=direct 2>/dev/null; do :; done ) &
LOAD=$!
note "alerts pending or firing so far: $(alerts_seen)"
runbook DiskpulseWearForecast healthy DEV=$NV
runbook DiskpulseWearExhausted healthy DEV=$NV
runbook DiskpulseSpareLow healthy DEV=$NV
runbook DiskpulseUnsafeShutdown healthy DEV=$NV
runbook DiskpulseNvmeErrorLogGrowing healthy DEV=$NV
runbook DiskpulseNvmeThermalThrottling healthy DEV=$NV
kill $LOAD
wait $LOAD 2>/dev/null

# The failing drive: it says so, and a read fails.
check "critical warning 4 (reliability) on $BADC" warning nvme1 4
if dd if=/dev/$BAD of=/dev/null bs=512 skip=65536 count=1 iflag=direct 2>/dev/null; then
	fail "a read of sector 65536 of $BAD fails" "it succeeded"
else
	ok "a read of sector 65536 of $BAD fails"
fi
check "Prometheus: DiskpulseSmartUnhealthy fires for $BAD" wait_for 60 firing DiskpulseSmartUnhealthy "device=\"$BAD\""
check "Prometheus: DiskpulseNvmeCriticalWarning fires for $BAD, flag reliability" \
	wait_for 30 firing DiskpulseNvmeCriticalWarning "device=\"$BAD\",flag=\"reliability\""
runbook DiskpulseSmartUnhealthy nvme DEV=$BAD
runbook DiskpulseNvmeCriticalWarning reliability DEV=$BAD FLAG=reliability
runbook DiskpulseMediaErrorsIncreasing nvme DEV=$BAD
# Why that section names nvme device-self-test: Debian 12's smartctl (7.3) starts no self-test on
# an NVMe drive, exits 0 and says nothing of a test.
smartctl -t long /dev/$BAD >/tmp/sc_test 2>&1
sc_rc=$?
check "smartctl -t long on NVMe exits 0 ($sc_rc) without a word of a test" eval \
	'[ $sc_rc = 0 ] && ! grep -qi -e self-test -e testing /tmp/sc_test'

# The hot drive: its over-temperature threshold (feature 4, kelvin) below QEMU's fixed 323 K.
check "over-temperature threshold of $NVC set to 320 K" \
	"$RUNBOOK_BIN/nvme" set-feature /dev/$NVC --feature-id=4 --value=320
check "Prometheus: DiskpulseNvmeCriticalWarning fires for $NV, flag temperature" \
	wait_for 30 firing DiskpulseNvmeCriticalWarning "device=\"$NV\",flag=\"temperature\""
runbook DiskpulseNvmeCriticalWarning temperature DEV=$NV FLAG=temperature
runbook DiskpulseTemperatureHigh nvme DEV=$NV
runbook DiskpulseTemperatureCritical nvme DEV=$NV
note "alerts pending or firing: $(alerts_seen)"

check "over-temperature threshold of $NVC back to its WCTEMP, 343 K" \
	"$RUNBOOK_BIN/nvme" set-feature /dev/$NVC --feature-id=4 --value=343
check "critical warning of $BADC cleared" warning nvme1 0
check "daemon exits 0" daemon_stop
