# NVMe SMART of the QEMU controller equals smartctl's field by field; an injected critical warning shows up.
# timeout: 100
NV=nvme0n1 CTRL=nvme0

# calc EXPR: EXPR evaluated in double precision, printed exactly (as the daemon prints).
calc() { awk "BEGIN { printf \"%.17g\", $1 }"; }
# same NAME DISKPULSE SMARTCTL: string equality.
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "diskpulse '$2', smartctl '$3'"; fi; }
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
last_read() { metric "diskpulse_smart_last_read_timestamp_seconds{device=\"$NV\"}"; }

# Real I/O first, so that data units and commands are not all zero, then let udev's re-probe after
# the writes finish: from here on nothing touches the namespace and the counters stand still.
dd if=/dev/urandom of=/dev/$NV bs=64k count=40 oflag=direct 2>/dev/null
dd if=/dev/$NV of=/dev/null bs=64k count=24 iflag=direct 2>/dev/null
udevadm settle -t 10 2>/dev/null
sleep 1
io0="$(diskstat $NV 1) $(diskstat $NV 5)"
smartctl --json=g -a /dev/$CTRL >/tmp/sc_before
daemon_start --smart.interval=1h --log.level=debug || exit 1
check "first SMART read of $NV" wait_for 15 smart_up $NV
smartctl --json=g -a /dev/$CTRL >/tmp/sc_after
io1="$(diskstat $NV 1) $(diskstat $NV 5)"
# Stray I/O (none expected) would only turn the exact comparisons below into windows.
[ "$io0" = "$io1" ] || note "I/O on $NV while the daemon and smartctl read (diskstats r/w $io0 -> $io1)"
check "smartctl -a succeeded" [ "$(sj /tmp/sc_after smartctl.exit_status)" = 0 ]
check "smartctl saw the writes (host_writes >= 40)" \
	num_cmp "$(sj /tmp/sc_after nvme_smart_health_information_log.host_writes)" '>=' 40

# Identity.
info="diskpulse_smart_info{device=\"$NV\"}"
check_metric "$info" == 1
same "smart_info protocol" "$(metric_label "$info" protocol)" nvme
same "smart_info model" "$(metric_label "$info" model)" "$(sj /tmp/sc_after model_name)"
same "smart_info serial" "$(metric_label "$info" serial)" "$(sj /tmp/sc_after serial_number)"
same "smart_info firmware" "$(metric_label "$info" firmware)" "$(sj /tmp/sc_after firmware_version)"
check "smart_info serial is the configured DPNVME0" [ "$(metric_label "$info" serial)" = DPNVME0 ]

# field KEY EXPR METRIC...: each METRIC{device=NV} equals EXPR applied to smartctl's KEY (in
# nvme_smart_health_information_log; "x" in EXPR stands for the value). Exact when smartctl saw
# the same value before and after the daemon's read (the case here, with no I/O), else within.
field() {
	_k=$1 _e=$2
	shift 2
	_a=$(sj /tmp/sc_before "nvme_smart_health_information_log.$_k")
	_b=$(sj /tmp/sc_after "nvme_smart_health_information_log.$_k")
	if [ -z "$_a" ] || [ -z "$_b" ]; then
		fail "smartctl $_k" "not in smartctl's output"
		return
	fi
	_lo=$(calc "$(echo "$_e" | sed "s/x/($_a)/g")") _hi=$(calc "$(echo "$_e" | sed "s/x/($_b)/g")")
	for _m in "$@"; do
		_v=$(metric "$_m{device=\"$NV\"}") || { fail "$_m" "no sample for $NV"; continue; }
		if [ "$_a" = "$_b" ]; then
			expect "$_m = smartctl $_k $_b as $_e" "$_v" == "$_lo"
		elif num_cmp "$_v" '>=' "$_lo" && num_cmp "$_v" '<=' "$_hi"; then
			ok "$_m = smartctl $_k ($_a..$_b) as $_e"
		else
			fail "$_m = smartctl $_k as $_e" "diskpulse $_v, smartctl $_a..$_b -> $_lo..$_hi"
		fi
	done
}
field critical_warning x diskpulse_nvme_critical_warning
field temperature x diskpulse_smart_temperature_celsius diskpulse_nvme_temperature_celsius
field available_spare 'x / 100' diskpulse_smart_available_spare_ratio diskpulse_nvme_available_spare_ratio
field available_spare_threshold 'x / 100' diskpulse_smart_available_spare_threshold_ratio \
	diskpulse_nvme_available_spare_threshold_ratio
field percentage_used 'x / 100' diskpulse_smart_wear_used_ratio diskpulse_nvme_percentage_used_ratio
field data_units_read 'x * 512000' diskpulse_smart_read_bytes_total diskpulse_nvme_data_read_bytes_total
field data_units_written 'x * 512000' diskpulse_smart_written_bytes_total diskpulse_nvme_data_written_bytes_total
field host_reads x diskpulse_nvme_host_read_commands_total
field host_writes x diskpulse_nvme_host_write_commands_total
field controller_busy_time 'x * 60' diskpulse_nvme_controller_busy_seconds_total
field power_cycles x diskpulse_smart_power_cycles_total diskpulse_nvme_power_cycles_total
field power_on_hours 'x * 3600' diskpulse_smart_power_on_seconds_total diskpulse_nvme_power_on_seconds_total
field unsafe_shutdowns x diskpulse_smart_unsafe_shutdowns_total diskpulse_nvme_unsafe_shutdowns_total
field media_errors x diskpulse_smart_media_errors_total diskpulse_nvme_media_errors_total
field num_err_log_entries x diskpulse_nvme_error_log_entries_total
field warning_temp_time 'x * 60' diskpulse_nvme_warning_temperature_seconds_total
field critical_comp_time 'x * 60' diskpulse_nvme_critical_temperature_seconds_total
# smartctl lists the temperature sensors the controller implements; the daemon one series each.
nsens=$(grep -c '^json\.nvme_smart_health_information_log\.temperature_sensors\[[0-9]*\] = ' /tmp/sc_after)
expect "temperature sensor series = smartctl's $nsens sensors" \
	"$(metric_count "diskpulse_nvme_temperature_sensor_celsius{device=\"$NV\"}")" == "$nsens"
check_metric "diskpulse_disk_rotation_rate_rpm{device=\"$NV\"}" == 0
same "smart_healthy = smartctl smart_status.passed" \
	"$(metric "diskpulse_smart_healthy{device=\"$NV\"}")" \
	"$(case $(sj /tmp/sc_after smart_status.passed) in true) echo 1 ;; false) echo 0 ;; *) echo '?' ;; esac)"
check_metric "diskpulse_smart_power_mode{device=\"$NV\"}" == 0
check_metric "diskpulse_smart_read_errors_total{device=\"$NV\"}" absent
for flag in spare temperature reliability read_only volatile_backup pmr_read_only; do
	check_metric "diskpulse_nvme_critical_warning_flag{device=\"$NV\",flag=\"$flag\"}" == 0
done

# Capabilities: the process that serves HTTP holds none, the helper exactly CAP_SYS_ADMIN and
# CAP_SYS_RAWIO (bits 21 and 17).
capfield() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }
for f in CapEff CapPrm CapBnd CapInh CapAmb; do
	same "daemon $f" "$(capfield $f $DAEMON_PID)" 0000000000000000
done
same "daemon NoNewPrivs" "$(capfield NoNewPrivs $DAEMON_PID)" 1
helper=
for p in /proc/[0-9]*; do
	[ "$(capfield PPid "${p#/proc/}" 2>/dev/null)" = "$DAEMON_PID" ] &&
		[ "$(cat "$p/comm" 2>/dev/null)" = diskpulse-priv ] && helper=${p#/proc/}
done
check "helper diskpulse-priv is a child of the daemon" [ -n "$helper" ]
if [ -n "$helper" ]; then
	for f in CapEff CapPrm CapBnd; do
		same "helper $f" "$(capfield $f $helper)" 0000000000220000
	done
	for f in CapInh CapAmb; do
		same "helper $f" "$(capfield $f $helper)" 0000000000000000
	done
	same "helper NoNewPrivs" "$(capfield NoNewPrivs $helper)" 1
fi

# The interval holds: a critical warning injected now is not seen while no read is due, however
# often /metrics is scraped (scrapes never read devices).
t_read=$(last_read)
check "qom-set smart_critical_warning 4" eval "qmp '{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$CTRL\",\"property\":\"smart_critical_warning\",\"value\":4}}' >/dev/null"
for i in 1 2 3 4 5; do scrape; sleep 0.4; done
check_metric "diskpulse_smart_healthy{device=\"$NV\"}" == 1
same "no new read within --smart.interval=1h" "$(last_read)" "$t_read"
daemon_stop
expect "exit status after SIGTERM" $? == 0

# A short interval: the warning appears on the next read, as smartctl reports it.
qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$CTRL\",\"property\":\"smart_critical_warning\",\"value\":0}}" >/dev/null
daemon_start --smart.interval=2s --log.level=debug || exit 1
check "SMART read with --smart.interval=2s" wait_for 15 smart_up $NV
check_metric "diskpulse_smart_healthy{device=\"$NV\"}" == 1
# inject VALUE FLAGS...: sets the critical warning; within 8 s healthy is 0 and the byte VALUE;
# exactly the listed flags are 1; smartctl agrees.
inject() {
	_val=$1
	shift
	qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$CTRL\",\"property\":\"smart_critical_warning\",\"value\":$_val}}" >/dev/null ||
		{ fail "qom-set smart_critical_warning $_val" "$VM_REPLY"; return; }
	_t0=$(now)
	check "critical warning $_val seen within 8 s" wait_for 8 eval \
		'scrape && [ "$(metric "diskpulse_nvme_critical_warning{device=\"$NV\"}")" = "$_val" ]'
	note "critical warning $_val seen after $(awk -v a="$_t0" -v b="$(now)" 'BEGIN { print b - a }') s"
	smartctl --json=g -a /dev/$CTRL >/tmp/sc_warn
	same "critical_warning $_val = smartctl" "$(metric "diskpulse_nvme_critical_warning{device=\"$NV\"}")" \
		"$(sj /tmp/sc_warn nvme_smart_health_information_log.critical_warning)"
	same "smartctl smart_status.passed with warning $_val" "$(sj /tmp/sc_warn smart_status.passed)" false
	check_metric "diskpulse_smart_healthy{device=\"$NV\"}" == 0
	check_metric "diskpulse_smart_up{device=\"$NV\"}" == 1
	_bit=0
	for _flag in spare temperature reliability read_only volatile_backup pmr_read_only; do
		_want=$((($(sj /tmp/sc_warn nvme_smart_health_information_log.critical_warning) >> _bit) & 1))
		case " $* " in *" $_flag "*) [ "$_want" = 1 ] || fail "flag $_flag" "smartctl bit $_bit is $_want" ;; esac
		check_metric "diskpulse_nvme_critical_warning_flag{device=\"$NV\",flag=\"$_flag\"}" == "$_want"
		_bit=$((_bit + 1))
	done
}
inject 4 reliability
inject 11 spare temperature read_only
# Cleared again: healthy returns.
qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"/machine/peripheral/$CTRL\",\"property\":\"smart_critical_warning\",\"value\":0}}" >/dev/null
check "healthy again within 8 s after clearing the warning" wait_for 8 eval \
	'scrape && [ "$(metric "diskpulse_smart_healthy{device=\"$NV\"}")" = 1 ]'
check_metric "diskpulse_nvme_critical_warning{device=\"$NV\"}" == 0
check_metric "diskpulse_smart_read_errors_total{device=\"$NV\"}" absent
check_exposition "with NVMe SMART"
daemon_stop
expect "exit status after SIGTERM" $? == 0
