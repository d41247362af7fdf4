"""The runbook's commands that no test can run, each with its reason: (section, a regular
expression searched in the command as the runbook has it, why). run_section() skips them;
tests/runbook/check_coverage.py holds the list short and every entry matching a command."""

# The same smartctl and nvme commands run on emulated NVMe and SATA drives in the QEMU guest's
# sections (DiskpulseSmartUnhealthy and the other SMART alerts); these sections' tests run on loop
# devices, which have no SMART data to show.
NO_SMART = "a loop device has no SMART data; the guest tests run it on emulated NVMe and SATA drives"

CANNOT_RUN = [
    ("DiskpulseSyncLatencyDrift", r"^smartctl -x /dev/DEV", NO_SMART),
    ("DiskpulseDiskLatencyHigh", r"^smartctl -x /dev/DEV", NO_SMART),
    ("DiskpulseIoWriteTailLatencyHigh", r"^smartctl -x /dev/DEV", NO_SMART),
    ("DiskpulseDriveSlowerThanPeers", r"^smartctl -x /dev/DEV", NO_SMART),
    ("DiskpulseDriveSlowerThanPeers", r"^nvme smart-log /dev/DEV", NO_SMART),
    ("", r"^cat /sys/block/DEV/PART/start$",
     "the test machine's kernel reads no partition table (no MSDOS or EFI partition support): the test "
     "maps each partition by its offset and gives its start"),
    ("DiskpulseIoLatencyLost", r"^journalctl -k -b -1",
     "it reads the kernel log of the boot before, under another kernel: a test boots one kernel, once"),
    # --- device sections, run in QEMU guests (tests/runbook/guest.py: vm/runbook_smart,
    # vm/md_member, package/vm) ---
    ("DiskpulseSataLinkErrors", r"^smartctl -A /dev/DEV \| grep -i crc",
     "QEMU's AHCI disk has no attribute 199 (UDMA_CRC_Error_Count), and its emulated link corrupts "
     "nothing; the kernel's side of a link fault, a reset, is shown by the section's dmesg line"),
    ("DiskpulseUnsafeShutdown", r"^smartctl -A /dev/DEV \| grep -E '\^\(174\|192\) '",
     "QEMU's AHCI disk has no attribute 174 or 192 (the NVMe count is shown by the section's nvme line)"),
    ("DiskpulseMediaErrorsIncreasing", r"^nvme device-self-test ",
     "QEMU 7.2's NVMe controller has no Device Self-test (OACS bit 4 clear): the guest test sends "
     "the command and sees the controller refuse the opcode, but no test can begin"),
]
