#!/usr/bin/env python3
"""Request framing (RFC 9112 §5.1, §6.1, §6.3) against request smuggling: every request whose
end a proxy in front and this server could see in different places gets exactly one answer (400
where the RFC demands it, else a refusal of the body) and the connection is closed after it, so
the bytes after the headers are never served as a second request. The table holds the RFC's
cases and the header mutations a well-known smuggling scanner tries (its list of
Transfer-Encoding and Content-Length permutations, rewritten here); each carries a smuggled
"GET /smuggled" after its headers. Sound requests (no body, Content-Length: 0, pipelining) keep
working and keep the connection.
Usage: test_smuggling.py BINARY"""
import re
import socket
import sys
import time

import dp

BIN = sys.argv[1]
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

# (name, header lines between Host and the blank line, the RFC demands 400)
BAD = [
    # RFC 9112 §6.3 item 5: several Content-Length fields, or an invalid one
    ("two Content-Length, 0 then 54", [b"Content-Length: 0", b"Content-Length: 54"], True),
    ("two equal Content-Length", [b"Content-Length: 35", b"Content-Length: 35"], True),
    ("Content-Length list", [b"Content-Length: 35, 35"], True),
    ("Content-Length +35", [b"Content-Length: +35"], True),
    ("Content-Length -1", [b"Content-Length: -1"], True),
    ("Content-Length 0x23", [b"Content-Length: 0x23"], True),
    ("Content-Length empty", [b"Content-Length:"], True),
    # a numeral no length can hold: libmicrohttpd answers 413 before the daemon sees it
    ("Content-Length huge", [b"Content-Length: 99999999999999999999999"], False),
    ("Content-Length with a letter", [b"Content-Length: 3a"], True),
    # §5.1: whitespace between a field name and its colon
    ("space before the colon (Content-Length)", [b"Content-Length : 35"], True),
    ("tab before the colon (Content-Length)", [b"Content-Length\t: 35"], True),
    ("space before the colon (Transfer-Encoding)", [b"Transfer-Encoding : chunked"], True),
    ("tab before the colon (Transfer-Encoding)", [b"Transfer-Encoding\t:\tchunked"], True),
    ("space before the colon (any header)", [b"X-Forwarded-For : 1.2.3.4"], True),
    ("a name with a space", [b"Transfer Encoding: chunked"], True),
    ("a name with a slash", [b"Transfer/Encoding: chunked"], True),
    ("a name with a byte over 0x7f", [b"Transf\x82r-Encoding: chunked"], True),
    ("a bare CR in a name", [b"Transfer\r-Encoding: chunked"], True),
    # §6.3 item 3: both framings
    ("Transfer-Encoding and Content-Length", [b"Transfer-Encoding: chunked", b"Content-Length: 4"], True),
    ("Content-Length and Transfer-Encoding", [b"Content-Length: 4", b"Transfer-Encoding: chunked"], True),
    ("Transfer-Encoding (tab) and Content-Length", [b"Transfer-Encoding:\tchunked", b"Content-Length: 4"], True),
    # §6.3 item 4: chunked not the final coding; codings two parsers read differently
    ("Transfer-Encoding: chunked, identity", [b"Transfer-Encoding: chunked, identity"], True),
    ("Transfer-Encoding: xchunked", [b"Transfer-Encoding: xchunked"], True),
    ("Transfer-Encoding: chunk", [b"Transfer-Encoding: chunk"], True),
    ("Transfer-Encoding quoted", [b'Transfer-Encoding: "chunked"'], True),
    ("Transfer-Encoding single-quoted", [b"Transfer-Encoding: 'chunked'"], True),
    ("Transfer-Encoding twice", [b"Transfer-Encoding: identity", b"Transfer-Encoding: chunked"], True),
    ("Transfer-Encoding twice, chunked first", [b"Transfer-Encoding: chunked", b"Transfer-Encoding: x"], True),
    ("vertical tab before the value", [b"Transfer-Encoding:\x0bchunked"], True),
    ("form feed before the value", [b"Transfer-Encoding:\x0cchunked"], True),
    ("a byte 0xff before the value", [b"Transfer-Encoding:\xffchunked"], True),
    # §2.2, §5.5: a bare CR or another control in a value
    ("a bare CR after the value", [b"Transfer-Encoding: chunked\r"], True),
    ("a bare CR inside a value", [b"X-A: a\rb"], True),
    # sound framing, but a body for a GET: refused unread (413), never served
    ("Transfer-Encoding: chunked", [b"Transfer-Encoding: chunked"], False),
    ("Transfer-Encoding shouted", [b"TRANSFER-ENCODING: CHUNKED"], False),
    ("Transfer-Encoding mixed case", [b"TrAnSFer-EnCODinG: cHuNkEd"], False),
    ("Transfer-Encoding: identity, chunked", [b"Transfer-Encoding: identity, chunked"], False),
    ("Transfer-Encoding with a tab after", [b"Transfer-Encoding: chunked\t"], False),
    ("Transfer-Encoding with two spaces", [b"Transfer-Encoding:  chunked"], False),
    ("Content-Length: 35", [b"Content-Length: 35"], False),
    # obs-fold (§5.2): a line starting with whitespace
    ("a folded Transfer-Encoding", [b"Transfer-Encoding:", b" chunked"], True),
    ("a folded Content-Length", [b"Content-Length:", b" 35"], True),
    ("a header folded into Transfer-Encoding", [b"X: y", b" Transfer-Encoding: chunked"], True),
    ("a newline before the colon", [b"Transfer-Encoding", b" : chunked"], True),
]


# Refused by libmicrohttpd itself (its Content-Length parser) before the daemon sees them: not
# in the daemon's bad_framing count.
BY_MHD = {"Content-Length list", "Content-Length +35", "Content-Length -1", "Content-Length 0x23",
          "Content-Length empty", "Content-Length with a letter", "Content-Length huge",
          "a newline before the colon"}


def exchange(port, data, timeout=3.0):
    """Sends data, reads until the server closes or timeout; returns (the bytes read, whether
    the server closed the connection)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    chunks, closed = [], False
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            c = s.recv(65536)
            if not c:
                closed = True
                break
            chunks.append(c)
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return b"".join(chunks), closed


def statuses(data):
    """The status line of every response header block in data. libmicrohttpd 0.9.75 (Debian 12)
    sends the header block of its own 400 and 413 answers (to a malformed or huge
    Content-Length, refused before the daemon sees the request) twice, so one refusal can show
    the same status twice; a second request served would show another (200, 404)."""
    return [int(m.group(1)) for m in re.finditer(rb"HTTP/1\.[01] (\d{3}) ", data)]


def main():
    with dp.Daemon(BIN, "--no-collector.smart", "--no-collector.canary") as d:
        for name, lines, rfc400 in BAD:
            req = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(l + b"\r\n" for l in lines) + b"\r\n"
            # a body that is a whole chunked message and, for a length of 35, exactly the
            # smuggled request: whichever way the body is read, something follows as a request
            data, closed = exchange(d.port, req + b"0\r\n\r\n" + SMUGGLED)
            st = statuses(data)
            ok_status = st[:1] == [400] if rfc400 else st[:1] in ([400], [413], [501])
            ours = b"bad request: " in data
            dp.check(st and set(st) == {st[0]} and ok_status and closed and b"not found" not in data
                     and (not rfc400 or ours == (name not in BY_MHD)),
                     "%s: %s, then closed (%s, %s)" % (
                         name, "400" if rfc400 else "refused", st, "closed" if closed else "left open"))
        # sound requests still work and keep the connection
        data, closed = exchange(d.port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                                b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n", timeout=1.0)
        dp.check(statuses(data) == [200, 200] and not closed,
                 "Content-Length: 0, then a pipelined request: both 200 and kept alive (%s)" % statuses(data))
        data, closed = exchange(d.port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Tab:\ta\tb\r\n\r\n", timeout=1.0)
        dp.check(statuses(data) == [200], "a tab inside a value is fine (%s)" % statuses(data))
        m = d.scrape()
        n = dp.value(m, "diskpulse_http_connections_closed_total", reason="bad_framing")
        want = sum(1 for name, _, r in BAD if r and name not in BY_MHD)
        dp.check(n == want,
                 "diskpulse_http_connections_closed_total{reason=\"bad_framing\"} counts the daemon's 400s (%s, want %d)" % (n, want))
        dp.check(d.proc.poll() is None, "the daemon still runs")
    dp.finish()


main()
