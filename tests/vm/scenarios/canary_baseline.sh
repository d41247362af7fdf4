# The canary baseline is kept across restarts in the state directory, keyed by the disk: the same filesystem on a disk with another serial starts afresh, the original disk under the same path finds its baseline again, and a slower disk under a known baseline shows as degraded.
# disk: other 64M
# qemu: -device nvme,id=nvmeother,serial=DPOTHER,drive=other
# timeout: 240
need dmsetup
A=$(nvme_by_serial DPNVME0) B=$(nvme_by_serial DPOTHER)
check "two NVMe disks ($A, $B)" [ -n "$A" ] && [ -n "$B" ] || exit 1
STATE=/tmp/state/canary-baselines
FLAGS="--no-collector.smart --canary.path=/mnt/db --canary.interval=300ms --diskstats.interval=300ms"
mkfs.ext4 -q -F /dev/$A || { fail mkfs "mkfs.ext4 /dev/$A"; exit 1; }
mkdir -p /mnt/db
mount /dev/$A /mnt/db
# record KEY: the state file's idle line for disk KEY and /mnt/db (version 1 lines have no regime).
record() { grep " mode=fdatasync path=/mnt/db " "$STATE" | grep -v " regime=busy " | grep "^disk=$1 "; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
# run_daemon N: starts the daemon and waits for N probes.
run_daemon() { daemon_start $FLAGS && check "$1 probes" wait_for 30 canary_probes_at_least /mnt/db "$1"; }
has_baseline() { scrape && [ "$(canary /mnt/db baseline_seconds 'regime="idle"')" = "$1" ]; }

# 1. The first run learns nothing yet (the warm-up is a day of probing) but records the disk's identity.
run_daemon 3
check_metric 'diskpulse_sync_baseline_seconds{path="/mnt/db"}' absent
check "daemon exits 0" daemon_stop
KA=$(grep ' path=/mnt/db ' "$STATE" | sed -n 's/^disk=\([^ ]*\) .*/\1/p' | sort -u)
check "state file keys /mnt/db by $A's identity ($KA)" [ -n "$KA" ]
check "the identity is the disk's (WWN or serial), not its name" eval 'case $KA in wwn:*|serial:*) ! echo "$KA" | grep -q nvme0n1 ;; *) false ;; esac'

# 2. A learned baseline (as a week of hourly medians would leave it): 1.5 ms, in a version 1 file
#    (before regimes: read as the idle baseline).
{
	echo "diskpulse-canary-baselines 1"
	echo "disk=$KA mode=fdatasync path=/mnt/db baseline=0.0015 updates=168 updated=$(date +%s)000000 warmup=-"
} >"$STATE"
run_daemon 3
check "baseline 1.5 ms restored" wait_for 10 has_baseline 0.0015
ratio=$(canary /mnt/db degradation_ratio 'regime="idle"') p50=$(canary /mnt/db recent_seconds 'regime="idle",quantile="0.5"')
within "degradation ratio = recent median / baseline" "$ratio" "$(awk -v m="$p50" 'BEGIN { print m / 0.0015 }')" 0.001
check "daemon exits 0" daemon_stop
check "the stop kept the baseline in the state file" [ "$(record "$KA" | field baseline)" = 0.0015 ]

# 3. Restart: still there.
run_daemon 2
check "restart keeps the baseline" wait_for 10 has_baseline 0.0015
check "daemon exits 0" daemon_stop

# 4. The same filesystem on another disk (another serial) under the same path: a fresh start.
umount /mnt/db
check "filesystem copied to $B" dd if=/dev/$A of=/dev/$B bs=1M 2>/dev/null
check "$B mounted on /mnt/db" mount /dev/$B /mnt/db
run_daemon 3
check "device label $B" [ "$(metric_label 'diskpulse_sync_target_up{path="/mnt/db"}' device)" = "$B" ]
check_metric 'diskpulse_sync_baseline_seconds{path="/mnt/db"}' absent
check_metric 'diskpulse_sync_degradation_ratio{path="/mnt/db"}' absent
check "daemon exits 0" daemon_stop
KB=$(grep ' path=/mnt/db ' "$STATE" | sed -n 's/^disk=\([^ ]*\) .*/\1/p' | sort -u | grep -v -x -F "$KA")
check "a second record for $B's identity ($KB)" [ -n "$KB" ] && [ "$KB" != "$KA" ]
check "$B's record is in warm-up" [ "$(record "$KB" | field baseline)" = 0 ]
check "$A's record is kept" [ "$(record "$KA" | field baseline)" = 0.0015 ]

# 5. The original disk again, now behind dm-delay (its name changes to dm-N; the identity is the
#    disk's below): the baseline is found and the 20 ms per I/O show as degraded.
umount /mnt/db
modprobe dm-delay 2>/dev/null || skip "no dm-delay module"
check "dm-delay 20 ms over $A" dmsetup create slow --table "0 $(blockdev --getsz /dev/$A) delay /dev/$A 0 20"
check "mounted through dm-delay" mount /dev/mapper/slow /mnt/db
run_daemon 5
check "the original disk finds its baseline" wait_for 10 has_baseline 0.0015
check_metric 'diskpulse_sync_degradation_ratio{path="/mnt/db",regime="idle"}' '>' 10
note "degradation ratio behind dm-delay: $(canary /mnt/db degradation_ratio 'regime="idle"')"
check "daemon exits 0" daemon_stop
umount /mnt/db
dmsetup remove slow
