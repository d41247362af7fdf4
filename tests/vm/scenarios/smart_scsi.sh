# SCSI SMART of a scsi_debug disk equals smartctl's; a failure prediction set with sdparm turns it unhealthy.
# timeout: 100

# same NAME DISKPULSE SMARTCTL: string equality.
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "diskpulse '$2', smartctl '$3'"; fi; }
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
scsi_debug_disk() {
	for _b in /sys/block/sd*; do
		[ "$(tr -d ' ' <"$_b/device/model" 2>/dev/null)" = scsi_debug ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}

modprobe scsi_debug ptype=0 dev_size_mb=16 || skip "no scsi_debug module"
check "scsi_debug disk appeared" wait_for 15 scsi_debug_disk
SD=$(scsi_debug_disk) || exit 1
note "scsi_debug disk is $SD (vendor '$(cat /sys/block/$SD/device/vendor)', sysfs $(cd /sys/block/$SD/device && echo vpd_pg*))"
udevadm settle -t 10 2>/dev/null
smartctl --json=g -a /dev/$SD >/tmp/sc_a
smartctl -x /dev/$SD >/tmp/sc_x
daemon_start --smart.interval=2s --log.level=debug || exit 1
if ! wait_for 15 smart_up $SD; then
	fail "first SMART read of $SD" "$(grep -e "^diskpulse_smart_[a-z_]*{device=\"$SD\"" $METRICS | tr '\n' ' ')"
	exit 1 # nothing below can pass
fi
ok "first SMART read of $SD"
scrape

info="diskpulse_smart_info{device=\"$SD\"}"
check_metric "$info" == 1
same "smart_info protocol" "$(metric_label "$info" protocol)" scsi
same "smart_info model = smartctl scsi_model_name" "$(metric_label "$info" model)" "$(sj /tmp/sc_a scsi_model_name)"
same "smart_info serial = smartctl serial_number" "$(metric_label "$info" serial)" "$(sj /tmp/sc_a serial_number)"
same "smart_info firmware = smartctl scsi_revision" "$(metric_label "$info" firmware)" "$(sj /tmp/sc_a scsi_revision)"
lu=$(sj /tmp/sc_a logical_unit_id)
same "smart_info wwn = smartctl logical_unit_id ($lu)" "$(metric_label "$info" wwn)" "${lu#0x}"
same "temperature = smartctl temperature.current (page 0Dh)" \
	"$(metric "diskpulse_smart_temperature_celsius{device=\"$SD\"}")" "$(sj /tmp/sc_a temperature.current)"
same "warning threshold = smartctl temperature.drive_trip (page 0Dh reference)" \
	"$(metric "diskpulse_smart_temperature_warning_threshold_celsius{device=\"$SD\"}")" \
	"$(sj /tmp/sc_a temperature.drive_trip)"
same "rotation rate = smartctl rotation_rate" \
	"$(metric "diskpulse_disk_rotation_rate_rpm{device=\"$SD\"}")" "$(sj /tmp/sc_a rotation_rate)"
same "smart_healthy = smartctl smart_status.passed" "$(metric "diskpulse_smart_healthy{device=\"$SD\"}")" \
	"$(case $(sj /tmp/sc_a smart_status.passed) in true) echo 1 ;; false) echo 0 ;; *) echo '?' ;; esac)"
check_metric "diskpulse_scsi_failure_predicted{device=\"$SD\"}" == 0
check_metric "diskpulse_smart_read_errors_total{device=\"$SD\"}" absent
# ATA-only series stay away from a SCSI disk.
check_metric "diskpulse_smart_power_mode{device=\"$SD\"}" absent
check_metric "diskpulse_smart_skipped_total{device=\"$SD\"}" absent
check_metric "diskpulse_ata_attribute_value{device=\"$SD\"}" absent

# Grown defects, error counters, start-stop cycles: present exactly when smartctl reports them.
if gd=$(sj /tmp/sc_a scsi_grown_defect_list); then
	same "grown defects = smartctl scsi_grown_defect_list" "$(metric "diskpulse_scsi_grown_defects{device=\"$SD\"}")" "$gd"
else
	check_metric "diskpulse_scsi_grown_defects{device=\"$SD\"}" absent
fi
for op in read write verify; do
	if u=$(sj /tmp/sc_a scsi_error_counter_log.$op.total_uncorrected_errors); then
		same "$op uncorrected errors = smartctl" "$(metric "diskpulse_scsi_uncorrected_errors_total{device=\"$SD\",operation=\"$op\"}")" "$u"
		same "$op corrected errors = smartctl" "$(metric "diskpulse_scsi_corrected_errors_total{device=\"$SD\",operation=\"$op\"}")" \
			"$(sj /tmp/sc_a scsi_error_counter_log.$op.total_errors_corrected)"
	else
		check_metric "diskpulse_scsi_uncorrected_errors_total{device=\"$SD\",operation=\"$op\"}" absent
		check_metric "diskpulse_scsi_corrected_errors_total{device=\"$SD\",operation=\"$op\"}" absent
	fi
done
if ! grep -q '^json\.scsi_error_counter_log\.' /tmp/sc_a; then
	check_metric "diskpulse_smart_media_errors_total{device=\"$SD\"}" absent
	check_metric "diskpulse_smart_read_bytes_total{device=\"$SD\"}" absent
fi
if c=$(sj /tmp/sc_a scsi_start_stop_cycle_counter.accumulated_start_stop_cycles); then
	same "power cycles = smartctl accumulated start-stop cycles" "$(metric "diskpulse_smart_power_cycles_total{device=\"$SD\"}")" "$c"
else
	check_metric "diskpulse_smart_power_cycles_total{device=\"$SD\"}" absent
fi

# Failure prediction: the informational exceptions TEST bit makes scsi_debug report ASC 5Dh.
check "sdparm --set=TEST=1 --page=ie" sdparm -q --set=TEST=1 --page=ie /dev/$SD
smartctl -H /dev/$SD >/tmp/sc_h
smartctl --json=g -H /dev/$SD >/tmp/sc_hj
note "smartctl -H: $(sed -n 's/^SMART Health Status: *//p' /tmp/sc_h)"
check "smartctl -H reports the failure (smart_status.passed false)" [ "$(sj /tmp/sc_hj smart_status.passed)" = false ]
predicted() { scrape && [ "$(metric "diskpulse_scsi_failure_predicted{device=\"$SD\"}")" = 1 ]; }
t0=$(now)
wait_for 8 predicted && note "failure prediction seen after $(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }') s"
check_metric "diskpulse_scsi_failure_predicted{device=\"$SD\"}" == 1
check_metric "diskpulse_smart_healthy{device=\"$SD\"}" == 0
check_metric "diskpulse_smart_up{device=\"$SD\"}" == 1
check_metric "diskpulse_smart_healthy{device=\"sda\"}" == 1
check_metric "diskpulse_smart_healthy{device=\"nvme0n1\"}" == 1
check "sdparm --set=TEST=0 --page=ie" sdparm -q --set=TEST=0 --page=ie /dev/$SD
check "smartctl -H passes again" eval "smartctl --json=g -H /dev/$SD | grep -q '^json.smart_status.passed = true;'"
check "healthy again within 8 s" wait_for 8 eval \
	'scrape && [ "$(metric "diskpulse_smart_healthy{device=\"$SD\"}")" = 1 ]'
check_metric "diskpulse_scsi_failure_predicted{device=\"$SD\"}" == 0
daemon_stop
expect "exit status after SIGTERM" $? == 0
