#!/usr/bin/env python3
"""The strict exposition checker itself: it accepts a correct page and rejects each error that
Debian 12's promtool lets through (and the usual ones)."""
import dp

GOOD = """# HELP a_total A counter.
# TYPE a_total counter
a_total{device="sda"} 1
a_total{device="sdb",x="q\\"uote\\\\ back\\nline"} 2
# HELP g A gauge.
# TYPE g gauge
g NaN
g{l="1"} -Inf
# HELP h A histogram.
# TYPE h histogram
h_bucket{le="0.1"} 1
h_bucket{le="1"} 3
h_bucket{le="+Inf"} 4
h_sum 2.5
h_count 4
# HELP s A summary.
# TYPE s summary
s{quantile="0.5"} 0.1
s{quantile="0.99"} 0.3
s_sum 10
s_count 50
"""

BAD = {
    "duplicate series": "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
    "duplicate series, labels reordered": "# TYPE a gauge\na{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n",
    "family in two groups": "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n",
    "histogram without +Inf": "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
    "unordered buckets": "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
    "decreasing bucket counts": "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
    "count differs from +Inf": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
    "histogram without _sum": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
    "bad escape": "# TYPE a gauge\na{x=\"\\t\"} 1\n",
    "invalid metric name": "# TYPE 1a gauge\n1a 1\n",
    "TYPE after samples": "a 1\n# TYPE a gauge\n",
    "second TYPE": "# TYPE a gauge\n# TYPE a gauge\na 1\n",
    "negative counter": "# TYPE a_total counter\na_total -1\n",
    "no trailing newline": "# TYPE a gauge\na 1",
    "empty line": "# TYPE a gauge\n\na 1\n",
    "bad value": "# TYPE a gauge\na one\n",
    "duplicate label name": "# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n",
    "unknown type": "# TYPE a meter\na 1\n",
    "summary quantile out of range": "# TYPE s summary\ns{quantile=\"2\"} 1\ns_sum 1\ns_count 1\n",
    "unterminated label": "# TYPE a gauge\na{x=\"1} 1\n",
}

dp.check(dp.expocheck.check(GOOD) == [], "a correct page passes: %s" % dp.expocheck.check(GOOD))
for what, text in BAD.items():
    errors = dp.expocheck.check(text)
    dp.check(errors != [], "rejects %s: %s" % (what, errors[:1]))
dp.finish()
