"""The runbook's commands that no test can run, each with the reason. Every other command of
docs/runbook.md is run by a test in the situation where its alert fires. Entries: (section, a
regular expression searched in the command's text as the runbook has it, the reason)."""

CANNOT_RUN = [
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
