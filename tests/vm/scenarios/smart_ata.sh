# ATA SMART of QEMU's AHCI disks equals smartctl's: identity, every attribute, health, power mode, write cache.
# timeout: 100
# disk: ssd 64M
# qemu: -device "ide-hd,id=sata1,bus=ahci.1,drive=ssd,serial=DPSSD1,model=DP SSD ONE,rotation_rate=1,wwn=0x5000c500a1b2c3d4"

# same NAME DISKPULSE SMARTCTL: string equality.
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "diskpulse '$2', smartctl '$3'"; fi; }
smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
# ata_by_serial SERIAL: the sdX whose ATA serial number smartctl reads as SERIAL.
ata_by_serial() {
	for _b in /sys/block/sd*; do
		_d=${_b#/sys/block/}
		smartctl --json=g -i "/dev/$_d" >/tmp/sc_id 2>/dev/null
		[ "$(sj /tmp/sc_id serial_number)" = "$1" ] && echo "$_d" && return 0
	done
	return 1
}

wait_for 20 ata_by_serial DPSSD1 >/dev/null
HDD=$(ata_by_serial DPSATA0) SSD=$(ata_by_serial DPSSD1)
check "AHCI disk DPSATA0 found ($HDD)" [ -n "$HDD" ]
check "AHCI disk DPSSD1 found ($SSD)" [ -n "$SSD" ]
[ -n "$HDD" ] && [ -n "$SSD" ] || exit 1
for d in $HDD $SSD; do smartctl --json=g -a /dev/$d >/tmp/sc_$d; done
daemon_start --smart.interval=2s --log.level=debug || exit 1
check "first SMART read of $HDD" wait_for 15 smart_up $HDD
check "first SMART read of $SSD" wait_for 15 smart_up $SSD
scrape

# compare DEV: everything smartctl -a said about DEV (in /tmp/sc_DEV) against the last scrape.
compare() {
	_d=$1 _j=/tmp/sc_$1
	same "$_d smartctl -a exit status" "$(sj $_j smartctl.exit_status)" 0
	_info="diskpulse_smart_info{device=\"$_d\"}"
	check_metric "$_info" == 1
	same "$_d smart_info protocol" "$(metric_label "$_info" protocol)" ata
	same "$_d smart_info model" "$(metric_label "$_info" model)" "$(sj $_j model_name)"
	same "$_d smart_info serial" "$(metric_label "$_info" serial)" "$(sj $_j serial_number)"
	same "$_d smart_info firmware" "$(metric_label "$_info" firmware)" "$(sj $_j firmware_version)"
	# smartctl splits the NAA 5 WWN into naa (4 bits), oui (24) and id (36); the label is 16 hex digits.
	_wwn=
	if _naa=$(sj $_j wwn.naa); then
		_wwn=$(printf '%x%06x%09x' "$_naa" "$(sj $_j wwn.oui)" "$(sj $_j wwn.id)")
	fi
	same "$_d smart_info wwn" "$(metric_label "$_info" wwn)" "$_wwn"

	# Every attribute of smartctl's table, and no other.
	_n=$(grep -c '^json\.ata_smart_attributes\.table\[[0-9]*\]\.id = ' $_j)
	check "$_d smartctl lists attributes ($_n)" [ "$_n" -gt 0 ]
	for _fam in value worst threshold raw failing; do
		expect "$_d diskpulse_ata_attribute_$_fam series = smartctl's $_n attributes" \
			"$(metric_count "diskpulse_ata_attribute_$_fam{device=\"$_d\"}")" == "$_n"
	done
	_i=0
	while [ $_i -lt "$_n" ]; do
		_t="ata_smart_attributes.table[$_i]"
		_id=$(sj $_j $_t.id)
		_sel="device=\"$_d\",id=\"$_id\""
		same "$_d attribute $_id name" "$(metric_label "diskpulse_ata_attribute_value{$_sel}" name)" "$(sj $_j $_t.name)"
		same "$_d attribute $_id value" "$(metric "diskpulse_ata_attribute_value{$_sel}")" "$(sj $_j $_t.value)"
		same "$_d attribute $_id worst" "$(metric "diskpulse_ata_attribute_worst{$_sel}")" "$(sj $_j $_t.worst)"
		same "$_d attribute $_id threshold" "$(metric "diskpulse_ata_attribute_threshold{$_sel}")" "$(sj $_j $_t.thresh)"
		same "$_d attribute $_id raw" "$(metric "diskpulse_ata_attribute_raw{$_sel}")" "$(sj $_j $_t.raw.value)"
		case $(sj $_j $_t.when_failed) in now) _f=1 ;; *) _f=0 ;; esac
		same "$_d attribute $_id failing (smartctl when_failed '$(sj $_j $_t.when_failed)')" \
			"$(metric "diskpulse_ata_attribute_failing{$_sel}")" $_f
		_i=$((_i + 1))
	done

	case $(sj $_j smart_status.passed) in true) _h=1 ;; false) _h=0 ;; *) _h='?' ;; esac
	same "$_d smart_healthy = smartctl smart_status.passed" "$(metric "diskpulse_smart_healthy{device=\"$_d\"}")" "$_h"
	same "$_d temperature = smartctl temperature.current" \
		"$(metric "diskpulse_smart_temperature_celsius{device=\"$_d\"}")" "$(sj $_j temperature.current)"
	expect "$_d power_on_seconds = smartctl power_on_time.hours x 3600" \
		"$(metric "diskpulse_smart_power_on_seconds_total{device=\"$_d\"}")" == $(($(sj $_j power_on_time.hours) * 3600))
	same "$_d power_cycles = smartctl power_cycle_count" \
		"$(metric "diskpulse_smart_power_cycles_total{device=\"$_d\"}")" "$(sj $_j power_cycle_count)"
	same "$_d rotation_rate = smartctl rotation_rate" \
		"$(metric "diskpulse_disk_rotation_rate_rpm{device=\"$_d\"}")" "$(sj $_j rotation_rate)"
	# Values the drive has no attribute for are left out, not made up as 0.
	for _pair in "187 198:media_errors_total" "174 192:unsafe_shutdowns_total" "241:written_bytes_total" \
		"242:read_bytes_total"; do
		_ids=${_pair%%:*} _m=diskpulse_smart_${_pair#*:}
		_has=0
		for _x in $_ids; do grep -q "^json\.ata_smart_attributes\.table\[[0-9]*\]\.id = $_x;" $_j && _has=1; done
		[ $_has = 0 ] && check_metric "$_m{device=\"$_d\"}" absent
	done
	check_metric "diskpulse_smart_power_mode{device=\"$_d\"}" == 0
	check_metric "diskpulse_smart_skipped_total{device=\"$_d\",reason=\"standby\"}" == 0
	check_metric "diskpulse_smart_skipped_total{device=\"$_d\",reason=\"sleep\"}" == 0
	check_metric "diskpulse_smart_read_errors_total{device=\"$_d\"}" absent
}
compare $HDD
compare $SSD
same "$HDD rotation rate is QEMU's 7200" "$(metric "diskpulse_disk_rotation_rate_rpm{device=\"$HDD\"}")" 7200
same "$HDD temperature is QEMU's 31 (attribute 190)" "$(metric "diskpulse_smart_temperature_celsius{device=\"$HDD\"}")" 31
same "$SSD wwn is the configured one" "$(metric_label "diskpulse_smart_info{device=\"$SSD\"}" wwn)" 5000c500a1b2c3d4

# Power mode as smartctl -n standby sees it (QEMU answers CHECK POWER MODE with FFh).
pm=$(smartctl -n standby -i /dev/$HDD | sed -n 's/^Power mode is: *//p')
same "$HDD power mode = smartctl's ($pm)" "$(metric "diskpulse_smart_power_mode{device=\"$HDD\"}")" \
	"$(case $pm in 'ACTIVE or IDLE' | ACTIVE | IDLE*) echo 0 ;; STANDBY*) echo 1 ;; SLEEP) echo 2 ;; *) echo "?" ;; esac)"

# Write cache: as smartctl -g wcache says, also after switching it off and on again.
wcache() { smartctl -g wcache /dev/$1 | sed -n 's/^Write cache is: *//p'; }
wc_is() { scrape && [ "$(metric "diskpulse_ata_write_cache_enabled{device=\"$HDD\"}")" = "$1" ]; }
for state in on off on; do
	smartctl -q silent -s wcache,$state /dev/$HDD
	want=$(case $(wcache $HDD) in Enabled) echo 1 ;; Disabled) echo 0 ;; *) echo "?" ;; esac)
	check "smartctl -s wcache,$state took effect ($(wcache $HDD))" [ "$want" = "$([ $state = on ] && echo 1 || echo 0)" ]
	wait_for 6 wc_is "$want"
	same "$HDD write_cache_enabled = smartctl -g wcache after wcache,$state" \
		"$(metric "diskpulse_ata_write_cache_enabled{device=\"$HDD\"}")" "$want"
done
same "$SSD write_cache_enabled = smartctl -g wcache" \
	"$(metric "diskpulse_ata_write_cache_enabled{device=\"$SSD\"}")" \
	"$(case $(wcache $SSD) in Enabled) echo 1 ;; Disabled) echo 0 ;; *) echo "?" ;; esac)"

# SMART switched off on the drive: reads fail as a refusal by the device, the page still serves,
# the other disk carries on; switched on again, the disk recovers.
smartctl -q silent -s off /dev/$HDD
smartctl --json=g -a /dev/$HDD >/tmp/sc_off
note "smartctl with SMART off: smart_support.enabled=$(sj /tmp/sc_off smart_support.enabled) exit=$(sj /tmp/sc_off smartctl.exit_status) messages: $(sed -n 's/^json\.smartctl\.messages\[[0-9]*\]\.string = //p' /tmp/sc_off | tr '\n' ' ')"
down() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$HDD\"}")" = 0 ]; }
check "$HDD smart_up 0 within 6 s of smartctl -s off" wait_for 6 down
note "$(grep "^diskpulse_smart_read_errors_total{device=\"$HDD\"" $METRICS | tr '\n' ' ')"
# QEMU aborts SMART READ DATA while SMART is off (IDENTIFY still says enabled): a refusal by the
# device (CHECK CONDITION, ABORTED COMMAND), not a page that failed to parse.
check_metric "diskpulse_smart_read_errors_total{device=\"$HDD\",reason=\"device_status\"}" '>=' 1
check_metric "diskpulse_smart_read_errors_total{device=\"$HDD\",reason=\"bad_data\"}" absent
check_metric "diskpulse_smart_up{device=\"$SSD\"}" == 1
smartctl -q silent -s on /dev/$HDD
check "$HDD smart_up 1 within 6 s of smartctl -s on" wait_for 6 smart_up $HDD
check_exposition "with ATA SMART and its read errors"
daemon_stop
expect "exit status after SIGTERM" $? == 0
