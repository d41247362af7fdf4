"""What the status page and the logs show is true (the real binary):
- controls: a disk model, a serial and a canary path carrying C1 controls (U+009B, a CSI for
  some terminals) and bidi controls (U+202E, U+2066) reach `curl /`'s text as '?', never as their
  bytes, while /metrics keeps them in its label values (the exposition format allows any UTF-8
  there) and the HTML page keeps them escaped inside their cell; a C0 control (ESC) shows as the
  U+FFFD its label value carries.
- refusal: a second daemon refused on the state directory's lock exits 1 having attached and
  started nothing: its last line is the refusal, and it never logs "block I/O latency programs
  attached" (which the first one, as root on a kernel with BTF, does log).
Usage: test_display.py BINARY"""
import os
import shutil
import subprocess
import sys
import tempfile

import dp

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "linux-6.1")

C1 = "\u009b"            # CSI as one 8-bit control
BIDI = ("\u202e", "\u2066")  # right-to-left override, left-to-right isolate
# Every character the text view must not pass through (C1, Bidi_Control).
FORBIDDEN = [chr(c) for c in range(0x80, 0xa0)] + ["\u061c", "\u200e", "\u200f"] + \
    [chr(c) for c in range(0x202a, 0x202f)] + [chr(c) for c in range(0x2066, 0x206a)]


def get(url, accept=None):
    status, headers, body = dp.http_get(url, headers={"Accept": accept} if accept else None)
    return status, headers, body


def check_controls(binary):
    tmp = tempfile.mkdtemp(prefix="diskpulse-display-")
    try:
        roots = os.path.join(tmp, "roots")
        shutil.copytree(FIXTURE, roots, symlinks=True)
        model = "EVIL" + C1 + "31m" + BIDI[0] + "kcab"
        serial = "SER" + BIDI[1] + "IAL" + C1 + "2J"
        udev = os.path.join(roots, "udev", "b8:0")
        with open(udev, encoding="utf-8") as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            if line.startswith("E:ID_MODEL="):
                line = "E:ID_MODEL=" + model
            elif line.startswith("E:ID_SERIAL_SHORT="):
                line = "E:ID_SERIAL_SHORT=" + serial
            elif line.startswith(("E:SCSI_IDENT_SERIAL=", "E:ID_MODEL_ENC=")):
                continue  # they would win over ID_SERIAL_SHORT and ID_MODEL
            out.append(line)
        with open(udev, "w", encoding="utf-8") as f:
            f.write("\n".join(out) + "\n")
        canary = os.path.join(tmp, "db" + C1 + "0m" + BIDI[0] + "gol")
        os.mkdir(canary)
        esc = os.path.join(tmp, "esc\x1b[1m")  # a C0 control: U+FFFD in the label already
        os.mkdir(esc)
        with dp.Daemon(binary, "--path.procfs=" + os.path.join(roots, "proc"),
                       "--path.sysfs=" + os.path.join(roots, "sys"),
                       "--path.udev.data=" + os.path.join(roots, "udev"),
                       "--no-collector.smart", "--no-collector.biolatency",
                       "--canary.path=" + canary, "--canary.path=" + esc,
                       "--canary.interval=100ms") as d:
            metrics = d.scrape_text()
            for what, text in (("model", model), ("serial", serial), ("canary path", canary)):
                dp.check(text in metrics,
                         "/metrics keeps the %s's bytes in its label value (%r)" % (what, text))

            def page_has_all():
                st, _, body = get(d.url + "/")
                text = body.decode("utf-8", "strict")
                return text if st == 200 and "EVIL" in text and "SER" in text and \
                    "Sync canary" in text else None
            text = dp.wait_until(page_has_all, 20, poll=0.2)
            dp.check(text is not None, "GET / shows the disk's identity and the canary target")
            if text:
                bad = sorted({"U+%04X" % ord(c) for c in text if c in FORBIDDEN})
                dp.check(not bad, "GET /'s text has no C1 or bidi control (found %s)" % bad)
                dp.check("\x1b" not in text, "GET /'s text has no ESC")
                for shown in ("EVIL?31m?kcab", "SER?IAL?2J", "db?0m?gol", "esc\ufffd[1m"):
                    dp.check(shown in text, "GET / shows %r" % shown)
            st, h, body = get(d.url + "/", accept="text/html")
            html = body.decode("utf-8")
            dp.check(st == 200 and h.get("Content-Type", "").startswith("text/html") and
                     ("<td>" + model + "</td>") in html,
                     "the HTML page keeps the model inside its own cell")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_refusal(binary):
    state = tempfile.mkdtemp(prefix="diskpulse-display-state-")
    try:
        args = ["--state.directory=" + state, "--no-collector.smart", "--canary.interval=1s"]
        with dp.Daemon(binary, *args) as first:
            first_attached = "block I/O latency programs attached" in first.output()
            p = subprocess.run([binary, "--web.listen-address=127.0.0.1:%d" % dp.free_port()] +
                               args, capture_output=True, text=True, timeout=60)
            lines = p.stderr.strip().splitlines()
            dp.check(p.returncode == 1, "the second daemon exits 1 (%d)" % p.returncode)
            dp.check(lines and "the state directory is in use by another process" in lines[-1]
                     and "pid=%d" % first.proc.pid in lines[-1],
                     "its last line is the refusal naming the holder: %r"
                     % (lines[-1] if lines else ""))
            dp.check(not any("attached" in l for l in lines),
                     "it attaches nothing (the first one logged the attach: %s); it said:\n  %s"
                     % (first_attached, "\n  ".join(lines)))
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    check_controls(binary)
    check_refusal(binary)
    dp.finish()


if __name__ == "__main__":
    main()
