# Every save of the state file survives a power cut at any point: the writes of real saves (a daemon's migration of an old file, written at once, then resets of one target after another) are recorded with dm-log-writes under ext4; the log is replayed onto the filesystem as it was before them up to each flush, FUA write and mark (what the disk holds after a power cut there), and each replay is mounted (its journal recovered), read and checked with e2fsck: canary-baselines is always one of the versions written, whole (never torn, empty or missing), the versions come in the order written, and once a save has returned (its mark) its version is the one there.
# timeout: 600
# defaults: no
need dmsetup
need logreplay
need e2fsck
modprobe loop 2>/dev/null
modprobe dm-mod 2>/dev/null
modprobe dm-log-writes 2>/dev/null || skip "no dm-log-writes module"
[ -e /dev/loop-control ] || skip "no loop devices"

mkloop() { _l=$(losetup -f) && losetup "$_l" "$1" && echo "$_l"; }

# A version 2 file of 40 targets of one disk: about 6 KiB, several blocks, so that a torn file
# shows; migrated (written anew) by the first start.
STATE=/mnt/st/canary-baselines
make_v2() {
	echo "diskpulse-canary-baselines 2"
	for p in $(seq 1 40); do
		echo "disk=wwn:0x5000c500dead0001 mode=fdatasync path=/p$p regime=idle baseline=0.00$((p % 9 + 1))$p updates=900 updated=1702600000000000 warmup=-"
	done
}

truncate -s 16M /tmp/data.img && truncate -s 48M /tmp/log.img
DATA=$(mkloop /tmp/data.img) && LOG=$(mkloop /tmp/log.img) || { fail "loop devices" "losetup failed"; exit 1; }
mkfs.ext4 -q -F "$DATA" || { fail mkfs "mkfs.ext4 $DATA"; exit 1; }
mkdir -p /mnt/st /mnt/chk
mount "$DATA" /mnt/st || { fail mount "mount $DATA"; exit 1; }
make_v2 >"$STATE" && chmod 600 "$STATE"
umount /mnt/st
sync
# the filesystem as it was before the logged writes
dd if="$DATA" of=/tmp/base.img bs=1M 2>/dev/null || { fail base "cannot copy $DATA"; exit 1; }
check "dm-log-writes over the filesystem" dmsetup create lw --table "0 $(blockdev --getsz "$DATA") log-writes $DATA $LOG"
check "the logged filesystem mounted" mount /dev/mapper/lw /mnt/st
cp "$STATE" /tmp/v0

V=0
# save NAME CMD...: one save; its version kept, a mark in the log once it returned
save() {
	_n=$1
	shift
	if "$@" >/tmp/save.out 2>&1; then ok "save: $_n"; else fail "save: $_n" "$(tail -c 300 /tmp/save.out)"; fi
	V=$((V + 1))
	cp "$STATE" /tmp/v$V
	if cmp -s /tmp/v$V /tmp/v$((V - 1)); then fail "save: $_n" "the file did not change"; fi
	dmsetup message lw 0 mark "v$V"
}
save "a start migrates the old file" diskpulse --once --state.directory=/mnt/st --no-collector.smart \
	--no-collector.diskstats --no-collector.biolatency --canary.path=/tmp --canary.burst=0
for p in 1 2 3 4; do
	save "reset of /p$p" diskpulse --state.directory=/mnt/st --canary.reset-reference=/p$p
done
note "$(ls /mnt/st | tr '\n' ' ')"
# The control, after the last real save: a rewrite in place in two halves with a sync after
# each, as a careless writer would do; the replay must see the torn file between the two (the
# check can fail).
dmsetup message lw 0 mark control
V=$((V + 1))
tr 'p' 'q' <"$STATE" >/tmp/v$V
half=$(($(wc -c </tmp/v$V) / 1024))
dd if=/tmp/v$V of="$STATE" bs=512 count=$half conv=notrunc 2>/dev/null && sync
dd if=/tmp/v$V of="$STATE" bs=512 skip=$half seek=$half conv=notrunc 2>/dev/null && sync
check "the control rewrote the file" cmp -s "$STATE" /tmp/v$V
dmsetup message lw 0 mark "v$V"
umount /mnt/st
check "the log closed" dmsetup remove lw

logreplay list "$LOG" >/tmp/entries || { fail "log" "logreplay list failed"; exit 1; }
N=$(wc -l </tmp/entries)
NF=$(grep -c ' [^ ]*F[^ ]* ' /tmp/entries)
NU=$(grep -c ' [^ ]*U[^ ]* ' /tmp/entries)
NM=$(grep -c ' [^ ]*M[^ ]* ' /tmp/entries)
note "log: $N entries, $NF flushes, $NU FUA writes, $NM marks"
expect "a mark for every save, the control and the log's end" "$NM" == $((V + 2))

cp /tmp/base.img /tmp/rep.img
points=0
flushes=0
bad=0
unordered=0
lost=0
fsck_bad=0
torn=0
last=0
control=no
# Every prefix of the log: the disk after a power cut right after entry i reached it. In the
# log's order writes reach the disk no earlier than the flush that covers them (FUA ones at once),
# so the prefixes ending at a flush, a FUA write or a mark are exactly the states a power cut
# leaves; the others are more of them (some of a flush's writes there, not yet the rest).
while read -r i flags sector nr mark; do
	logreplay apply "$LOG" /tmp/rep.img "$i" $((i + 1)) || { fail replay "entry $i"; exit 1; }
	[ "$mark" = control ] && control=yes
	cp /tmp/rep.img /tmp/chk.img
	C=$(mkloop /tmp/chk.img) || { fail replay "losetup"; exit 1; }
	ver=none
	if mount "$C" /mnt/chk 2>/tmp/mount.err; then
		if [ -f /mnt/chk/canary-baselines ]; then
			for k in $(seq 0 $V); do cmp -s /mnt/chk/canary-baselines /tmp/v$k && ver=$k; done
			[ "$ver" = none ] && [ $control = no ] &&
				note "entry $i ($flags): canary-baselines of $(wc -c </mnt/chk/canary-baselines) bytes is no version written"
		else
			note "entry $i ($flags): canary-baselines missing"
		fi
		umount /mnt/chk
	else
		note "entry $i ($flags): mount failed: $(cat /tmp/mount.err)"
	fi
	e2fsck -fn "$C" >/tmp/fsck.out 2>&1 || { fsck_bad=$((fsck_bad + 1)); note "entry $i: e2fsck: $(tail -3 /tmp/fsck.out)"; }
	losetup -d "$C"
	points=$((points + 1))
	case $flags in *F* | *U* | *M*) flushes=$((flushes + 1)) ;; esac
	if [ "$ver" = none ]; then
		if [ $control = yes ]; then torn=$((torn + 1)); else bad=$((bad + 1)); fi
	else
		[ "$ver" -lt "$last" ] && { unordered=$((unordered + 1)); note "entry $i: version $ver after $last"; }
		last=$ver
		case $mark in v[0-9]*) [ "$ver" = "${mark#v}" ] || { lost=$((lost + 1)); note "mark $mark: version $ver on the disk"; } ;; esac
	fi
done </tmp/entries
note "crash points checked: $points (every log entry; $flushes of them at a flush, FUA write or mark), $torn torn in the control"
expect "crash points checked" "$points" '>=' 100
expect "crash points at a flush, FUA write or mark" "$flushes" '>=' 40
expect "every crash point of the saves: one whole version of canary-baselines" "$bad" == 0
expect "versions in the order written" "$unordered" == 0
expect "every save durable once it returned (its mark)" "$lost" == 0
expect "e2fsck clean at every crash point" "$fsck_bad" == 0
expect "the control's torn file is seen (the check can fail)" "$torn" '>=' 1
expect "the last crash point holds the last version" "$last" == "$V"
