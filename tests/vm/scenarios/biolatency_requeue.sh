# The biolatency collector counts a requeued request once: a scsi_debug disk answers every 5th command "host busy" (opts 0x8000, every_nth=5), so the block layer gives those requests back (block_rq_requeue) and issues them again; the kernel's trace shows the requeues and more issues than completions, and both histograms' _count of reads and of writes equal /proc/diskstats' completed requests.
# timeout: 240
# defaults: no
# append: vmtest.udev=0
T=/sys/kernel/tracing
SD=/sys/bus/pseudo/drivers/scsi_debug
N=300 # 4 KiB direct I/Os of each kind
[ -e /sys/kernel/btf/vmlinux ] || skip "the guest kernel has no BTF (/sys/kernel/btf/vmlinux)"
daemon_supports collector.biolatency || skip "no biolatency collector in this diskpulse"
# (before 5.12 the collector does not load: biolatency_nullblk checks how the daemon runs on)
kernel_before 5 12 && skip "kernel $(uname -r): the biolatency collector needs 5.12 or later"
mountpoint -q $T || mount -t tracefs nodev $T 2>/dev/null || skip "no tracefs in the guest kernel"
for e in block_rq_requeue block_rq_issue block_rq_complete; do
	[ -e $T/events/block/$e/enable ] || skip "no block/$e trace event in the guest kernel"
done
scsi_debug_disk() {
	for _b in /sys/block/sd*; do
		[ "$(tr -d ' ' <"$_b/device/model" 2>/dev/null)" = scsi_debug ] && echo "${_b#/sys/block/}" && return 0
	done
	return 1
}
# statistics=1: scsi_debug counts commands only then, and every_nth counts on that count
modprobe scsi_debug ptype=0 dev_size_mb=16 statistics=1 || skip "no scsi_debug module"
check "scsi_debug disk appeared" wait_for 15 scsi_debug_disk
DEV=$(scsi_debug_disk)
MAJMIN=$(tr ':' ',' </sys/block/$DEV/dev)
# the queue's flags (debugfs): with STATS the kernel stamps each issue itself (rq->io_start_time_ns)
# and the program reads that; without, it keeps the issue time in its in-flight array
mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
note "$DEV ($MAJMIN), scheduler: $(cat /sys/block/$DEV/queue/scheduler), wbt_lat_usec $(cat /sys/block/$DEV/queue/wbt_lat_usec 2>/dev/null), queue flags: $(cat /sys/kernel/debug/block/$DEV/state 2>/dev/null)"

hist_count() {
	metric "diskpulse_io_$1_latency_seconds_count{device=\"$DEV\",op=\"$2\"}" "${3:-$METRICS}" || echo 0
}
# field of /proc/diskstats with the completed requests of an op: 1 reads, 5 writes
field() { [ "$1" = read ] && echo 1 || echo 5; }
# completed requests of OP in the diskstats line of FILE
ds_count() { awk -v f="$(field "$1")" '{ print $(f + 3) }' "$2"; }
# Since the baseline (/tmp/base: a scrape, /tmp/ds_base: diskstats, both taken while the disk was
# idle after the programs were attached), both histograms of both ops counted what diskstats counted
# (the daemon reads its maps at its own pace: waited for); the last scrape is kept in /tmp/agreed,
# the diskstats of the time in /tmp/ds.
agree() {
	scrape || return 1
	awk -v d="$DEV" '$3 == d' /proc/diskstats >/tmp/ds
	cp "$METRICS" /tmp/agreed
	for op in read write; do
		c=$(($(ds_count $op /tmp/ds) - $(ds_count $op /tmp/ds_base)))
		for kind in device queue; do
			[ $(($(hist_count $kind $op) - $(hist_count $kind $op /tmp/base))) = "$c" ] || return 1
		done
	done
}
attached() { scrape && [ "$(metric diskpulse_io_latency_up)" = 1 ]; }

# both operations in both histograms (the queue histogram's default is writes alone)
daemon_start --no-collector.smart --no-collector.canary --diskstats.interval=1s \
	--biolatency.queue-ops=read,write || exit 1
if ! wait_for 10 attached; then
	fail "diskpulse_io_latency_up is 1" "$(grep -m1 'collector=biolatency' "$DAEMON_LOG")"
	exit 1
fi
# The disk is idle (no udev in the guest; its partition scan was done before the daemon started).
scrape && cp "$METRICS" /tmp/base
awk -v d="$DEV" '$3 == d' /proc/diskstats >/tmp/ds_base
# one I/O of each kind first: the series appear, and the baseline is checked
dd if=/dev/$DEV of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
dd if=/dev/zero of=/dev/$DEV bs=4k count=1 oflag=direct 2>/dev/null
check "before: both histograms count what diskstats counts" wait_for 15 agree
cp /tmp/agreed /tmp/before
cp /tmp/ds /tmp/ds0

echo 8192 >$T/buffer_size_kb
: >$T/trace
for e in block_rq_requeue block_rq_issue block_rq_complete; do
	echo "dev == $(($(cut -d: -f1 /sys/block/$DEV/dev) << 20 | $(cut -d: -f2 /sys/block/$DEV/dev)))" \
		>$T/events/block/$e/filter
	echo 1 >$T/events/block/$e/enable
done
echo 1 >$T/tracing_on
echo 5 >$SD/every_nth
echo 0x8000 >$SD/opts # SDEBUG_OPT_HOST_BUSY: SCSI_MLQUEUE_HOST_BUSY on every nth command
t0=$(now)
dd if=/dev/$DEV of=/dev/null bs=4k count=$N iflag=direct 2>/dev/null
dd if=/dev/zero of=/dev/$DEV bs=4k count=$N oflag=direct 2>/dev/null
t1=$(now)
echo 0 >$SD/opts
echo 0 >$SD/every_nth
echo 0 >$T/tracing_on
note "dd: $N reads and $N writes in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"

# The kernel's own evidence: requests given back, and issued more often than completed.
requeues=$(grep -c " block_rq_requeue: $MAJMIN " $T/trace)
issues=$(grep -c " block_rq_issue: $MAJMIN " $T/trace)
completions=$(grep -c " block_rq_complete: $MAJMIN " $T/trace)
note "trace: $requeues requeues, $issues issues, $completions completions"
expect "the block layer requeued requests ($requeues)" "$requeues" '>=' 10
expect "issues ($issues) exceed completions ($completions)" "$issues" '>' "$completions"

check "after: both histograms count what diskstats counts" wait_for 15 agree
for op in read write; do
	f=$(field $op)
	ds=$(paste /tmp/ds0 /tmp/ds | awk -v f="$f" '{ h = NF / 2; print $(h + f + 3) - $(f + 3) }')
	dev_n=$(($(hist_count device $op /tmp/agreed) - $(hist_count device $op /tmp/before)))
	queue_n=$(($(hist_count queue $op /tmp/agreed) - $(hist_count queue $op /tmp/before)))
	expect "$op: diskstats completed dd's $N requests or more ($ds)" "$ds" '>=' "$N"
	expect "$op: device histogram count $dev_n equals diskstats' $ds" "$dev_n" == "$ds"
	expect "$op: queue histogram count $queue_n equals diskstats' $ds" "$queue_n" == "$ds"
done
scrape
check_metric 'diskpulse_io_latency_unslotted_total' == 0
note "untracked completions: $(metric diskpulse_io_latency_untracked_total)"
check "the daemon stops cleanly" daemon_stop
modprobe -r scsi_debug 2>/dev/null || note "scsi_debug stays loaded"
