# The slow creep, black box: on ext4 over dm-delay with the baseline's hour shortened to 1 s (--canary.baseline-period=1s, so a day of probing is 24 s), the daemon learns the disk's as-new reference in its first "week" with the drift ratio near 1; then the delay is raised in small steps and the drift ratio climbs past the shipped alert lines (a day's median above 1.5: DiskpulseSyncLatencyDrift, above 2: DiskpulseSyncLatencyDoubled, their expression evaluated here on the scraped series with the day scaled) while the reference stays put and the learnt baseline follows; nothing crosses a line before the first step. The scaled time is checked as a black box sees it: 8 days close 8 x 24 s after the start (the first of them the baseline's warm-up; the hours lie on a grid, not stretched by the probe after each), the recent window is scaled too (it holds only its minimum of 10 probes), and the lines are crossed within a scaled day and a half of the last step, not after the 5 minutes an unscaled window needs. A live Prometheus on the host scrapes the daemon with the shipped rules (the slow group's durations scaled like the daemon's day: 1 h is 1 s): nothing fires there before the first step, then the shipped DiskpulseSyncLatencyDrift and DiskpulseSyncLatencyDoubled fire for this target.
# timeout: 1200
# prometheus: 3600 diskpulse.alerts.slow
need dmsetup
modprobe dm-delay 2>/dev/null || skip "no dm-delay module"
D=nvme0n1
SZ=$(blockdev --getsz /dev/$D)
check "dm-delay 0 ms over $D" dmsetup create creep --table "0 $SZ delay /dev/$D 0 0"
mkfs.ext4 -q -F /dev/mapper/creep || { fail mkfs "mkfs.ext4 /dev/mapper/creep"; exit 1; }
mkdir -p /mnt/creep
check "ext4 mounted on /dev/mapper/creep" mount /dev/mapper/creep /mnt/creep
# delay MS: every I/O of the mapping (the probe's write and its flush) waits MS more
delay() {
	dmsetup suspend creep && dmsetup reload creep --table "0 $SZ delay /dev/$D 0 $1" &&
		dmsetup resume creep
}
daemon_start --no-collector.smart --canary.path=/mnt/creep --canary.interval=100ms \
	--canary.burst=2 --canary.baseline-period=1s --diskstats.interval=1s || exit 1
t0=$(now) # the first probe comes at about this time: the grid of hours starts there
check "the host's Prometheus scrapes the daemon" wait_for 60 prom_has 'up{job="diskpulse"} == 1'

SERIES=/tmp/drift.series # uptime and the idle drift ratio, one line per scrape
: >"$SERIES"
# sample: one scrape, the idle drift ratio appended to the series when the daemon has one
sample() {
	scrape || return 1
	r=$(canary /mnt/creep drift_ratio 'regime="idle"')
	[ -n "$r" ] && echo "$(now) $r" >>"$SERIES"
	return 0
}
# day_median: the median of the drift ratio over the last "day" (24 s): the shipped alerts'
# quantile_over_time(0.5, diskpulse_sync_drift_ratio[1d]) with the day scaled
day_median() {
	awk -v t="$(now)" '$1 > t - 24 { print $2 }' "$SERIES" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; h = (NR - 1) * 0.5; i = int(h);
			print v[i + 1] + (h - i) * (v[i + 2 > NR ? NR : i + 2] - v[i + 1]) }'
}
# sample_until SECONDS CONDITION...: scrapes every second until CONDITION holds
sample_until() {
	_end=$(awk -v t="$(now)" -v s="$1" 'BEGIN { print t + s }')
	shift
	while awk -v t="$(now)" -v e="$_end" 'BEGIN { exit !(t < e) }'; do
		sample && "$@" && return 0
		sleep 1
	done
	return 1
}
final_reference() { [ "$(canary /mnt/creep trend_daily_medians 'regime="idle"')" ] &&
	num_cmp "$(canary /mnt/creep trend_daily_medians 'regime="idle"')" '>=' 8; }

# 1. The first "week": 7 days of 24 s (the first the baseline's warm-up), then a day more.
check "the reference is made (8 daily medians)" sample_until 600 final_reference
# 8 days of 24 hours of 1 s (the first the warm-up): 192 s after the first probe, seen at the
# next scrape (a second apart). When an hour ended at the first probe after it, each lasted a
# probe spacing more (about 9 probes a second here): 8 days took 200 s or more.
t8=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { print a - b }')
note "8 daily medians $t8 s after the start (8 x 24 = 192 s of scaled time)"
expect "8 days of probing last 8 x 24 s (hours on a grid)" "$t8" '<' 197
expect "8 days of probing last 8 x 24 s (hours on a grid)" "$t8" '>' 188
scrape
n=$(canary /mnt/creep recent_samples 'regime="idle"')
note "the idle recent window holds $n probes"
expect "the recent window is scaled (83 ms: its minimum of 10 probes, not 5 minutes' worth)" "$n" '==' 10
ref=$(canary /mnt/creep reference_seconds 'regime="idle"')
base=$(canary /mnt/creep baseline_seconds 'regime="idle"')
note "reference $ref s, baseline $base s after the first week"
expect "reference is a fsync's cost" "$ref" '>' 0
max_before=$(awk 'BEGIN { m = 0 } { if ($2 > m) m = $2 } END { print m }' "$SERIES")
med_before=$(day_median)
note "drift ratio before the first step: highest sample $max_before, day median $med_before"
expect "no day median over 1.5 before the first step" "$med_before" '<' 1.5
expect "the drift ratio near 1 while the disk is as new" "$med_before" '<' 1.25
expect "the drift ratio near 1 while the disk is as new" "$med_before" '>' 0.8
note "alerts pending or firing in Prometheus so far: $(alerts_seen)"
check "Prometheus: no alert fired before the first step" \
	eval '! prom_has "count_over_time(ALERTS{alertstate=\"firing\"}[1h])"'
check "Prometheus: the drift ratio stored for this target" \
	prom_has 'diskpulse_sync_drift_ratio{path="/mnt/creep",regime="idle"}'

# 2. Small steps, a day and a half each (2 ms more per probe each: a write and a flush).
for ms in 1 2 3; do
	check "delay raised to $ms ms" delay $ms
	sample_until 36 false
	note "delay $ms ms: day median of the drift ratio $(day_median)"
done
# 3. The recent window (scaled: its newest 10 probes, about a scaled hour) follows the slower
# probes at once, so the day's median crosses the lines within a day and a half of the last step
# (an unscaled 5-minute window, 12.5 scaled days, took minutes).
over() { m=$(day_median) && num_cmp "$m" '>' "$1"; }
t3=$(now)
check "DiskpulseSyncLatencyDrift's line: a day's median over 1.5" sample_until 300 over 1.5
check "DiskpulseSyncLatencyDoubled's line: a day's median over 2" sample_until 300 over 2
t4=$(awk -v a="$(now)" -v b="$t3" 'BEGIN { print a - b }')
note "both lines crossed $t4 s after the last step's day and a half"
expect "the lines crossed within a scaled day and a half of the last step" "$t4" '<' 36
T='path="/mnt/creep",regime="idle"'
check "Prometheus: the shipped DiskpulseSyncLatencyDrift fires for this target" \
	sample_until 120 firing DiskpulseSyncLatencyDrift "$T"
check "Prometheus: the shipped DiskpulseSyncLatencyDoubled fires for this target" \
	sample_until 120 firing DiskpulseSyncLatencyDoubled "$T"
note "alerts pending or firing in Prometheus: $(alerts_seen)"
after=$(canary /mnt/creep reference_seconds 'regime="idle"')
base2=$(canary /mnt/creep baseline_seconds 'regime="idle"')
note "reference $after s, baseline $base2 s after the steps; day median $(day_median)"
expect "the reference did not learn the slowdown" "$after" '==' "$ref"
expect "the baseline did (it follows drift)" "$base2" '>' "$base"
check "daemon exits 0" daemon_stop
rec=$(grep ' path=/mnt/creep regime=idle ' /tmp/state/canary-baselines 2>/dev/null)
if [ -n "$rec" ]; then
	check "the state file holds the final reference and the daily medians" \
		eval 'echo "$rec" | grep -q " refdays=final .* days=[0-9]*:"'
else
	note "no persisted record (the mapping has no disk identity): the reference lived in memory"
fi
umount /mnt/creep
dmsetup remove creep
