"""The runbook's commands that no test can run, each with its reason: (section, a regular
expression searched in the command as the runbook has it, why). run_section() skips them;
tests/runbook/check_coverage.py holds the list short and every entry matching a command."""

CANNOT_RUN = [
]
