# Harness self-test without the daemon: disks, guest tools, metric helpers and QMP fault injection.
# timeout: 90

# The disks the host configured, with their identities.
check "nvme0n1 present" block_present nvme0n1
check "sda present" block_present sda
check "nvme0n1 found by serial" [ "$(nvme_by_serial DPNVME0)" = nvme0n1 ]
check "sda rotational" [ "$(cat /sys/block/sda/queue/rotational)" = 1 ]
check "nvme0n1 not rotational" [ "$(cat /sys/block/nvme0n1/queue/rotational)" = 0 ]
if [ -x /lib/systemd/systemd-udevd ]; then
	check "udev data for nvme0n1" grep -q '^E:ID_SERIAL_SHORT=DPNVME0$' "/run/udev/data/b$(cat /sys/block/nvme0n1/dev)"
	check "udev data for sda" grep -q '^E:ID_SERIAL_SHORT=DPSATA0$' "/run/udev/data/b$(cat /sys/block/sda/dev)"
fi

# /proc/diskstats counts direct writes on both disks (what the basic scenario relies on).
for dev in nvme0n1 sda; do
	writes=$(diskstat $dev 5) sectors=$(diskstat $dev 7)
	dd if=/dev/urandom of=/dev/$dev bs=64k count=32 oflag=direct 2>/dev/null
	expect "$dev writes completed +32" "$(diskstat $dev 5)" '>=' $((writes + 32))
	expect "$dev sectors written +4096" "$(diskstat $dev 7)" '>=' $((sectors + 4096))
done

# smartctl answers for both protocols.
smartctl -j -a /dev/nvme0 >/tmp/nvme.json
check "smartctl nvme serial" grep -q '"serial_number": "DPNVME0"' /tmp/nvme.json
check "smartctl nvme no critical warning" grep -q '"critical_warning": 0,' /tmp/nvme.json
check "smartctl ata health" smartctl -q silent -H /dev/sda
check "smartctl ata rotation" eval 'smartctl -i /dev/sda | grep -q "Rotation Rate: *7200 rpm"'

# QMP round trips: a query, an hmp command, a rejected value, and a fault injection.
check "qmp query-status running" eval "qmp '{\"execute\":\"query-status\"}' | grep -q '\"status\": \"running\"'"
check "hmp info block" eval 'hmp info block | grep -q "^nvme0disk"'
check "qmp error is reported" eval "! qmp '{\"execute\":\"no-such-command\"}' >/dev/null"
qmp '{"execute":"qom-set","arguments":{"path":"/machine/peripheral/nvme0","property":"smart_critical_warning","value":4}}' >/dev/null
smartctl -j -a /dev/nvme0 >/tmp/nvme.json
check "qom-set critical warning seen by smartctl" grep -q '"critical_warning": 4,' /tmp/nvme.json

# Guest tools: ext4 on sda, a device-mapper target, scsi_debug with sdparm.
mkfs.ext4 -q -F /dev/sda && mount -t ext4 /dev/sda /mnt && echo hello >/mnt/file && sync && umount /mnt
check "mkfs.ext4 and mount" [ $? = 0 ]
modprobe dm-mod
echo "0 2048 linear /dev/nvme0n1 0" | dmsetup create vmtest-lin
check "dmsetup linear target" block_present dm-0
dmsetup remove vmtest-lin
modprobe scsi_debug && wait_for 10 block_present sdb
check "sdparm reads scsi_debug IE page" eval 'sdparm --page=ie /dev/sdb | grep -q TEST'

# The metric helpers on a known exposition served like the daemon would.
mkdir -p /tmp/www
cat >/tmp/www/metrics <<'EOF'
# HELP diskpulse_disk_info Device identity.
# TYPE diskpulse_disk_info gauge
diskpulse_disk_info{device="sda",model="QEMU HARDDISK",serial="DPSATA0",rotational="1"} 1
diskpulse_disk_info{device="nvme0n1",model="QEMU NVMe Ctrl",serial="DPNVME0",rotational="0"} 1
diskpulse_disk_devices 2
diskpulse_disk_devices_extra 7
diskpulse_disk_written_bytes_total{device="sda"} 1.048576e+06
diskpulse_disk_written_bytes_total{device="sdaa"} 5
diskpulse_disk_write_iops{device="sda"} NaN
EOF
httpd -p "$DAEMON_ADDR" -h /tmp/www
check "scrape" wait_for 5 scrape
check_metric diskpulse_disk_devices == 2
check_metric 'diskpulse_disk_written_bytes_total{device="sda"}' == 1048576
check_metric 'diskpulse_disk_info{serial="DPSATA0",device="sda"}' present
check_metric 'diskpulse_disk_info{device="sdb"}' absent
check "metric_count" [ "$(metric_count diskpulse_disk_info)" = 2 ]
check "metric_label with spaces" [ "$(metric_label 'diskpulse_disk_info{device="nvme0n1"}' model)" = "QEMU NVMe Ctrl" ]
check "NaN compares false" eval '! num_cmp "$(metric "diskpulse_disk_write_iops{device=\"sda\"}")" ">=" 0'
check "comparisons can fail" eval '! num_cmp 3 ">" 4 && ! num_cmp "" "==" 0 && num_cmp 1e3 "==" 1000'
