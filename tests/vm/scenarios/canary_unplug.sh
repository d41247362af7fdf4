# The disk under a canary target is hot-unplugged: the probes fail with an errno and the target goes down, while the other target, the diskstats series and the scrapes carry on and SIGTERM still exits at once.
# disk: hot 64M
# qemu: -device nvme,id=nvmehot,serial=DPHOT1,drive=hot
# timeout: 150
hot=$(nvme_by_serial DPHOT1) stay=$(nvme_by_serial DPNVME0)
check "hot-pluggable NVMe present ($hot)" [ -n "$hot" ] && [ -n "$stay" ] || exit 1
mkfs.ext4 -q -F /dev/$hot && mkfs.ext4 -q -F /dev/$stay || { fail mkfs "mkfs.ext4"; exit 1; }
mkdir -p /mnt/hot /mnt/stay
mount /dev/$hot /mnt/hot && mount /dev/$stay /mnt/stay || { fail mount "mount"; exit 1; }
daemon_start --no-collector.smart --canary.path=/mnt/hot --canary.path=/mnt/stay --canary.interval=300ms \
	--canary.timeout=2s --diskstats.interval=300ms || exit 1
both() { canary_up /mnt/hot && canary_up /mnt/stay; }
check "both targets up" wait_for 30 both

check "device_del accepted" eval "qmp '{\"execute\":\"device_del\",\"arguments\":{\"id\":\"nvmehot\"}}' >/dev/null"
check "kernel removed $hot" wait_for 20 block_absent "$hot"
down() { scrape && [ "$(canary /mnt/hot target_up)" = 0 ]; }
check "the unplugged disk's target goes down" wait_for 20 down
errs=$(grep '^diskpulse_sync_errors_total{path="/mnt/hot"' "$METRICS" | sed 's/.*errno="\([^"]*\)".*/\1/' | tr '\n' ' ')
check "its failures are counted by errno ($errs)" [ -n "$errs" ]
check_metric 'diskpulse_sync_stuck{path="/mnt/hot",mode="fdatasync"}' == 0
n=$(canary /mnt/stay probes_total)
moved() { scrape && num_cmp "$(canary /mnt/stay probes_total)" '>=' $((n + 5)) && [ "$(canary /mnt/stay target_up)" = 1 ]; }
check "the other target keeps probing" wait_for 10 moved
# Only the canary's series of the gone target keep the disk it was on (one incident, one
# series, the device named); every other series of that disk goes with it.
others() { grep -v '^diskpulse_sync_' "$METRICS" | label_count "device=\"$hot\"" -; }
gone() { scrape && [ "$(others)" = 0 ]; }
check "the unplugged disk's diskstats series are gone" wait_for 10 gone
check_metric "diskpulse_sync_target_up{path=\"/mnt/hot\",device=\"$hot\"}" == 0
check "/-/healthy answers" http_get /-/healthy /tmp/healthy
t0=$(now)
daemon_stop
expect "exit status after SIGTERM" $? == 0
expect "SIGTERM took under 1 s (the harness polls every 0.2 s)" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" '<' 1
umount -l /mnt/hot 2>/dev/null
