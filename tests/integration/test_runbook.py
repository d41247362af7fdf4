#!/usr/bin/env python3
"""GET /runbook on the real daemon: 200 with text/html; charset=utf-8, the page the build made of
docs/runbook.md byte for byte (generated/runbook/runbook.html beside the binary), an id for every
alert of the shipped rules found by a real HTML parse, HEAD with the same headers and no body,
an ETag and Cache-Control: no-cache, 304 for If-None-Match with that ETag (and for *, a weak
form, a list), 200 for another tag; OPTIONS lists GET, HEAD, OPTIONS; POST is 405; /runbook/x and
/runbook.md are 404; / links to it.
Usage: test_runbook.py BINARY"""
import html.parser
import os
import sys
import tempfile

import yaml

import dp

ROOT = os.path.join(dp.HERE, "..", "..")
RULES = os.path.join(ROOT, "etc", "prometheus", "diskpulse.rules.yml")


class Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    built = os.path.join(os.path.dirname(os.path.abspath(binary)), "generated", "runbook",
                         "runbook.html")
    alerts = [r["alert"] for g in yaml.safe_load(open(RULES))["groups"] for r in g["rules"]
              if "alert" in r]
    tmp = tempfile.mkdtemp(prefix="diskpulse-runbook-")
    with dp.Daemon(binary, "--canary.path=" + tmp) as d:
        url = d.url + "/runbook"
        st, h, body = dp.http_get(url)
        dp.check(st == 200, "GET /runbook is 200 (%s)" % st)
        dp.check(h.get("Content-Type") == "text/html; charset=utf-8",
                 "Content-Type %r" % h.get("Content-Type"))
        dp.check(int(h.get("Content-Length", -1)) == len(body) > 10000,
                 "Content-Length %s, %d bytes" % (h.get("Content-Length"), len(body)))
        if os.path.exists(built):
            dp.check(body == open(built, "rb").read(),
                     "the body is the page the build made of docs/runbook.md")
        p = Ids()
        p.feed(body.decode("utf-8"))
        missing = [a for a in alerts if a.lower() not in p.ids]
        dp.check(alerts and not missing, "an id for each of the %d alerts (missing %s)"
                 % (len(alerts), missing))
        etag = h.get("ETag", "")
        dp.check(len(etag) > 10 and etag.startswith('"') and etag.endswith('"')
                 and h.get("Cache-Control") == "no-cache",
                 "ETag %r, Cache-Control %r" % (etag, h.get("Cache-Control")))

        st, hh, hbody = dp.http_get(url, method="HEAD")
        dp.check(st == 200 and hbody == b"" and hh.get("Content-Type") == h.get("Content-Type")
                 and hh.get("ETag") == etag and hh.get("Content-Length") == h.get("Content-Length"),
                 "HEAD: 200, the same headers, no body (%s, %d bytes)" % (st, len(hbody)))
        for inm in (etag, "*", "W/" + etag, '"other", ' + etag):
            st, h3, b3 = dp.http_get(url, headers={"If-None-Match": inm})
            dp.check(st == 304 and b3 == b"" and h3.get("ETag") == etag,
                     "If-None-Match %s: 304, no body (%s)" % (inm, st))
        st, _, b4 = dp.http_get(url, headers={"If-None-Match": '"other"'})
        dp.check(st == 200 and b4 == body, "If-None-Match with another tag: 200 and the page")

        st, h5, _ = dp.http_get(url, method="OPTIONS")
        dp.check(st == 200 and h5.get("Allow") == "GET, HEAD, OPTIONS", "OPTIONS: %s %s"
                 % (st, h5.get("Allow")))
        st, h6, _ = dp.http_get(url, method="POST")
        dp.check(st == 405 and h6.get("Allow") == "GET, HEAD, OPTIONS", "POST: 405 (%s)" % st)
        for other in ("/runbook/", "/runbook/x", "/runbook.md", "/runbook.html"):
            dp.check(dp.http_get(d.url + other)[0] == 404, "%s is 404" % other)
        st, _, index = dp.http_get(d.url + "/", headers={"Accept": "text/html"})
        ip = Ids()
        ip.feed(index.decode("utf-8"))
        dp.check(st == 200 and "/runbook" in ip.hrefs, "/ links to /runbook (%s)" % ip.hrefs)
    os.rmdir(tmp)
    dp.finish()


if __name__ == "__main__":
    main()
