# Without the capabilities SMART needs, reads fail as reason="permission" while /metrics and diskstats carry on.
# timeout: 100
# Two ways to lack them (busybox's setpriv cannot drop capabilities, and there is no capsh):
#   userns: uid 0 in a new user namespace: owns the device nodes, but holds no capability where the
#           kernel checks them (CAP_SYS_ADMIN for NVMe admin commands, CAP_SYS_RAWIO for ATA
#           pass-through), like a container;
#   nobody: the service user without ambient capabilities: cannot even open the nodes.

# same NAME ACTUAL EXPECTED: string equality.
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$2', expected '$3'"; fi; }
capfield() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }
helper_pid() {
	for _p in /proc/[0-9]*; do
		[ "$(capfield PPid "${_p#/proc/}" 2>/dev/null)" = "$DAEMON_PID" ] &&
			[ "$(cat "$_p/comm" 2>/dev/null)" = diskpulse-priv ] && echo "${_p#/proc/}" && return 0
	done
	return 1
}
DEVS="nvme0n1 sda"
# attempted: every disk has had a read attempt counted (an error, a skip, or a success).
attempted() {
	scrape || return 1
	for _d in $DEVS; do
		[ "$(metric_count "diskpulse_smart_read_errors_total{device=\"$_d\"}")" != 0 ] ||
			num_cmp "$(metric "diskpulse_smart_skipped_total{device=\"$_d\",reason=\"sleep\"}")" '>' 0 ||
			num_cmp "$(metric "diskpulse_smart_skipped_total{device=\"$_d\",reason=\"standby\"}")" '>' 0 ||
			[ "$(metric "diskpulse_smart_up{device=\"$_d\"}")" = 1 ] || return 1
	done
}

# variant NAME WRAPPER: runs the daemon through WRAPPER (exec'ing /bin/diskpulse with "$@").
variant() {
	np_v=$1
	printf '#!/bin/sh\n%s\n' "$2" >/tmp/dp-$np_v
	chmod 755 /tmp/dp-$np_v
	mkdir -p /tmp/state && chmod 1777 /tmp/state
	DAEMON=/tmp/dp-$np_v
	daemon_start --smart.interval=2s --log.level=debug || return 1
	check "$np_v: a SMART read of $DEVS attempted within 15 s" wait_for 15 attempted
	for np_d in $DEVS; do
		note "$np_v: $(grep -e "^diskpulse_smart_[a-z_]*{device=\"$np_d\"" $METRICS | tr '\n' ' ')"
		check_metric "diskpulse_smart_up{device=\"$np_d\"}" == 0
		check_metric "diskpulse_smart_read_errors_total{device=\"$np_d\",reason=\"permission\"}" '>=' 1
		expect "$np_v: $np_d read error reasons (permission only)" \
			"$(metric_count "diskpulse_smart_read_errors_total{device=\"$np_d\"}")" == 1
		# Nothing was read, so nothing is made up.
		for np_m in smart_info smart_healthy smart_temperature_celsius smart_last_read_timestamp_seconds; do
			check_metric "diskpulse_$np_m{device=\"$np_d\"}" absent
		done
	done
	# A disk the daemon could not ask is not a disk found asleep.
	check_metric 'diskpulse_smart_skipped_total{device="sda",reason="sleep"}' == 0
	check_metric 'diskpulse_smart_skipped_total{device="sda",reason="standby"}' == 0
	check_metric 'diskpulse_smart_power_mode{device="sda"}' absent
	check_metric 'diskpulse_collector_success{collector="smart"}' == 1

	# The page serves and diskstats still count real writes.
	check "$np_v: /-/healthy answers" http_get /-/healthy /tmp/healthy
	np_w0=$(metric 'diskpulse_disk_writes_completed_total{device="nvme0n1"}')
	dd if=/dev/urandom of=/dev/nvme0n1 bs=64k count=16 oflag=direct 2>/dev/null
	check "$np_v: diskstats writes of nvme0n1 move by >= 16" wait_for 5 eval \
		'scrape && num_cmp "$(metric "diskpulse_disk_writes_completed_total{device=\"nvme0n1\"}")" ">=" $((np_w0 + 16))'

	# Capabilities as the kernel shows them (for userns: relative to the new namespace).
	same "$np_v: daemon CapEff" "$(capfield CapEff $DAEMON_PID)" 0000000000000000
	same "$np_v: daemon NoNewPrivs" "$(capfield NoNewPrivs $DAEMON_PID)" 1
	np_h=$(helper_pid) && note "$np_v: helper $np_h CapEff $(capfield CapEff $np_h), Uid $(capfield Uid $np_h)"
	daemon_stop
	expect "$np_v: exit status after SIGTERM" $? == 0
}

# smartctl fails the same way under the same conditions (a sanity check of the setup).
# (-d sat: without the capability smartctl's own SAT probe fails and it falls back to plain SCSI.)
for args in /dev/nvme0 "-d sat /dev/sda"; do
	unshare -U -r smartctl -i $args >/tmp/sc_userns 2>&1
	note "smartctl -i $args in a user namespace: exit $?: $(grep -i -e failed -e denied -e permitted /tmp/sc_userns | tr '\n' ' ')"
	check "smartctl cannot read $args in a user namespace" eval "! unshare -U -r smartctl -q silent -A $args"
	check "smartctl can read $args as root" smartctl -q silent -A $args
done
unshare -U -r smartctl -n sleep -i -d sat /dev/sda >/tmp/sc_userns 2>&1
note "smartctl -n sleep -i -d sat /dev/sda in a user namespace: exit $?: $(grep -i -e mode -e failed -e permitted /tmp/sc_userns | tr '\n' ' ')"

variant userns 'exec unshare -U -r /bin/diskpulse "$@"'
variant nobody 'exec su -s /bin/sh -c '\''exec /bin/diskpulse "$@"'\'' -- nobody diskpulse "$@"'
