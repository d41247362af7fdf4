# Polling SMART sends a drive only what it supports, so its own error logs never grow from being watched: over 100 reads, traced in the kernel (nvme_setup_cmd, scsi_dispatch_cmd_start), the NVMe controller gets only Identify Controller and the mandatory SMART / Health log page (02h), and the AHCI disk with SMART switched off gets IDENTIFY and CHECK POWER MODE at every read but SMART commands at 9 of the 100 reads only (each is aborted, and a drive logs every aborted command in its error log; QEMU's IDENTIFY still says SMART is on, so the daemon learns it from the aborts: three eager retries, then doubling gaps, at most a day); switched on again, SMART is read again within the gap (the trace sees its SMART commands).
# timeout: 400
NV=nvme0n1 CTRL=nvme0 SD=sda
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T 2>/dev/null || skip "no tracefs in the guest kernel"
for e in nvme/nvme_setup_cmd scsi/scsi_dispatch_cmd_start; do
	[ -e $T/events/$e/enable ] || skip "no $e trace event in the guest kernel"
done
check "SMART switched off on $SD" smartctl -q silent -s off /dev/$SD
echo 8192 >$T/buffer_size_kb
: >$T/trace
echo 1 >$T/events/nvme/nvme_setup_cmd/enable
echo 1 >$T/events/scsi/scsi_dispatch_cmd_start/enable
echo 1 >$T/tracing_on
# the daemon's commands only (its device workers are named diskpulse-io)
ours() { grep -v '^#' $T/trace | grep 'diskpulse-io'; }
nvme_logs() { ours | grep -c 'nvme_admin_get_log_page'; }
reads_done() { [ "$(nvme_logs)" -ge "$1" ]; }
daemon_start --smart.interval=1s || exit 1
err0=$(scrape && metric "diskpulse_nvme_error_log_entries_total{device=\"$NV\"}")
check "100 SMART reads" wait_for 240 reads_done 100
echo 0 >$T/tracing_on
ours >/tmp/trace.txt
scrape
note "traced: $(grep -c nvme_setup_cmd /tmp/trace.txt) NVMe admin commands, $(grep -c 'ATA_16' /tmp/trace.txt) ATA pass-through commands"
# NVMe: Identify (CNS 01h) and Get Log Page with LID 02h (the first byte of CDW10) only.
others=$(grep nvme_setup_cmd /tmp/trace.txt | grep -v -e 'nvme_admin_identify cns=1,' -e 'nvme_admin_get_log_page cdw10=02 ' | head -3)
check "NVMe: nothing but Identify Controller and log page 02h${others:+ (got: $others)}" [ -z "$others" ]
expect "NVMe: one SMART / Health log per read" "$(grep -c 'nvme_admin_get_log_page' /tmp/trace.txt)" '>=' 100
expect "NVMe: error log entries unchanged" "$(metric "diskpulse_nvme_error_log_entries_total{device=\"$NV\"}")" == "${err0:-x}"
# ATA PASS-THROUGH (16): byte 14 of the CDB is the ATA command (B0h SMART, ECh IDENTIFY, E5h
# CHECK POWER MODE).
ata_cmds() { grep 'ATA_16' "$1" | sed 's/.*raw=//; s/).*//' | awk '{ print $15 }' | sort | uniq -c | tr '\n' ' '; }
note "ATA commands by opcode: $(ata_cmds /tmp/trace.txt)"
smart_sent=$(grep 'ATA_16' /tmp/trace.txt | sed 's/.*raw=//' | awk '$15 == "b0"' | wc -l)
# attempts at reads 1, 2, 3, 4, 6, 10, 18, 34, 66 (and 130), 3 commands each: READ DATA,
# THRESHOLDS, RETURN STATUS
expect "ATA: SMART commands to $SD, whose SMART is off, at 9 of 100 reads (27, not 300)" "$smart_sent" '<=' 30
expect "ATA: IDENTIFY at every read" "$(grep 'ATA_16' /tmp/trace.txt | sed 's/.*raw=//' | awk '$15 == "ec"' | wc -l)" '>=' 90
check_metric "diskpulse_smart_up{device=\"$SD\"}" == 0
check_metric "diskpulse_smart_read_errors_total{device=\"$SD\",reason=\"device_status\"}" '>=' 90

# SMART on again: read again at the next attempt (at most 64 reads away now), and the trace
# sees the commands.
check "SMART switched on on $SD" smartctl -q silent -s on /dev/$SD
: >$T/trace
echo 1 >$T/tracing_on
sd_up() { scrape && [ "$(metric "diskpulse_smart_up{device=\"$SD\"}")" = 1 ]; }
check "$SD read again within the gap" wait_for 120 sd_up
echo 0 >$T/tracing_on
ours >/tmp/trace2.txt
expect "ATA: SMART commands sent again once it is on" \
	"$(grep 'ATA_16' /tmp/trace2.txt | sed 's/.*raw=//' | awk '$15 == "b0"' | wc -l)" '>=' 3
check "daemon exits 0" daemon_stop
