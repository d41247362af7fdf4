# A hot-unplugged NVMe controller leaves the SMART metrics; the other disks keep being read and /metrics stays fast.
# disk: hot 64M
# qemu: -device nvme,id=nvmehot,serial=DPHOT1,drive=hot
# timeout: 100
hot=$(nvme_by_serial DPHOT1) stay=$(nvme_by_serial DPNVME0)
check "hot-pluggable NVMe present ($hot)" [ -n "$hot" ]
check "default NVMe present ($stay)" [ -n "$stay" ]
[ -n "$hot" ] && [ -n "$stay" ] || exit 1
DEVS="$stay sda"

smart_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$1\"}")" = 1 ]; }
last_read() { metric "diskpulse_smart_last_read_timestamp_seconds{device=\"$1\"}"; }
# timed_scrape: scrape, keeping the slowest scrape's duration in $slowest.
slowest=0 scrapes=0
timed_scrape() {
	_t0=$(now)
	scrape || { fail "scrape" "no /metrics"; return 1; }
	_d=$(awk -v a="$_t0" -v b="$(now)" 'BEGIN { print b - a }')
	num_cmp "$_d" '>' "$slowest" && slowest=$_d
	scrapes=$((scrapes + 1))
}

daemon_start --smart.interval=1s --log.level=debug || exit 1
for d in $hot $DEVS; do check "first SMART read of $d" wait_for 15 smart_up $d; done
check_metric "diskpulse_smart_info{device=\"$hot\",serial=\"DPHOT1\"}" == 1

# Unplug: the guest ejects the controller, QEMU confirms.
check "device_del accepted" eval "qmp '{\"execute\":\"device_del\",\"arguments\":{\"id\":\"nvmehot\"}}' >/dev/null"
check "kernel removed $hot" wait_for 20 block_absent "$hot"
gone_at=$(date +%s)
check "QEMU reports DEVICE_DELETED" eval 'qmp_event DEVICE_DELETED 20 | grep -q nvmehot'
for d in $DEVS; do eval "t_$d=\$(last_read $d)"; done

# Until its series vanish, the unplugged disk never shows a successful read after it went away
# (smart_up 0 with a "nodev" read error is fine meanwhile).
t0=$(now) vanished= stale_ok=1 seen_down=0
while num_cmp "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" '<' 12; do
	timed_scrape || break
	if [ "$(label_count "device=\"$hot\"")" = 0 ]; then
		vanished=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
		break
	fi
	up=$(metric "diskpulse_smart_up{device=\"$hot\"}")
	lr=$(last_read $hot)
	[ "$up" = 0 ] && seen_down=1
	if [ "$up" = 1 ] && [ -n "$lr" ] && num_cmp "$lr" '>' "$((gone_at + 1))"; then
		stale_ok=0
		note "$hot: smart_up 1 with a read at $lr after the removal at $gone_at"
	fi
	[ "$seen_down" = 1 ] && [ -z "$errs_noted" ] && errs_noted=1 &&
		note "while still listed: $(grep -e "^diskpulse_smart_up{device=\"$hot\"" -e "^diskpulse_smart_read_errors_total{device=\"$hot\"" $METRICS | tr '\n' ' ')"
	sleep 0.3
done
# As promptly as its diskstats series (hotunplug.sh allows 5 s for every series of the device).
note "$hot series vanished ${vanished:-not within 12} s after the kernel removed it; smart_up 0 seen before: $seen_down"
expect "seconds until the SMART series of $hot vanish" "${vanished:-12}" '<=' 5
check "$hot: no successful read reported after the removal" [ "$stale_ok" = 1 ]
check_metric "diskpulse_smart_info{device=\"$hot\"}" absent
check_metric "diskpulse_smart_up{device=\"$hot\"}" absent
check_metric "diskpulse_smart_read_errors_total{device=\"$hot\"}" absent

# The other disks keep being read: their last read moves past the one before the unplug.
for d in $DEVS; do
	eval "t=\$t_$d"
	moved() { timed_scrape && num_cmp "$(last_read $1)" '>' "$2"; }
	check "$d SMART read again after the unplug (last read was $t)" wait_for 5 moved $d "$t"
	check_metric "diskpulse_smart_up{device=\"$d\"}" == 1
	check_metric "diskpulse_smart_read_errors_total{device=\"$d\"}" absent
done
check "daemon alive" daemon_alive
for i in 1 2 3 4 5; do timed_scrape; done
note "slowest of $scrapes scrapes: $slowest s"
expect "slowest scrape (s) during and after the unplug" "$slowest" '<' 1
daemon_stop
expect "exit status after SIGTERM" $? == 0
