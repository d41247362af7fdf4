# The canary on ext4 over dm-delay (20 ms per I/O), where every flush pays the delay: both regimes ~48 ms per probe (data write + flush), the idle median within 15 % of ioping -W at the same spacing and the busy median within 20 % of a back-to-back ioping -W -i 0, just before and after; device dm-N, every flush reaching nvme0n1.
# timeout: 240
need dmsetup
need ioping
modprobe dm-delay 2>/dev/null || skip "no dm-delay module"
D=nvme0n1
mkfs.ext4 -q -F /dev/$D || { fail mkfs "mkfs.ext4 /dev/$D"; exit 1; }
SZ=$(blockdev --getsz /dev/$D)
check "dm-delay 20 ms over $D" dmsetup create slow --table "0 $SZ delay /dev/$D 0 20"
DM=$(basename "$(readlink -f /dev/mapper/slow)")
mkdir -p /mnt/slow
check "ext4 mounted on /dev/mapper/slow ($DM)" mount /dev/mapper/slow /mnt/slow

before=$(ioping_median /mnt/slow 10 0.3)
before_b=$(ioping_median /mnt/slow 20 0)
note "ioping -W before: $before s every 0.3 s, $before_b s back-to-back"
daemon_start --no-collector.smart --canary.path=/mnt/slow --canary.interval=300ms \
	--diskstats.interval=300ms || exit 1
bursts() { scrape && num_cmp "$(canary /mnt/slow latency_seconds_count 'regime="busy"')" '>=' "$1"; }
check "20 canary cycles" wait_for 90 bursts 20
p50=$(canary /mnt/slow recent_seconds 'regime="idle",quantile="0.5"')
b50=$(canary /mnt/slow recent_seconds 'regime="busy",quantile="0.5"')
check_metric 'diskpulse_sync_target_up{path="/mnt/slow",mode="fdatasync"}' == 1
check "device label is $DM" [ "$(metric_label 'diskpulse_sync_target_up{path="/mnt/slow"}' device)" = "$DM" ]
check_metric 'diskpulse_sync_flush_ratio{path="/mnt/slow",mode="fdatasync"}' '>=' 0.9
check_metric 'diskpulse_sync_flush_ratio{path="/mnt/slow",mode="fdatasync"}' '<=' 1.5
# 20 ms for the data write, 20 ms for the flush, plus the guest's own time under TCG
expect "idle median $p50 s is two delayed I/Os" "$p50" '>=' 0.040
expect "idle median $p50 s is not three" "$p50" '<' 0.060
expect "busy median $b50 s is two delayed I/Os" "$b50" '>=' 0.040
expect "busy median $b50 s is not three" "$b50" '<' 0.060
check_metric 'diskpulse_sync_busy_idle_ratio{path="/mnt/slow",mode="fdatasync"}' '>=' 0.8
check_metric 'diskpulse_sync_busy_idle_ratio{path="/mnt/slow",mode="fdatasync"}' '<=' 1.25
daemon_stop
after=$(ioping_median /mnt/slow 10 0.3)
after_b=$(ioping_median /mnt/slow 20 0)
note "ioping -W after: $after s every 0.3 s, $after_b s back-to-back"
within "idle median within 15 % of ioping -W every 0.3 s" "$p50" "$(awk -v a="$before" -v b="$after" 'BEGIN { print (a + b) / 2 }')" 0.15
within "busy median within 20 % of ioping -W -i 0" "$b50" "$(awk -v a="$before_b" -v b="$after_b" 'BEGIN { print (a + b) / 2 }')" 0.20
umount /mnt/slow
dmsetup remove slow
