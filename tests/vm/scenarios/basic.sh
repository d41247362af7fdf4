# The daemon serves diskstats of the guest's disks (nvme0n1 and sda; nvme0n1 alone in the arm64 guest, whose virt machine has no AHCI); counters and gauges follow real writes.
# timeout: 120
WINDOW=5
daemon_start --diskstats.interval=1s --diskstats.window=${WINDOW}s --log.level=debug || exit 1
started=$(now)
# The disks the harness attached, which init waited for (vmtest.wait, a failed boot if one is missing).
DEVS=$VM_WAIT
[ -n "$DEVS" ] || { fail "disks" "no vmtest.wait on the kernel command line"; exit 1; }
note "disks: $DEVS"

# Identity and facts, compared with sysfs (and udev's database, which the guest's udevd fills).
for dev in $DEVS; do
	check_metric "diskpulse_disk_writes_completed_total{device=\"$dev\"}" present
	check_metric "diskpulse_disk_info{device=\"$dev\"}" == 1
	majmin=$(cat /sys/block/$dev/dev)
	check "$dev info major:minor" [ "$(metric_label "diskpulse_disk_info{device=\"$dev\"}" major):$(
		metric_label "diskpulse_disk_info{device=\"$dev\"}" minor)" = "$majmin" ]
	rot=$(metric_label "diskpulse_disk_info{device=\"$dev\"}" rotational)
	case "$(cat /sys/block/$dev/queue/rotational)$rot" in
	11 | 1true | 00 | 0false) ok "$dev info rotational" ;;
	*) fail "$dev info rotational" "label '$rot', sysfs $(cat /sys/block/$dev/queue/rotational)" ;;
	esac
	if [ -e "/run/udev/data/b$majmin" ]; then
		want=$(sed -n 's/^E:ID_SERIAL_SHORT=//p' "/run/udev/data/b$majmin")
		got=$(metric_label "diskpulse_disk_info{device=\"$dev\"}" serial)
		check "$dev info serial from udev ($want)" [ "$got" = "$want" ]
	fi
done
expected=$(ls /sys/block | grep -cvE '^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme[0-9]+n[0-9]+p)[0-9]+$')
check_metric diskpulse_disk_devices == "$expected"

# snapshot TAG: /proc/diskstats write counters of every disk into TAG_w_DEV (writes), TAG_s_DEV (sectors).
snapshot() { for dev in $DEVS; do eval "$1_w_$dev=$(diskstat $dev 5) $1_s_$dev=$(diskstat $dev 7)"; done; }
# caught_up: a fresh scrape shows every disk's write counters at least at the "lo" snapshot.
caught_up() {
	scrape || return 1
	for dev in $DEVS; do
		eval "w0=\$lo_w_$dev b0=\$((lo_s_$dev * 512))"
		num_cmp "$(metric "diskpulse_disk_writes_completed_total{device=\"$dev\"}")" '>=' "$w0" &&
			num_cmp "$(metric "diskpulse_disk_written_bytes_total{device=\"$dev\"}")" '>=' "$b0" || return 1
	done
}
# check_counters WHEN: within 5 s the daemon's write counters reach /proc/diskstats as read
# before the scrape, and do not exceed it as read after the scrape.
check_counters() {
	snapshot lo
	wait_for 5 caught_up || note "counters did not catch up with /proc/diskstats within 5 s"
	snapshot hi
	for dev in $DEVS; do
		eval "w0=\$lo_w_$dev w1=\$hi_w_$dev b0=\$((lo_s_$dev * 512)) b1=\$((hi_s_$dev * 512))"
		w=$(metric "diskpulse_disk_writes_completed_total{device=\"$dev\"}")
		b=$(metric "diskpulse_disk_written_bytes_total{device=\"$dev\"}")
		if num_cmp "$w" '>=' "$w0" && num_cmp "$w" '<=' "$w1"; then ok "$dev writes_completed = kernel ($1)"
		else fail "$dev writes_completed = kernel ($1)" "metric $w, /proc/diskstats $w0..$w1"; fi
		if num_cmp "$b" '>=' "$b0" && num_cmp "$b" '<=' "$b1"; then ok "$dev written_bytes = kernel ($1)"
		else fail "$dev written_bytes = kernel ($1)" "metric $b, /proc/diskstats $b0..$b1"; fi
	done
}
check_counters idle
for dev in $DEVS; do
	eval "before_w_$dev=\$(metric 'diskpulse_disk_writes_completed_total{device=\"$dev\"}')"
	eval "before_b_$dev=\$(metric 'diskpulse_disk_written_bytes_total{device=\"$dev\"}')"
done

# 4 MiB of direct writes to each disk once the daemon has a full window of history, then one
# scrape well inside the window.
sleep "$(awk -v s="$started" -v w=$WINDOW -v n="$(now)" 'BEGIN { d = s + w + 1 - n; print (d > 0 ? d : 0) }')"
snapshot pre
t0=$(now)
for dev in $DEVS; do dd if=/dev/urandom of=/dev/$dev bs=64k count=64 oflag=direct 2>/dev/null; done
note "dd took $(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }') s"
check_counters "after dd"
for dev in $DEVS; do
	eval "w0=\$before_w_$dev b0=\$before_b_$dev dw=\$((hi_w_$dev - pre_w_$dev)) db=\$(((hi_s_$dev - pre_s_$dev) * 512))"
	expect "$dev writes_completed moved by >= 64" "$(metric "diskpulse_disk_writes_completed_total{device=\"$dev\"}")" '>=' $((w0 + 64))
	expect "$dev written_bytes moved by >= 4 MiB" "$(metric "diskpulse_disk_written_bytes_total{device=\"$dev\"}")" '>=' $((b0 + 4194304))
	# All of the dd lies inside the window: the rates are the kernel's deltas over about WINDOW s.
	iops=$(metric "diskpulse_disk_write_iops{device=\"$dev\"}")
	bps=$(metric "diskpulse_disk_write_bytes_per_second{device=\"$dev\"}")
	expect "$dev write_iops >= half of $dw/${WINDOW}s" "$iops" '>=' "$(awk -v d=$dw -v w=$WINDOW 'BEGIN { print d / w / 2 }')"
	expect "$dev write_iops <= twice $dw/${WINDOW}s" "$iops" '<=' "$(awk -v d=$dw -v w=$WINDOW 'BEGIN { print d / w * 2 }')"
	expect "$dev write_bytes_per_second >= half of $db/${WINDOW}s" "$bps" '>=' "$(awk -v d=$db -v w=$WINDOW 'BEGIN { print d / w / 2 }')"
	expect "$dev write_bytes_per_second <= twice $db/${WINDOW}s" "$bps" '<=' "$(awk -v d=$db -v w=$WINDOW 'BEGIN { print d / w * 2 }')"
done

# Once the writes have left the window the write gauges fall back to exactly 0; none is ever negative.
sleep $((WINDOW + 2))
scrape || fail "scrape after the window" "no /metrics"
for dev in $DEVS; do
	check_metric "diskpulse_disk_write_iops{device=\"$dev\"}" == 0
	check_metric "diskpulse_disk_write_bytes_per_second{device=\"$dev\"}" == 0
	for g in read_iops read_bytes_per_second write_await_seconds utilization_ratio queue_depth; do
		check_metric "diskpulse_disk_$g{device=\"$dev\"}" '>=' 0
	done
	check_metric "diskpulse_disk_utilization_ratio{device=\"$dev\"}" '<=' 1
done

check_exposition "after the write load"
# SIGTERM ends it promptly and cleanly.
t0=$(now)
daemon_stop
expect "exit status after SIGTERM" $? == 0
expect "seconds to exit after SIGTERM" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" '<=' 2
