"""A simulated fleet of hosts and drives: their write load and write latency through days, and
the drives made to fail slow among them. Deterministic for a seed; standard library only.

Each host holds drives of one model (four models: two NVMe, a SATA SSD, a hard disk, with their
own base latencies and capacities). A host's write load follows a daily cycle (its site's phase),
scaled by the host (log-normal: the fleet spreads over the load bands), shared by its drives
with a share of their own, and noisy from one 5-minute window to the next; some hosts run a
nightly hour of backups at three times their load. A drive's write await is its model's base,
times its own small factor (drives of one model are not identical), times a queueing factor
1 / (1 - utilisation), times noise; a fail-slow drive's is also multiplied by its slowdown from
its onset on, all the time (constant) or in spells (intermittent). One host is slow as a whole
(every drive, as if its controller were): its drives are not fail-slow, and must not be named.
"""
import math
import random

DAY = 86400
STEP = 300  # the edge tier's rate5m series, one sample a window

# name, firmware, bus, base write await (s), write IOPS at saturation, peak host load (IOPS)
MODELS = [
    ("SAMSUNG MZQL23T8HCLS", "GDC5302Q", "nvme", 40e-6, 200000, 12000),
    ("INTEL SSDPE2KX040T8", "VDV10170", "nvme", 60e-6, 150000, 8000),
    ("Micron_5300_MTFDDAK3T8TDS", "D3MU001", "sata", 400e-6, 30000, 3000),
    ("ST8000NM000A-2KE101", "SN04", "sata", 3e-3, 400, 80),
]

# The injected fail-slow drives: slowdown, duty (1 = constant), spell length in hours.
FAULTS = [
    (1.3, 1.0, 0), (1.5, 1.0, 0), (2.0, 1.0, 0), (3.0, 1.0, 0),
    (1.3, 0.5, 3), (1.5, 0.5, 2), (2.0, 0.35, 2), (3.0, 0.3, 1.5),
]
SLOW_HOST = 1.6  # the one host slow as a whole (its controller), not a drive


class Drive:
    def __init__(self, host, device, model, serial, wwn, offset, share):
        self.host, self.device, self.model = host, device, model
        self.serial, self.wwn, self.offset, self.share = serial, wwn, offset, share
        self.fault = None  # (onset, slowdown, duty, spell seconds, phase)

    @property
    def labels(self):
        m = MODELS[self.model]
        return (self.host.instance, self.device, m[0], self.serial, self.wwn, m[1])

    def slowdown(self, t):
        """The factor of the injected fault at time t (1 when healthy or before its onset)."""
        if not self.fault:
            return self.host.slow
        onset, factor, duty, spell, phase = self.fault
        if t < onset:
            return 1.0
        if duty >= 1:
            return factor
        period = spell / duty
        return factor if ((t - onset + phase) % period) < spell else 1.0


class Host:
    def __init__(self, index, model, site, scale, backup_hour):
        self.index, self.model, self.site = index, model, site
        self.scale, self.backup_hour = scale, backup_hour
        self.instance = "h%04d.example.net:9477" % index
        self.slow = 1.0
        self.drives = []

    def load(self, t, rng):
        """The host's write IOPS at t: its site's daily cycle, its nightly backup hour."""
        peak = MODELS[self.model][5] * self.scale
        day = (t / DAY + 0.3 * self.site) % 1
        cycle = 0.55 + 0.45 * math.sin(2 * math.pi * day)
        if self.backup_hour is not None and int(day * 24) == self.backup_hour:
            cycle = 3.0
        return peak * cycle * math.exp(rng.gauss(0, 0.05))


class Fleet:
    def __init__(self, hosts=200, seed=36, start=0, onset=(DAY, 1.6 * DAY)):
        rng = random.Random(seed)
        self.start, self.hosts, self.drives, self.faulty = start, [], [], []
        for i in range(hosts):
            h = Host(i, i % len(MODELS), i % 2, math.exp(rng.gauss(-0.3, 0.6)),
                     2 if rng.random() < 0.1 else None)
            for d in range(5 + (i % 5 == 0)):
                dev = ("nvme%dn1" % d) if MODELS[h.model][2] == "nvme" else "sd" + "abcdefgh"[d]
                serial = "S%02d%05d" % (h.model, len(self.drives))
                h.drives.append(Drive(h, dev, h.model, serial, "0x5000c500%08x" % len(self.drives),
                                      math.exp(rng.gauss(0, 0.03)), math.exp(rng.gauss(0, 0.08))))
                self.drives.extend(h.drives[-1:])
            self.hosts.append(h)
        # Faulty drives on distinct hosts, of every model; the slow host is another one.
        picks = rng.sample(range(1, hosts), len(FAULTS) + 1)
        for (factor, duty, spell), hi in zip(FAULTS, picks):
            d = rng.choice(self.hosts[hi].drives)
            d.fault = (start + rng.uniform(*onset), factor, duty, spell * 3600,
                       rng.uniform(0, spell * 3600 / duty if duty < 1 else 1))
            self.faulty.append(d)
        self.slow_host = self.hosts[picks[-1]]
        self.slow_host.slow = SLOW_HOST
        self.seed = seed

    def series(self, t0, t1, step=STEP):
        """Per drive, the lists of (write await, write IOPS) at t0, t0+step, ... < t1: what the
        edge tier records as drive:diskpulse_disk_write_{await_seconds,iops}:rate5m."""
        rng = random.Random(self.seed + 1)
        out = {d: ([], []) for d in self.drives}
        t = t0
        while t < t1:
            for h in self.hosts:
                load = h.load(t - self.start, rng)
                _, _, _, base, cap, _ = MODELS[h.model]
                for d in h.drives:
                    iops = load * d.share * math.exp(rng.gauss(0, 0.1))
                    rho = min(iops / cap, 0.9)
                    wait = base * d.offset / (1 - rho) * math.exp(rng.gauss(0, 0.08))
                    aw, io = out[d]
                    aw.append(wait * d.slowdown(t))
                    io.append(iops)
            t += step
        return out

    def describe(self):
        return "%d hosts, %d drives, %d models, %d fail-slow drives, 1 slow host (%d drives)" % (
            len(self.hosts), len(self.drives), len(MODELS), len(self.faulty),
            len(self.slow_host.drives))
