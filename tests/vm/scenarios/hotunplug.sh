# A hot-unplugged NVMe controller leaves the metrics within seconds; other disks and the daemon carry on.
# disk: hot 64M
# disk: hot2 64M
# qemu: -device nvme,id=nvmehot,serial=DPHOT1,drive=hot
# timeout: 150
hot=$(nvme_by_serial DPHOT1) stay=$(nvme_by_serial DPNVME0)
check "hot-pluggable NVMe present ($hot)" [ -n "$hot" ]
check "default NVMe present ($stay)" [ -n "$stay" ]
[ -n "$hot" ] && [ -n "$stay" ] || exit 1
daemon_start --diskstats.interval=1s --diskstats.window=5s --log.level=debug || exit 1
check_metric "diskpulse_disk_info{device=\"$hot\"}" present
check_metric diskpulse_disk_devices == 3
# Give the doomed device counters that a daemon wrongly carrying them over would show later.
dd if=/dev/urandom of=/dev/$hot bs=64k count=64 oflag=direct 2>/dev/null

# Unplug: the guest ejects the controller (ACPI), QEMU confirms, the series vanish.
check "device_del accepted" eval "qmp '{\"execute\":\"device_del\",\"arguments\":{\"id\":\"nvmehot\"}}' >/dev/null"
check "kernel removed $hot" wait_for 20 block_absent "$hot"
check "QEMU reports DEVICE_DELETED" eval 'qmp_event DEVICE_DELETED 20 | grep -q nvmehot'
gone() { scrape && [ "$(label_count "device=\"$hot\"")" = 0 ]; }
t0=$(now)
check "series of $hot gone within 5 s" wait_for 5 gone
note "series gone $(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }') s after the kernel removed $hot"
check_metric diskpulse_disk_devices == 2
check_metric "diskpulse_disk_info{device=\"$stay\"}" present
check_metric 'diskpulse_disk_info{device="sda"}' present

# The remaining disks keep being sampled, not just served from a stale snapshot.
w0=$(metric "diskpulse_disk_writes_completed_total{device=\"$stay\"}")
dd if=/dev/urandom of=/dev/$stay bs=64k count=16 oflag=direct 2>/dev/null
moved() { scrape && num_cmp "$(metric "diskpulse_disk_writes_completed_total{device=\"$stay\"}")" '>=' $((w0 + 16)); }
check "$stay counters still move" wait_for 5 moved
check "daemon alive" daemon_alive
check "/-/healthy answers" http_get /-/healthy /tmp/healthy

# Plug a new controller in: it appears without a restart; a reused kernel name starts from zero
# counters without negative rates.
check "device_add accepted" eval "qmp '{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"nvme\",\"id\":\"nvmehot2\",\"serial\":\"DPHOT2\",\"drive\":\"hot2\"}}' >/dev/null"
check "kernel added the new controller" wait_for 20 nvme_by_serial DPHOT2
new=$(nvme_by_serial DPHOT2)
appeared() { scrape && metric "diskpulse_disk_info{device=\"$new\"}" >/dev/null; }
check "series of $new appear within 5 s" wait_for 5 appeared
majmin=$(cat /sys/block/$new/dev 2>/dev/null)
if [ -e "/run/udev/data/b$majmin" ]; then
	wait_for 5 eval 'scrape && [ "$(metric_label "diskpulse_disk_info{device=\"$new\"}" serial)" = DPHOT2 ]'
	check_metric "diskpulse_disk_info{device=\"$new\",serial=\"DPHOT2\"}" present
fi
dd if=/dev/urandom of=/dev/$new bs=64k count=16 oflag=direct 2>/dev/null
sleep 2
scrape
check_metric diskpulse_disk_devices == 3
check_metric "diskpulse_disk_writes_completed_total{device=\"$new\"}" '>=' 16
check_metric "diskpulse_disk_writes_completed_total{device=\"$new\"}" '<=' "$(diskstat $new 5)"
for g in write_iops write_bytes_per_second read_iops read_bytes_per_second utilization_ratio queue_depth; do
	check_metric "diskpulse_disk_$g{device=\"$new\"}" '>=' 0
done
check_exposition "after the unplug and a new disk"
daemon_stop
expect "exit status after SIGTERM" $? == 0
