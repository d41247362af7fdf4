"""Load and attack generators for the flood tests: slow and idle connections from many loopback
source addresses, clients scraping as fast as they can, and a timed scraper. Loopback only; every
generator is bounded in connections and in time."""
import resource
import multiprocessing
import selectors
import socket
import threading
import time

REQUEST_HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def raise_fd_limit():
    """Raises this process's open-file limit to its hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def loopback(n, first=2):
    """n IPv4 loopback source addresses 127.0.0.<first>..., then on into 127.0.1.1... when
    there are more (all of 127/8 is local; .0 and .255 left out)."""
    out = []
    k = first
    while len(out) < n:
        b, c = divmod(k, 254)
        out.append("127.0.%d.%d" % (b, c + 1 if b else c))
        k += 1
    return out


def read_response(sock, deadline, pending=None):
    """Reads one HTTP response (Content-Length framed) from a blocking socket; returns
    (status, headers dict with lower-case names, body) or raises OSError / ValueError. Bytes read
    beyond it (pipelining) are kept in pending (a bytearray) for the next call when one is given,
    else dropped."""
    buf = bytes(pending) if pending else b""
    while b"\r\n\r\n" not in buf:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        c = sock.recv(65536)
        if not c:
            raise ConnectionError("closed before the headers (%d bytes)" % len(buf))
        buf += c
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        c = sock.recv(1 << 20)
        if not c:
            raise ConnectionError("closed after %d of %d body bytes" % (len(body), length))
        body += c
    if pending is not None:
        pending[:] = body[length:]
    return status, headers, body[:length]


def scrape_once(port, src="127.0.0.1", timeout=5.0, path="/metrics"):
    """One scrape on a new connection; returns (ok, seconds, status or error text). ok means 200
    with the whole body."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((src, 0))
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path.encode())
        status, _, body = read_response(s, deadline)
        return status == 200 and len(body) > 0, time.monotonic() - t0, status
    except (OSError, ValueError) as e:
        return False, time.monotonic() - t0, "%s: %s" % (type(e).__name__, e)
    finally:
        s.close()


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, -(-len(v) * p // 100) - 1))
    return v[int(k)]


class Scraper:
    """n scrapes from src, one at a time, each on a new connection, spaced by gap seconds."""

    def __init__(self, port, n=100, gap=0.05, src="127.0.0.1", timeout=5.0):
        self.port, self.n, self.gap, self.src, self.timeout = port, n, gap, src, timeout
        self.results = []

    def run(self):
        for _ in range(self.n):
            self.results.append(scrape_once(self.port, self.src, self.timeout))
            time.sleep(self.gap)
        return self

    def ok(self):
        return sum(1 for r in self.results if r[0])

    def latencies(self):
        return [r[1] for r in self.results]

    def summary(self):
        lat = self.latencies()
        bad = [r[2] for r in self.results if not r[0]]
        return ("%d/%d scrapes succeeded, p50 %.1f ms, p99 %.1f ms, max %.1f ms%s" %
                (self.ok(), len(self.results), 1000 * percentile(lat, 50), 1000 * percentile(lat, 99),
                 1000 * max(lat), (", failures: %s" % sorted(set(map(str, bad)))[:4]) if bad else ""))


class Flood(threading.Thread):
    """Holds per_source connections from each source address, all driven by one selector loop.

    mode "header": the request line and Host, then one more header line every interval seconds,
    never the blank line that ends the headers (slowloris). "byte": the same request one byte
    every interval. "idle": one complete keep-alive request, its response read, then silence.
    "silent": connect and send nothing. "slowread": a receive buffer as small as the kernel
    allows, one complete request, and its response never read (the sender's buffers fill and
    stay full). A connection the server closes is opened again after
    reconnect seconds, as an attacker would. Runs until stop() or for at most limit seconds."""

    def __init__(self, port, sources, per_source, mode, interval=1.0, reconnect=1.0, limit=120.0):
        super().__init__(daemon=True)
        self.port, self.mode, self.interval, self.reconnect = port, mode, interval, reconnect
        self.limit = limit
        self.slots = [{"src": s, "sock": None, "next": 0.0, "sent": 0, "state": "closed", "buf": b""}
                      for s in sources for _ in range(per_source)]
        self.sel = selectors.DefaultSelector()
        self._halt = threading.Event()
        self.stats = {"opened": 0, "failed_connect": 0, "closed_by_server": 0, "responses": 0}
        self.connected = 0  # established now (from the client's point of view)
        self.max_lifetime = 0.0  # longest a slow reader was held after its answer began
        self.max_connected = 0
        self.ready = threading.Event()

    def stop(self):
        self._halt.set()
        self.join(10)

    def _close(self, slot, by_server):
        s = slot["sock"]
        if s is not None:
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        if slot["state"] in ("open", "idle", "slowread"):
            self.connected -= 1
        if by_server:
            self.stats["closed_by_server"] += 1
            if slot["state"] == "slowread" and slot.get("t_answer"):
                self.max_lifetime = max(self.max_lifetime, time.monotonic() - slot["t_answer"])
        slot.update(sock=None, state="closed", sent=0, buf=b"", next=time.monotonic() + self.reconnect)

    def _open(self, slot, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        if self.mode == "slowread":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        try:
            s.bind((slot["src"], 0))
            s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            s.close()
            self.stats["failed_connect"] += 1
            slot["next"] = now + self.reconnect
            return
        slot.update(sock=s, state="connecting", sent=0, buf=b"", next=now, t_open=now, t_answer=None)
        self.sel.register(s, selectors.EVENT_WRITE, slot)
        self.stats["opened"] += 1

    def _chunk(self, slot):
        if self.mode in ("idle", "slowread"):
            return REQUEST_HEAD + b"\r\n"
        if self.mode == "silent":
            return b""
        if self.mode == "byte":
            return REQUEST_HEAD[slot["sent"] % len(REQUEST_HEAD):][:1]
        if slot["sent"] == 0:
            return REQUEST_HEAD
        return b"X-Slow-%d: 1\r\n" % slot["sent"]

    def run(self):
        end = time.monotonic() + self.limit
        while not self._halt.is_set() and time.monotonic() < end:
            now = time.monotonic()
            next_wake = now + 0.2
            for slot in self.slots:
                if slot["state"] == "closed" and slot["next"] <= now:
                    self._open(slot, now)
                elif slot["state"] == "open" and slot["next"] <= now:
                    data = self._chunk(slot)
                    try:
                        if data:
                            slot["sock"].send(data)
                        slot["sent"] += 1
                        slot["next"] = now + self.interval
                        if self.mode == "idle":
                            slot["state"] = "idle"
                            self.sel.modify(slot["sock"], selectors.EVENT_READ, slot)
                        elif self.mode == "slowread":
                            # never read: only watch, now and then, whether the server let go
                            slot["state"] = "slowread"
                            self.sel.unregister(slot["sock"])
                            slot["next"] = now + 0.5
                        elif self.mode == "silent":
                            slot["next"] = now + 3600
                    except OSError:
                        self._close(slot, True)
                elif slot["state"] == "slowread" and slot["next"] <= now:
                    try:
                        # tcp_info's first byte: the TCP state; 1 is ESTABLISHED
                        st = slot["sock"].getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
                    except OSError:
                        st = 0
                    if st != 1:
                        self._close(slot, True)
                    else:
                        if slot["t_answer"] is None:
                            try:  # has the answer begun? (looked at, not read)
                                if slot["sock"].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                                    slot["t_answer"] = now
                            except OSError:
                                pass
                        slot["next"] = now + 0.5
                if slot["state"] in ("closed", "open", "slowread"):
                    next_wake = min(next_wake, slot["next"])
            if self.connected == len(self.slots):
                self.ready.set()
            for key, ev in self.sel.select(max(0.0, min(0.2, next_wake - time.monotonic()))):
                slot = key.data
                if slot["state"] == "connecting":
                    err = slot["sock"].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self._close(slot, False)
                        self.stats["failed_connect"] += 1
                        continue
                    slot["state"] = "open"
                    self.connected += 1
                    self.max_connected = max(self.max_connected, self.connected)
                    self.sel.modify(slot["sock"], selectors.EVENT_READ, slot)
                    continue
                try:
                    data = slot["sock"].recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self._close(slot, True)
                    continue
                if slot["state"] == "idle":
                    slot["buf"] += data
                    head, sep, body = slot["buf"].partition(b"\r\n\r\n")
                    if sep:
                        length = 0
                        for line in head.split(b"\r\n"):
                            if line.lower().startswith(b"content-length:"):
                                length = int(line.split(b":")[1])
                        if len(body) >= length:
                            self.stats["responses"] += 1
                            slot["buf"] = b""
        for slot in self.slots:
            self._close(slot, False)
        self.sel.close()


def _attacker_main(args, kwargs, halt, ready, connected, out):
    f = Flood(*args, **kwargs)
    f.start()
    while not halt.wait(0.1):
        connected.value = f.connected
        if f.ready.is_set():
            ready.set()
    f.stop()
    out.put({"stats": f.stats, "max_connected": f.max_connected, "connected": f.connected,
             "max_lifetime": f.max_lifetime})


class Attacker:
    """A Flood in a process of its own, so that the attacker's work never takes the interpreter
    lock from the scraper being timed; the same arguments and attributes (read at stop(), but
    .connected and .ready, which follow the attack)."""

    def __init__(self, *args, **kwargs):
        ctx = multiprocessing.get_context("fork")
        self._halt, self.ready = ctx.Event(), ctx.Event()
        self._connected = ctx.Value("i", 0)
        self._out = ctx.Queue()
        self._proc = ctx.Process(target=_attacker_main, daemon=True,
                                 args=(args, kwargs, self._halt, self.ready, self._connected, self._out))
        self.stats, self.max_connected, self.max_lifetime = {}, 0, 0.0

    @property
    def connected(self):
        return self._connected.value

    def start(self):
        self._proc.start()

    def stop(self):
        self._halt.set()
        try:
            r = self._out.get(timeout=30)
            self.stats, self.max_connected, self.max_lifetime = r["stats"], r["max_connected"], r["max_lifetime"]
        finally:
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()


class Hammer(threading.Thread):
    """One client scraping as fast as it can over one keep-alive connection (a new one when the
    server closes it), from src, until stop() or limit seconds."""

    def __init__(self, port, src, limit=120.0):
        super().__init__(daemon=True)
        self.port, self.src, self.limit = port, src, limit
        self.done = 0
        self.errors = 0
        self.error_kinds = set()
        self._halt = threading.Event()

    def stop(self):
        self._halt.set()
        self.join(10)

    def run(self):
        end = time.monotonic() + self.limit
        s = None
        while not self._halt.is_set() and time.monotonic() < end:
            try:
                if s is None:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.bind((self.src, 0))
                    s.settimeout(5)
                    s.connect(("127.0.0.1", self.port))
                s.sendall(REQUEST_HEAD + b"\r\n")
                status, headers, _ = read_response(s, time.monotonic() + 5)
                self.done += status == 200
                if headers.get("connection", "").lower() == "close":
                    s.close()
                    s = None
            except (OSError, ValueError) as e:
                self.errors += 1
                self.error_kinds.add("%s: %s" % (type(e).__name__, e))
                if s is not None:
                    s.close()
                s = None
                time.sleep(0.05)
        if s is not None:
            s.close()
