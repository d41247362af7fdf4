#!/usr/bin/env python3
"""An alert's runbook link, followed end to end: Debian's prometheus scrapes a running diskpulse
with the shipped example config and rules (every interval 1 s) and sends its alerts to Debian's
Alertmanager with the shipped routing (tests/rules/check_routing.py's set-up: receivers pointed
at a local webhook, group_wait 1 s). The canary's directory is removed, so the shipped
DiskpulseSyncProbeErrors fires (errno ENOENT); the test reads the alert from Alertmanager's API
(/api/v2/alerts), checks that its runbook_url is the default of diskpulse:runbook:info applied to
the alert's own instance (http://INSTANCE/runbook#diskpulsesyncprobeerrors), follows it with a
GET (the fragment stays with the client, as a browser keeps it), and gets 200, text/html and an
element with that id (a real HTML parse). The notification the webhook receives carries the
same link.
Exit 77 (skip) when prometheus or prometheus-alertmanager is not installed.
Usage: test_runbook_alert.py BINARY"""
import html.parser
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse

import dp
import test_prometheus

sys.path.insert(0, os.path.join(dp.HERE, "..", "rules"))
import check_routing  # noqa: E402

ALERT = "DiskpulseSyncProbeErrors"


class Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])


def am_alerts(am_port):
    status, _, body = dp.http_get("http://127.0.0.1:%d/api/v2/alerts" % am_port, timeout=10)
    if status != 200:
        raise RuntimeError("Alertmanager /api/v2/alerts: %s" % status)
    return json.loads(body)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if not shutil.which("prometheus"):
        dp.skip("prometheus is not installed (Debian package prometheus)")
    if not check_routing.alertmanager_binary():
        dp.skip("Alertmanager is not installed (Debian package prometheus-alertmanager)")
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="diskpulse-rbalert-")
    victim = os.path.join(tmp, "canary")
    os.mkdir(victim)
    am = prom = None
    try:
        am = check_routing.Alertmanager(tmp)
        with dp.Daemon(binary, "--canary.path=" + victim, "--canary.interval=1s",
                       "--diskstats.interval=1s") as daemon:
            instance = "127.0.0.1:%d" % daemon.port
            config = test_prometheus.write_config(tmp, daemon.port, alertmanager=am.port)
            prom = test_prometheus.Prometheus(config, tmp)
            # A few scrapes first, so the series is known before the errors start.
            dp.check(dp.wait_until(lambda: test_prometheus.query(
                prom.url, 'diskpulse_sync_target_up{path="%s"} == 1' % victim), 60, poll=0.5),
                "Prometheus scrapes the canary target")
            shutil.rmtree(victim)
            t0 = time.monotonic()

            def fired():
                return [a for a in am_alerts(am.port)
                        if a["labels"].get("alertname") == ALERT
                        and a["labels"].get("path") == victim]
            got = dp.wait_until(fired, 120, poll=0.5)
            dp.check(got, "%s reaches Alertmanager %.1f s after the canary directory was removed"
                     % (ALERT, time.monotonic() - t0))
            if got:
                follow(got[0], instance, am)
    finally:
        if prom:
            prom.finish()
        if am:
            if dp._failures:
                print(am.output()[-2000:])
            am.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    dp.finish()


def follow(a, instance, am):
    """Checks the fired alert a's runbook link, and the notification's."""
    url = a["annotations"].get("runbook_url", "")
    want = "http://%s/runbook#%s" % (instance, ALERT.lower())
    dp.check(a["labels"].get("instance") == instance and url == want,
             "its runbook_url %r is its own exporter's page (%r)" % (url, want))
    parts = urllib.parse.urlsplit(url)
    st, h, body = dp.http_get(urllib.parse.urlunsplit(parts._replace(fragment="")),
                              timeout=10)
    dp.check(st == 200 and h.get("Content-Type") == "text/html; charset=utf-8",
             "GET %s: %s %s" % (url, st, h.get("Content-Type")))
    p = Ids()
    p.feed(body.decode("utf-8", "replace"))
    dp.check(parts.fragment and parts.fragment in p.ids,
             "the page has the element with id %r (%d ids)" % (parts.fragment, len(p.ids)))

    def notified():
        return [x for _, b in am.got for x in b["alerts"]
                if x["labels"].get("alertname") == ALERT]
    sent = dp.wait_until(notified, 60, poll=0.5)
    dp.check(sent and sent[0]["annotations"].get("runbook_url") == want,
             "the notification carries the same link (%s)"
             % (sent[0]["annotations"].get("runbook_url") if sent else "none sent"))


if __name__ == "__main__":
    main()
