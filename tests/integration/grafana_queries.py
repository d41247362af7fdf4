#!/usr/bin/env python3
"""The PromQL of a Grafana dashboard, ready to run against Prometheus directly.

dashboard_queries(path) lists every (panel title, expression) of a dashboard: the targets of each
panel, those of panels nested in (collapsed) rows included, and the queries of its template
variables (label_values(SELECTOR, label) becomes SELECTOR, so that it can be run as an instant
query). Grafana's variables are replaced by values Prometheus accepts; a variable left over raises
ValueError naming the panel. metric_names(expr) tells which metric names (recording rules with
colons included) an expression reads.

Standard library only. `python3 grafana_queries.py DASHBOARD.json` prints every (title, expr)
and exits 1 when a variable cannot be substituted.
"""
import json
import re
import sys

# The dashboard's own selection variables match everything; Grafana's built-in intervals get
# fixed values.
SELECTION_VARIABLES = ("instance", "device", "target", "regime", "op")
BUILTIN_VARIABLES = {"__interval": "15s", "__range": "5m"}

# $name, ${name}, ${name:format}, ${name.field:format}, [[name]], [[name:format]]. A name starts
# with a letter or underscore, so label_replace's "$1" is not a variable.
_VARIABLE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_]\w*)(?:\.[^:}]*)?(?::[^}]*)?\}"
    r"|\[\[(?P<bracketed>[A-Za-z_]\w*)(?::\w+)?\]\]"
    r"|\$(?P<plain>[A-Za-z_]\w*)"
)


def substitute(expr, where, rate_interval="1m"):
    """expr with Grafana's variables replaced; ValueError (naming `where`) for any other one."""
    values = dict(BUILTIN_VARIABLES)
    values["__rate_interval"] = rate_interval
    for name in SELECTION_VARIABLES:
        values[name] = ".+"

    def replace(match):
        name = match.group("braced") or match.group("bracketed") or match.group("plain")
        if name not in values:
            raise ValueError("%s: unknown variable %s in %r" % (where, match.group(0), expr))
        return values[name]

    return _VARIABLE.sub(replace, expr)


def _split_arguments(text):
    """The top-level comma-separated arguments of text (the inside of a call's parentheses)."""
    args, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    args.append(text[start:].strip())
    return args


def variable_query_expr(query, where):
    """The PromQL an instant query can run for a Prometheus template variable's query."""
    query = query.strip()
    match = re.fullmatch(r"(label_values|query_result|metrics)\s*\((.*)\)", query, re.S)
    if not match:
        raise ValueError("%s: not a label_values/query_result/metrics query: %r" % (where, query))
    function, args = match.group(1), _split_arguments(match.group(2))
    if function == "label_values":
        if len(args) == 1 and args[0]:
            return '{%s!=""}' % args[0]  # label_values(label): every series having the label
        if len(args) == 2 and args[0]:
            return args[0]
        raise ValueError("%s: bad label_values query %r" % (where, query))
    if function == "query_result":
        return match.group(2).strip()
    return '{__name__=~"%s"}' % match.group(2).strip().replace("\\", "\\\\").replace('"', '\\"')


def _variable_query(variable):
    """The query text of a template variable (a string, or Grafana 9+'s {"query": ...} object)."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    if not isinstance(query, str) or not query.strip():
        query = variable.get("definition")
    return query if isinstance(query, str) and query.strip() else None


def _panels(panels):
    """Every panel, depth first, those inside rows' "panels" included."""
    for panel in panels or []:
        yield panel
        yield from _panels(panel.get("panels"))


def dashboard_queries(path, rate_interval="1m"):
    """[(title, expr)] of every panel target and query variable of the dashboard at path."""
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    if "dashboard" in dashboard and "panels" not in dashboard:  # the API's {"dashboard": ...}
        dashboard = dashboard["dashboard"]
    result = []
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable.get("type") != "query":
            continue
        where = "variable %s" % variable.get("name")
        query = _variable_query(variable)
        if query is None:
            raise ValueError("%s: no query" % where)
        expr = variable_query_expr(substitute(query, where, rate_interval), where)
        result.append((where, expr))
    legacy_rows = [row.get("panels") for row in dashboard.get("rows") or []]
    panels = [p for p in _panels(dashboard.get("panels"))]
    for row_panels in legacy_rows:
        panels.extend(_panels(row_panels))
    for panel in panels:
        title = panel.get("title") or "panel %s" % panel.get("id")
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                continue
            result.append((title, substitute(expr, "panel %r" % title, rate_interval)))
    return result


def panels_of(path):
    """Every panel of the dashboard at path (depth first, rows' nested panels included), each
    with "_row": the row it sits in (the last row above it at top level, or the collapsed row
    holding it), or None."""
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    if "dashboard" in dashboard and "panels" not in dashboard:
        dashboard = dashboard["dashboard"]
    out, row = [], None
    for panel in dashboard.get("panels") or []:
        if panel.get("type") == "row":
            row = panel
            panel["_row"] = None
            out.append(panel)
            for inner in panel.get("panels") or []:
                inner["_row"] = panel
                out.append(inner)
        else:
            panel["_row"] = row
            out.append(panel)
    return out


def heatmap_queries(path, rate_interval="1m"):
    """[(title, expr)] of the heatmap panels' targets, variables substituted."""
    return [(p.get("title"), substitute(t["expr"], "panel %r" % p.get("title"), rate_interval))
            for p in panels_of(path) if p.get("type") == "heatmap"
            for t in p.get("targets") or [] if isinstance(t.get("expr"), str) and t["expr"].strip()]


def rule_queries(path, rate_interval="1m"):
    """[(title, expr)] of the panel queries that read a recording rule (a name with colons)."""
    return [(t, e) for t, e in dashboard_queries(path, rate_interval)
            if not t.startswith("variable ") and any(":" in n for n in metric_names(e))]


def split_or(expr):
    """(left, right) of expr's first top-level ' or ', or None."""
    depth = 0
    for i, c in enumerate(expr):
        depth += c in "({["
        depth -= c in ")}]"
        if depth == 0 and expr.startswith(" or ", i):
            return expr[:i], expr[i + 4:]
    return None


# Aggregation operators may be followed by "by"/"without" rather than "(".
AGGREGATIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
}
# Keywords that take a parenthesised label list after them.
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = LABEL_LIST_KEYWORDS | {"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}

_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_UNIT = r"(?:ms|[smhdwy])"
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:%s(?:\d+%s)*)?" % (_UNIT, _UNIT)
)


def _skip_string(expr, i):
    """The index after the string literal starting at expr[i]."""
    quote = expr[i]
    i += 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" and quote != "`" else 1
    return i + 1


def _skip_group(expr, i, close):
    """The index after the group opened at expr[i] and closed by `close` (strings respected)."""
    i += 1
    while i < len(expr) and expr[i] != close:
        i = _skip_string(expr, i) if expr[i] in "\"'`" else i + 1
    return i + 1


def _skip_space(expr, i):
    while i < len(expr) and expr[i].isspace():
        i += 1
    return i


def _name_matchers(text):
    """Metric names given as {__name__="..."} inside a selector's braces."""
    names = set()
    for m in re.finditer(r'__name__\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`)', text):
        literal = m.group(1)
        names.add(literal[1:-1] if literal[0] == "`" else re.sub(r"\\(.)", r"\1", literal[1:-1]))
    return names


def metric_names(expr):
    """The metric names an expression refers to (functions, keywords, labels, strings and
    durations left out)."""
    names = set()
    i = 0
    while i < len(expr):
        c = expr[i]
        if c.isspace():
            i += 1
        elif c == "#":  # a comment, to the end of the line
            end = expr.find("\n", i)
            i = len(expr) if end < 0 else end + 1
        elif c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "{":
            end = _skip_group(expr, i, "}")
            names |= _name_matchers(expr[i + 1:end - 1])
            i = end
        elif c == "[":  # a range or subquery: durations only
            i = _skip_group(expr, i, "]")
        elif c.isdigit() or (c == "." and expr[i + 1:i + 2].isdigit()):
            m = _NUMBER.match(expr, i)
            i = m.end() if m and m.end() > i else i + 1
            while i < len(expr) and (expr[i].isalnum() or expr[i] == "_"):
                i += 1  # a malformed number or duration: no identifier starts inside it
        elif _IDENTIFIER.match(expr, i):
            word = _IDENTIFIER.match(expr, i).group(0)
            i += len(word)
            after = _skip_space(expr, i)
            lower = word.lower()
            if lower in LABEL_LIST_KEYWORDS:
                if after < len(expr) and expr[after] == "(":
                    i = _skip_group(expr, after, ")")
            elif lower in KEYWORDS:
                pass
            elif after < len(expr) and expr[after] == "(":
                pass  # a function or aggregation call
            elif word in AGGREGATIONS and _IDENTIFIER.match(expr, after) and \
                    _IDENTIFIER.match(expr, after).group(0).lower() in ("by", "without"):
                pass  # sum by (...) (...)
            else:
                names.add(word)
        else:
            i += 1
    return names


def main(argv):
    if len(argv) != 2:
        print("usage: %s DASHBOARD.json" % argv[0], file=sys.stderr)
        return 2
    try:
        queries = dashboard_queries(argv[1])
    except ValueError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    for title, expr in queries:
        print("%s\t%s" % (title, " ".join(expr.split())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
