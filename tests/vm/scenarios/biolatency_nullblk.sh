# The biolatency collector on null_blk with a fixed completion delay (irqmode=2, completion_nsec): at 900 us and at 3.2 ms, the median bucket of diskpulse_io_device_latency_seconds for reads and for writes is within one bucket of the delay, the histogram counts every I/O that dd did, and the queue time and /proc/diskstats' await are printed beside it. On a kernel before 5.12 the daemon runs on without the collector: diskpulse_io_latency_up 0 and the reason logged.
# timeout: 300
# defaults: no
# null_blk is taken out with rmmod, never modprobe -r: that removes configfs with it, and 5.10's
# configfs leaves an RCU callback behind on unload (a panic in rcu_core in the 5.10 guest).
modprobe null_blk nr_devices=0 2>/dev/null && rmmod null_blk || skip "no null_blk module"
[ -e /sys/kernel/btf/vmlinux ] || skip "the guest kernel has no BTF (/sys/kernel/btf/vmlinux)"
N=2000 # 4 KiB direct I/Os of each kind per delay
# Under TCG a request costs the guest 75-150 us beyond null_blk's delay (diskstats' await 0.32 ms
# at 250 us, 0.63 ms at 500 us, 2.12 ms at 2 ms): two buckets at 250 or 500 us (250, 300, 350;
# 500, 600, 700). The delays sit inside a bucket, so that up to 300 us more stays within one:
# 900 us in (840 us, 1 ms], then 1.2 ms; 3.2 ms in (3, 3.5 ms], then 4.2 ms.
DEV=nullb0

# hist KIND OP FILE: "le cumulative" lines of diskpulse_io_KIND_latency_seconds for $DEV and OP in
# the scrape FILE, ascending (+Inf as 1e99), whatever the order of the labels.
hist() {
	awk -v name="diskpulse_io_$1_latency_seconds_bucket{" -v dev="device=\"$DEV\"" -v op="op=\"$2\"" '
	index($0, name) == 1 && index($0, dev) && index($0, op) {
		le = $0; sub(/.*le="/, "", le); sub(/".*/, "", le)
		print (le == "+Inf" ? "1e99" : le), $NF
	}' "$3" | sort -g
}
# hist_count KIND OP FILE: the _count of that histogram (0 when absent).
hist_count() {
	metric "diskpulse_io_$1_latency_seconds_count{device=\"$DEV\",op=\"$2\"}" "$3" || echo 0
}
# median_le KIND OP: the bound of the bucket holding the median of what happened between the
# scrapes /tmp/before and /tmp/after (bucket deltas), then its index and the index of the bucket
# holding $D_S seconds: "LE I_MEDIAN I_DELAY".
median_le() {
	hist "$1" "$2" /tmp/before >/tmp/h0
	hist "$1" "$2" /tmp/after >/tmp/h1
	awk -v d="$D_S" '
	NR == FNR { b[$1] = $2; next }
	{ le[n] = $1; c[n] = $2 - b[$1]; n++ }
	END {
		if (n == 0 || c[n - 1] <= 0) exit 1
		for (i = 0; i < n && c[i] < c[n - 1] / 2; i++) ;
		for (j = 0; j < n && le[j] + 0 < d - 1e-12; j++) ;
		print le[i], i, j
	}' /tmp/h0 /tmp/h1
}
# await FIELD_IOS FIELD_MS: mean ms per I/O from /proc/diskstats between snapshots s0 and s1.
diskstats_snap() { awk -v d="$DEV" '$3 == d' /proc/diskstats >"$1"; }
await_ms() {
	paste /tmp/s0 /tmp/s1 | awk -v i="$1" -v t="$2" '{
		h = NF / 2; n = $(h + i + 3) - $(i + 3); m = $(h + t + 3) - $(t + 3)
		printf "%.3f", n ? m / n : 0 }'
}
has_series() { scrape && metric "diskpulse_io_device_latency_seconds_count{device=\"$DEV\",op=\"$1\"}" >/dev/null; }

have_collector=
run_delay() {
	D_NS=$1
	D_S=$(awk -v n="$D_NS" 'BEGIN { printf "%.9g", n / 1e9 }')
	rmmod null_blk 2>/dev/null
	check "null_blk with completion_nsec=$D_NS" modprobe null_blk nr_devices=1 irqmode=2 \
		completion_nsec="$D_NS" queue_mode=2 gb=1 bs=4096
	wait_for 10 block_present $DEV || { fail "$DEV appears" "no /sys/block/$DEV"; return 1; }
	# one I/O of each kind first, so that the device has its series before the first scrape
	dd if=/dev/$DEV of=/dev/null bs=4k count=8 iflag=direct 2>/dev/null
	dd if=/dev/zero of=/dev/$DEV bs=4k count=8 oflag=direct 2>/dev/null
	if [ -n "$have_collector" ]; then
		wait_for 15 has_series write ||
			fail "$DEV's histograms appear" "no diskpulse_io_device_latency_seconds_count{device=\"$DEV\"}"
		scrape && cp "$METRICS" /tmp/before
	fi
	diskstats_snap /tmp/s0
	t0=$(now)
	dd if=/dev/$DEV of=/dev/null bs=4k count=$N iflag=direct 2>/dev/null
	t1=$(now)
	dd if=/dev/zero of=/dev/$DEV bs=4k count=$N oflag=direct 2>/dev/null
	t2=$(now)
	diskstats_snap /tmp/s1
	rd=$(awk -v a="$t0" -v b="$t1" -v n=$N 'BEGIN { printf "%.3f", (b - a) * 1000 / n }')
	wr=$(awk -v a="$t1" -v b="$t2" -v n=$N 'BEGIN { printf "%.3f", (b - a) * 1000 / n }')
	await_read=$(await_ms 1 4) await_write=$(await_ms 5 8)
	note "delay $D_S s: dd ${rd} ms per read, ${wr} ms per write; /proc/diskstats r_await $await_read ms, w_await $await_write ms"
	# Independent of diskpulse: each dd I/O waits at least the delay.
	expect "dd's reads take at least the delay ($rd ms)" "$rd" '>=' "$(awk -v d="$D_S" 'BEGIN { print d * 1000 }')"
	[ -n "$have_collector" ] || return 0

	# The collector's counts reach what dd did (it may read its maps at its own pace).
	for op in read write; do
		eval "c0_$op=\$(hist_count device $op /tmp/before)"
	done
	caught_up() {
		scrape || return 1
		for op in read write; do
			eval "c0=\$c0_$op"
			num_cmp "$(hist_count device $op "$METRICS")" '>=' "$((c0 + N))" || return 1
		done
	}
	wait_for 15 caught_up || note "the histograms did not count $N more I/Os of each kind within 15 s"
	cp "$METRICS" /tmp/after
	for op in read write; do
		eval "c0=\$c0_$op"
		n=$(awk -v a="$(hist_count device $op /tmp/after)" -v b="$c0" 'BEGIN { print a - b }')
		# dd's I/Os and nothing else on this device (a partition scan adds none: null_blk has none)
		expect "$op: the device histogram counted dd's $N I/Os ($n)" "$n" '>=' "$N"
		expect "$op: no more than dd's $N I/Os plus a few ($n)" "$n" '<=' "$((N + 16))"
		r=$(median_le device $op) || { fail "$op median at $D_S s" "no histogram"; continue; }
		set -- $r
		le=$1 im=$2 id=$3
		r=$(median_le queue $op) || r=none
		set -- $r
		note "delay $D_S s, $op: device-time median bucket le=$le (bucket $im, the delay's $id); queue-time median bucket le=$1"
		check "$op: device-time median bucket le=$le is within one bucket of the delay $D_S s" \
			[ $((im - id)) -ge -1 -a $((im - id)) -le 1 ]
		q=$(metric "diskpulse_io_queue_latency_seconds_sum{device=\"$DEV\",op=\"$op\"}" /tmp/after)
		q0=$(metric "diskpulse_io_queue_latency_seconds_sum{device=\"$DEV\",op=\"$op\"}" /tmp/before)
		s=$(metric "diskpulse_io_device_latency_seconds_sum{device=\"$DEV\",op=\"$op\"}" /tmp/after)
		s0=$(metric "diskpulse_io_device_latency_seconds_sum{device=\"$DEV\",op=\"$op\"}" /tmp/before)
		dmean=$(awk -v a="$s" -v b="$s0" -v n="$n" 'BEGIN { printf "%.6f", (a - b) / n }')
		qmean=$(awk -v a="$q" -v b="$q0" -v n="$n" 'BEGIN { printf "%.6f", (a - b) / n }')
		eval "aw=\$await_$op"
		note "delay $D_S s, $op: mean device time $dmean s, mean queue time $qmean s, diskstats await $aw ms"
		# null_blk's timer never fires early; the device time is part of what diskstats' await
		# counts (made -> completed; summed in ns, printed in ms).
		expect "$op: mean device time $dmean s is at least the delay" "$dmean" '>=' "$(awk -v d="$D_S" 'BEGIN { print d * 0.99 }')"
		expect "$op: mean device time $dmean s is within await $aw ms" "$dmean" '<=' "$(awk -v a="$aw" 'BEGIN { print a / 1000 * 1.05 + 0.00002 }')"
	done
}

attached() { scrape && [ "$(metric diskpulse_io_latency_up)" = 1 ]; }
# The program needs BPF compare-and-swap, which the verifier knows from 5.12 on (README, "What it
# needs"): on an older kernel the daemon must run on without it, with diskpulse_io_latency_up 0
# (so DiskpulseIoLatencyLost, which needs the programs attached once, stays quiet) and the reason
# in its log; null_blk's own timing is checked as without the collector.
if daemon_supports collector.biolatency && kernel_before 5 12; then
	daemon_start --no-collector.smart --no-collector.canary --diskstats.interval=1s || exit 1
	logged() { grep -q 'collector=biolatency' "$DAEMON_LOG"; }
	wait_for 15 logged || fail "the daemon logs why the collector is not attached" "no collector=biolatency line"
	reason=$(grep -m1 'collector=biolatency' "$DAEMON_LOG")
	note "kernel $(uname -r): $reason"
	# the limit that 5.10 charges BPF memory to, or the verifier's refusal: never "capabilities"
	# for the root daemon
	check "the reason names RLIMIT_MEMLOCK or the verifier, not capabilities" \
		sh -c 'printf "%s" "$1" | grep -q -e RLIMIT_MEMLOCK -e verifier && ! printf "%s" "$1" | grep -q CAP_' sh "$reason"
	scrape
	check_metric diskpulse_io_latency_up == 0
	run_delay 900000
	sleep 2
	scrape
	check_metric diskpulse_io_latency_up == 0
	check "no latency histogram on a kernel before 5.12" sh -c '! grep -q "^diskpulse_io_device_latency_seconds" "$1"' sh "$METRICS"
	check_exposition "without the latency collector"
	daemon_stop
	rmmod null_blk
	exit 0
fi
if daemon_supports collector.biolatency; then
	daemon_start --no-collector.smart --no-collector.canary --diskstats.interval=1s || exit 1
	# A daemon with the collector that cannot attach here (Debian's kernel has BTF) is a failure,
	# with the daemon's reason.
	if ! wait_for 10 attached; then
		fail "diskpulse_io_latency_up is 1" "$(grep -m1 'collector=biolatency' "$DAEMON_LOG")"
		exit 1
	fi
	ok "diskpulse_io_latency_up is 1"
	have_collector=yes
else
	note "this diskpulse has no --collector.biolatency: only null_blk's own timing is checked"
fi
run_delay 900000
run_delay 3200000
if [ -n "$have_collector" ]; then
	scrape
	check_metric 'diskpulse_io_latency_unslotted_total' == 0
	note "untracked completions: $(metric diskpulse_io_latency_untracked_total)"
	check_exposition "with the latency histograms"
	daemon_stop
fi
rmmod null_blk
[ -n "$have_collector" ] || skip "no biolatency collector in this diskpulse (null_blk's timing checked)"
