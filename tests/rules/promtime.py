"""Prometheus durations for the tests: parsed, and scaled inside rules (time-scaled replays)."""
import re

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
DURATION = re.compile(r"^(?:\d+(?:ms|[smhdwy]))+$")


def seconds(duration):
    """A Prometheus duration ("1y2w3d4h5m6s", "1h30m", "250ms") in seconds."""
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", duration))


# An age in seconds compared with the evaluation time: "time() - SERIES > 3600".
AGE = re.compile(r"(\btime\(\)\s*-\s*[\w:]+(?:\{[^}]*\})?\s*>=?\s*)(\d+(?:\.\d+)?)(?![\w.])")


def scale_durations(text, factor):
    """Every duration of a rule's expression (ranges, subqueries, offsets) or of its for:
    divided by factor, written in milliseconds; so are the seconds an age is compared with
    (time() - SERIES > N), which are durations too."""
    def one(tok):
        if not DURATION.match(tok):
            return tok
        return "%dms" % max(1, round(1000 * seconds(tok) / factor))
    text = re.sub(r"\[([^\]]+)\]", lambda m: "[" + ":".join(map(one, m.group(1).split(":"))) + "]", text)
    text = re.sub(r"\boffset\s+(\S+)", lambda m: "offset " + one(m.group(1)), text)
    text = AGE.sub(lambda m: m.group(1) + "%g" % (float(m.group(2)) / factor), text)
    return one(text) if DURATION.match(text) else text
