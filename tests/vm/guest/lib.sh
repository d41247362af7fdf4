# Guest helpers for the diskpulse VM scenarios: results and QMP over the host channel, daemon and metrics.
# Sourced by /init; scenarios run in a subshell of it and use these functions directly.

VM_CHAN=/dev/ttyS1          # second serial port, served by vmtest.py on the host
VM_STATE=/tmp/vmtest
DAEMON=/bin/diskpulse
DAEMON_ADDR=127.0.0.1:9477
DAEMON_LISTEN=$DAEMON_ADDR  # all addresses once the network is up (the host forwards to it)
DAEMON_LOG=/tmp/diskpulse.log
DAEMON_PID=
METRICS=/tmp/metrics        # the last scrape
VM_TAB=$(printf '\t')

# --- host channel: one request line out, one answer line back ---------------------------------

vm_open() {
	mkdir -p "$VM_STATE"
	stty -F "$VM_CHAN" 115200 raw -echo
	exec 3<>"$VM_CHAN"
	vm_send hello "$(now)"
}

# vm_send VERB ARGS...: newlines in ARGS become spaces; the host's answer lands in $VM_REPLY.
vm_send() {
	printf '%s' "$*" | tr '\r\n' '  ' >&3
	printf '\n' >&3
	VM_REPLY=
	IFS= read -r -t 120 VM_REPLY <&3
}

vm_finish() {
	if [ -e "$VM_STATE/failed" ] && [ -s "$DAEMON_LOG" ]; then
		echo "----- $DAEMON_LOG (last 40 lines) -----"
		tail -n 40 "$DAEMON_LOG"
	fi
	vm_send done "$1"
}

# --- results -------------------------------------------------------------------------------

note() { echo "vmtest: $*"; }
# ok NAME / fail NAME WHY: one result each (NAME may contain spaces; a tab separates it from WHY).
ok() { echo "ok $1"; vm_send "ok $1"; }
fail() { echo "FAIL $1: ${2:-}"; touch "$VM_STATE/failed"; vm_send "fail $1$VM_TAB${2:-}"; }
# skip REASON: the whole scenario is skipped (exit code 77 on the host).
skip() { echo "SKIP $*"; vm_send "skip scenario$VM_TAB$*"; exit 77; }
# check NAME COMMAND...: ok when COMMAND succeeds.
check() {
	_name=$1
	shift
	if "$@"; then ok "$_name"; else fail "$_name" "failed: $*"; fi
}
# expect NAME ACTUAL OP EXPECTED: numeric comparison, OP one of == != > >= < <=.
expect() {
	if num_cmp "$2" "$3" "$4"; then ok "$1"; else fail "$1" "got '$2', expected $3 $4"; fi
}
num_cmp() {
	awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
		num = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
		if (a !~ num || b !~ num) exit 1
		a += 0; b += 0
		if (op == "==") r = a == b; else if (op == "!=") r = a != b
		else if (op == ">") r = a > b; else if (op == ">=") r = a >= b
		else if (op == "<") r = a < b; else if (op == "<=") r = a <= b
		else r = 0
		exit !r }'
}
need() { command -v "$1" >/dev/null || skip "$1 is not in the initramfs"; }

# --- time and polling ------------------------------------------------------------------------

now() { cut -d' ' -f1 /proc/uptime; }
# wait_for SECONDS COMMAND...: poll every 0.2 s until COMMAND succeeds; 1 on timeout.
wait_for() {
	_end=$(awk -v t="$1" '{ print $1 + t }' /proc/uptime)
	shift
	until "$@"; do
		num_cmp "$(now)" '>=' "$_end" && return 1
		sleep 0.2
	done
}

# --- QMP, executed by the host ---------------------------------------------------------------

# qmp JSON: prints the one-line reply; succeeds when it holds "return".
qmp() {
	vm_send qmp "$1"
	printf '%s\n' "$VM_REPLY"
	case $VM_REPLY in *'"return"'*) return 0 ;; esac
	return 1
}
# qmp_event NAME [SECONDS]: waits for the next QMP event NAME (default 10 s), prints it.
qmp_event() {
	vm_send event "$1" "${2:-10}"
	printf '%s\n' "$VM_REPLY"
	case $VM_REPLY in *'"event"'*) return 0 ;; esac
	return 1
}
# hmp COMMAND: human monitor command (no double quotes in COMMAND); prints its text output.
hmp() {
	qmp "{\"execute\":\"human-monitor-command\",\"arguments\":{\"command-line\":\"$*\"}}" >"$VM_STATE/hmp" || {
		cat "$VM_STATE/hmp"
		return 1
	}
	sed -e 's/^{"return": "//' -e 's/"}$//' -e 's/\\r\\n/\n/g' -e 's/\\"/"/g' "$VM_STATE/hmp"
}

# --- the network and the host's Prometheus (scenario header "# prometheus:") ------------------

# net_up: QEMU's user network on eth0 (10.0.2.15); the host forwards a port of its own to the
# daemon's 9477 there, and its Prometheus scrapes that.
net_up() {
	modprobe virtio_pci && modprobe virtio_net && wait_for 10 test -e /sys/class/net/eth0 &&
		ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 &&
		ip route add default via 10.0.2.2 && DAEMON_LISTEN=0.0.0.0:9477
}
# prom EXPR: an instant query of the host's Prometheus; prints the result vector as JSON ([]
# when empty, {"error": ...} when the query failed).
prom() {
	vm_send prom "$1"
	printf '%s\n' "$VM_REPLY"
}
# prom_has EXPR: the query returns at least one series.
prom_has() {
	case $(prom "$1") in '['*'"metric"'*) return 0 ;; esac
	return 1
}
# firing ALERTNAME [MATCHERS]: the alert fires in the host's Prometheus (MATCHERS: more label
# matchers, comma-separated, e.g. path="/mnt/x").
firing() { prom_has "ALERTS{alertstate=\"firing\",alertname=\"$1\"${2:+,$2}}"; }
# notifications: what reached the Alertmanager's receivers (header "# alertmanager: yes"), one
# line each: RECEIVER STATUS ALERT@DEVICE,ALERT@DEVICE...; nothing when none did.
notifications() {
	vm_send notifications
	[ "$VM_REPLY" = none ] || printf '%s\n' "$VM_REPLY" | tr ';' '\n'
}
# alerts_seen [RANGE]: the alert names that were pending or firing within RANGE (default 1h).
alerts_seen() {
	prom "count by (alertname, alertstate) (count_over_time(ALERTS[${1:-1h}]))" |
		grep -o '"alertname":"[^"]*","alertstate":"[^"]*"' | sed 's/"alertname":"\([^"]*\)","alertstate":"\([^"]*\)"/\1 (\2)/' |
		sort -u | tr '\n' ' '
}

# --- the runbook's commands, checked by the host ----------------------------------------------

# runbook SECTION SITUATION [NAME=VALUE...]: the host runs the commands of the docs/runbook.md
# section SECTION here, one at a time, its placeholders (DEV, SIBLING...) replaced by the VALUEs (a
# list comma-separated), and checks what each shows against what tests/runbook/guest.py expects
# of it in SITUATION; each check is a result of the scenario. A command runs as root with bash,
# the Debian tools the runbook names first on PATH (RUNBOOK_BIN), stdin empty. Non-zero when a
# check failed. (Under a root's own systemd, vmtest.root=, the root's tools come first instead.)
RUNBOOK_BIN=/usr/lib/vmtest/runbook/bin
runbook() {
	_rb_section=$1
	_rb_path=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
	[ -d "$RUNBOOK_BIN" ] && _rb_path=$RUNBOOK_BIN:$_rb_path
	# GNU timeout (exit status 124 when the command ran out of time), found on that PATH
	for _rb_d in $(echo "$_rb_path" | tr : ' '); do
		[ -x "$_rb_d/timeout" ] && _rb_timeout=$_rb_d/timeout && break
	done
	vm_send runbook "$@"
	while :; do
		case $VM_REPLY in
		"cmd "*)
			set -- $VM_REPLY
			printf '%s' "$3" | base64 -d >"$VM_STATE/rb.sh"
			PATH=$_rb_path "$_rb_timeout" -k 5 "$2" bash "$VM_STATE/rb.sh" </dev/null >"$VM_STATE/rb.out" 2>&1 3>&-
			_rb_rc=$?
			vm_send rbresult "$_rb_rc $(head -c 65536 "$VM_STATE/rb.out" | base64 -w 0)"
			;;
		"end 0") return 0 ;;
		"end "*) return 1 ;;
		*)
			fail "runbook $_rb_section" "the host answered '$VM_REPLY'"
			return 1
			;;
		esac
	done
}

# --- devices ---------------------------------------------------------------------------------

block_present() { [ -e "/sys/block/$1" ]; }
block_absent() { [ ! -e "/sys/block/$1" ]; }
# nvme_by_serial SERIAL: prints the namespace block device (nvmeXnY) of the controller with SERIAL.
nvme_by_serial() {
	for _c in /sys/class/nvme/nvme*; do
		[ "$(tr -d ' ' <"$_c/serial" 2>/dev/null)" = "$1" ] || continue
		for _b in /sys/block/nvme*; do
			case "$(readlink -f "$_b")" in "$(readlink -f "$_c")"/*)
				basename "$_b"
				return 0
				;;
			esac
		done
	done
	return 1
}
# diskstat DEV N: field N of DEV in /proc/diskstats (1 reads completed ... 5 writes completed,
# 7 sectors written, 9 in flight; see FACTS.md).
diskstat() { awk -v d="$1" -v n="$2" '$3 == d { print $(n + 3); f = 1 } END { exit !f }' /proc/diskstats; }

# --- the daemon ------------------------------------------------------------------------------

# kernel_before MAJOR MINOR: true when the guest's kernel is older than MAJOR.MINOR.
kernel_before() {
	uname -r | awk -F'[.-]' -v M="$1" -v m="$2" '{ exit !($1 < M || ($1 == M && $2 < m)) }'
}
daemon_supports() { "$DAEMON" --help 2>&1 | grep -q -e "$1"; }
daemon_alive() { [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; }
# daemon_start [FLAGS...]: starts $DAEMON on $DAEMON_ADDR with state in /tmp/state and waits for
# /metrics; reports ok/fail "daemon-start" and returns non-zero when it did not come up.
daemon_start() {
	[ -x "$DAEMON" ] || skip "no diskpulse binary in the initramfs (build it with --daemon)"
	mkdir -p /tmp/state
	echo "+ $DAEMON $*" >>"$DAEMON_LOG"
	"$DAEMON" --state.directory=/tmp/state --web.listen-address="$DAEMON_LISTEN" "$@" >>"$DAEMON_LOG" 2>&1 3>&- &
	DAEMON_PID=$!
	if wait_for 30 _daemon_up; then
		ok daemon-start
	else
		fail daemon-start "no /metrics on $DAEMON_ADDR within 30 s (alive: $(daemon_alive && echo yes || echo no))"
		return 1
	fi
}
_daemon_up() { daemon_alive && scrape; }
# daemon_stop: SIGTERM, wait up to 5 s (then SIGKILL); returns the daemon's exit status.
daemon_stop() {
	daemon_alive || return 1
	kill -TERM "$DAEMON_PID"
	wait_for 5 eval '! daemon_alive' || kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID"
	_rc=$?
	DAEMON_PID=
	return $_rc
}

# --- metrics ---------------------------------------------------------------------------------

# http_get PATH FILE: GET http://$DAEMON_ADDR/PATH into FILE (kept only on success).
# (busybox-static 1.35's wget -T segfaults, hence timeout)
http_get() {
	rm -f "$2.new"
	timeout 10 wget -q -O "$2.new" "http://$DAEMON_ADDR$1" 2>/dev/null && mv "$2.new" "$2"
}
# scrape: GET /metrics into $METRICS, which the metric helpers read.
scrape() { http_get /metrics "$METRICS"; }
# check_exposition [WHAT]: scrapes, and the host checks the page with the strict exposition
# checker (tests/tools/expocheck.py): one ok/fail result "exposition WHAT".
check_exposition() {
	if ! scrape; then
		fail "exposition ${1:-}" "no page"
		return 1
	fi
	vm_send expocheck "$(gzip -c "$METRICS" | base64 -w 0)"
	case "$VM_REPLY" in
	"ok "*) set -- "${1:-}" $VM_REPLY
		ok "exposition $1: the strict check passes ($3 samples, $4 families)" ;;
	*) fail "exposition ${1:-}" "${VM_REPLY:-no answer from the host}" ;;
	esac
}
# metric 'NAME{label="value",...}' [FILE]: prints the value of the first sample of NAME that has
# all the given labels (others may be present) in the last scrape; non-zero when there is none.
metric() { _metric_awk 0 "$1" "${2:-$METRICS}"; }
# metric_count 'NAME{...}' [FILE]: number of matching samples.
metric_count() { _metric_awk 1 "$1" "${2:-$METRICS}"; }
# metric_label 'NAME{...}' LABEL [FILE]: prints LABEL's value on the first matching sample.
metric_label() { _metric_awk 0 "$1" "${3:-$METRICS}" "$2"; }
_metric_awk() {
	awk -v count="$1" -v sel="$2" -v want_label="${4:-}" '
	BEGIN {
		b = index(sel, "{"); name = b ? substr(sel, 1, b - 1) : sel
		nwant = 0
		if (b) { body = substr(sel, b + 1); sub(/}$/, "", body); nwant = split(body, want, ",") }
	}
	/^#/ || substr($0, 1, length(name)) != name { next }
	{
		c = substr($0, length(name) + 1, 1)
		if (c == "{") {
			e = 0; s = $0
			while ((i = index(substr(s, e + 1), "}")) > 0) e += i
			labels = "," substr($0, length(name) + 2, e - length(name) - 2) ","
			rest = substr($0, e + 1)
		} else if (c == " ") { labels = ","; rest = substr($0, length(name) + 1) }
		else next
		for (i = 1; i <= nwant; i++) if (index(labels, "," want[i] ",") == 0) next
		n++
		if (count) next
		if (want_label != "") {
			p = index(labels, "," want_label "=\"")
			if (!p) exit 1
			v = substr(labels, p + length(want_label) + 3); print substr(v, 1, index(v, "\"") - 1)
		} else { split(rest, f, " "); print f[1] }
		exit 0
	}
	END { if (count) print n + 0; else if (!n) exit 1 }' "$3"
}
# label_count 'LABEL="VALUE"' [FILE]: number of samples of any metric that carry this label.
label_count() { grep -v '^#' "${2:-$METRICS}" | grep -c -e "[{,]$1[,}]"; }
# check_metric 'NAME{...}' OP [VALUE]: ok/fail on the last scrape; OP is present, absent or a
# numeric comparison (== != > >= < <=) with VALUE.
check_metric() {
	case $2 in
	present) if metric "$1" >/dev/null; then ok "$1 present"; else fail "$1 present" "no such sample"; fi ;;
	absent)
		_n=$(metric_count "$1")
		if [ "$_n" = 0 ]; then ok "$1 absent"; else fail "$1 absent" "$_n samples match"; fi
		;;
	*)
		_v=$(metric "$1") || { fail "$1 $2 $3" "no such sample"; return; }
		expect "$1 $2 $3" "$_v" "$2" "$3"
		;;
	esac
}

# --- the sync canary -------------------------------------------------------------------------

# ioping_median DIR COUNT [INTERVAL]: median in seconds of COUNT ioping -W 4 KiB requests
# (pwrite + fdatasync over a prepared file, the warm-up request excluded) on DIR's filesystem.
ioping_median() {
	ioping -W -s 4k -c $(($2 + 1)) -i "${3:-0.2}" "$1" >"$VM_STATE/ioping" 2>&1
	awk '
	/warmup/ { next }
	match($0, /time=[0-9.]+ (us|ms|s)/) {
		split(substr($0, RSTART + 5, RLENGTH - 5), a, " ")
		x = a[1] * (a[2] == "us" ? 1e-6 : (a[2] == "ms" ? 1e-3 : 1))
		for (i = n; i > 0 && v[i - 1] > x; i--) v[i] = v[i - 1]
		v[i] = x; n++
	}
	END {
		if (n < 1) exit 1
		printf "%.9g\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
	}' "$VM_STATE/ioping" || { note "ioping: $(head -c 600 "$VM_STATE/ioping")"; return 1; }
}
# canary SEL_PATH METRIC [EXTRA_LABELS]: the value of diskpulse_sync_METRIC for the fdatasync
# target on path SEL_PATH in the last scrape.
canary() { metric "diskpulse_sync_$2{path=\"$1\",mode=\"fdatasync\"${3:+,$3}}"; }
canary_probes_at_least() { scrape && num_cmp "$(canary "$1" probes_total)" '>=' "$2"; }
canary_up() { scrape && [ "$(canary "$1" target_up)" = 1 ]; }
# within NAME A B FRACTION: ok when |A - B| <= FRACTION * B.
within() {
	if awk -v a="$2" -v b="$3" -v f="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= f * b) }'; then
		ok "$1 ($2 vs $3)"
	else
		fail "$1" "$2 is not within $(awk -v f="$4" 'BEGIN { print f * 100 }') % of $3"
	fi
}

# --- a real root with systemd (vmtest.root=DEV) -------------------------------------------------

# boot_root DEV: mounts the ext4 root on /dev/DEV, puts the scenario, these helpers and busybox
# in its /vmtest with a service that runs them (guest/root-run), and hands over to its systemd.
# The root's own udev and systemd take the devices from here; the modules stay loaded.
boot_root() {
	for mod in virtio_pci virtio_blk; do modprobe "$mod" || note "modprobe $mod failed"; done
	wait_for 30 block_present "$1" || { fail boot "root disk $1 did not appear"; vm_finish 1; poweroff -f; }
	mkdir -p /newroot
	mount -t ext4 -o rw "/dev/$1" /newroot || { fail boot "cannot mount /dev/$1"; vm_finish 1; poweroff -f; }
	mkdir -p /newroot/vmtest/bin
	cp /bin/busybox /newroot/vmtest/busybox
	for applet in $(/bin/busybox --list); do ln -sf ../busybox "/newroot/vmtest/bin/$applet"; done
	cp /lib/vmtest/lib.sh /lib/vmtest/root-run /newroot/vmtest/
	cp /scenario.sh /newroot/vmtest/scenario.sh
	mkdir -p /newroot/etc/systemd/system/multi-user.target.wants
	cat >/newroot/etc/systemd/system/vmtest.service <<-EOF
	[Unit]
	Description=vmtest scenario
	After=multi-user.target
	[Service]
	Type=simple
	ExecStart=/vmtest/busybox sh /vmtest/root-run
	StandardOutput=journal+console
	StandardError=journal+console
	EOF
	ln -sf ../vmtest.service /newroot/etc/systemd/system/multi-user.target.wants/vmtest.service
	note "switching to the root on /dev/$1 after $(now) s"
	exec 3>&-
	for m in dev proc sys run; do mount --move "/$m" "/newroot/$m"; done
	exec switch_root /newroot /lib/systemd/systemd
}

# --- smartctl, what the SMART scenarios compare the daemon with ------------------------------
# sj FILE PATH: the value at PATH (e.g. model_name, a.b[0].c) in `smartctl --json=g` output, strings
# unquoted; non-zero when absent.
sj() {
	awk -v k="json.$2 = " 'index($0, k) == 1 {
		v = substr($0, length(k) + 1); sub(/;$/, "", v)
		if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2)
		print v; f = 1; exit
	} END { exit !f }' "$1"
}
