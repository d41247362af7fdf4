# SIGTERM within a second while the canary probes a slow disk: the state directory (the default canary target, with the baselines file) on ext4 over dm-delay 200 ms per I/O, where every write and fsync of the state file costs a second or more; stopped at several points of its cycles, the daemon writes nothing at shutdown that is already on disk.
# timeout: 240
need dmsetup
modprobe dm-delay 2>/dev/null || skip "no dm-delay module"
D=nvme0n1
mkfs.ext4 -q -F /dev/$D || { fail mkfs "mkfs.ext4 /dev/$D"; exit 1; }
check "dm-delay 200 ms over $D" dmsetup create slow --table "0 $(blockdev --getsz /dev/$D) delay /dev/$D 0 200"
mkdir -p /mnt/st
check "ext4 mounted on /dev/mapper/slow" mount /dev/mapper/slow /mnt/st
STATE=/mnt/st/canary-baselines
FLAGS="--no-collector.smart --state.directory=/mnt/st --canary.interval=1s --diskstats.interval=500ms"
cycles() { scrape && num_cmp "$(canary /mnt/st latency_seconds_count 'regime="busy"')" '>=' "$1"; }
# stop_daemon: SIGTERM, then polls every 20 ms until the process is gone (exited: a zombie or
# reaped); sets TOOK to the seconds it took and returns the exit status.
stop_daemon() {
	_t0=$(now)
	kill -TERM "$DAEMON_PID"
	_n=0
	while [ $_n -lt 500 ] && [ -e /proc/$DAEMON_PID ] && ! grep -q '^[0-9]* (.*) Z' /proc/$DAEMON_PID/stat 2>/dev/null; do
		sleep 0.02
		_n=$((_n + 1))
	done
	_t1=$(now)
	wait "$DAEMON_PID"
	_rc=$?
	DAEMON_PID=
	TOOK=$(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.2f\n", b - a }')
	return $_rc
}

# The first run records the disk in the state file (a save from the prober, after its first probe).
daemon_start $FLAGS || exit 1
check "first cycle done" wait_for 60 cycles 1
check "the disk is recorded while running" wait_for 20 grep -q ' path=/mnt/st ' "$STATE"
stop_daemon
expect "exit status after SIGTERM" $? == 0
expect "SIGTERM took $TOOK s" "$TOOK" '<' 1
ino=$(stat -c %i "$STATE")
for k in 1 2 3; do
	daemon_start $FLAGS || exit 1
	check "run $k: a cycle on the slow disk" wait_for 60 cycles 1
	note "run $k: idle $(canary /mnt/st recent_seconds 'regime="idle",quantile="0.5"') s, busy $(canary /mnt/st recent_seconds 'regime="busy",quantile="0.5"') s"
	sleep "0.$((k * 3))"
	stop_daemon
	expect "run $k: exit status after SIGTERM" $? == 0
	expect "run $k: SIGTERM took $TOOK s (a probe in flight may take 0.4 s to return)" "$TOOK" '<' 1
	expect "run $k: the state file was not rewritten (inode)" "$(stat -c %i "$STATE")" == "$ino"
done
umount /mnt/st
dmsetup remove slow
