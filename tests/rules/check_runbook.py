#!/usr/bin/env python3
"""The runbook page the daemon serves at /runbook, as docs/runbook_html.py makes it of
docs/runbook.md: it converts; a real HTML parse (html.parser) finds its elements properly
nested, one id per heading and every alert of the rules among them, every #link landing on an id;
the words of the page (its table of contents aside) are exactly the words of the Markdown (its
markup and link targets aside), so nothing the source says is dropped or added; text is escaped.
And each construct the converter does not render is refused with its line, so the runbook cannot
take one on and silently lose it.
Usage: check_runbook.py"""
import collections
import glob
import html.parser
import importlib.util
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
RULE_FILES = sorted(glob.glob(os.path.join(ROOT, "etc", "prometheus", "*.rules.yml")))

spec = importlib.util.spec_from_file_location("runbook_html",
                                              os.path.join(ROOT, "docs", "runbook_html.py"))
conv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conv)

failures = []


def check(cond, what):
    print(("ok     " if cond else "FAILED ") + what)
    if not cond:
        failures.append(what)
    return cond


VOID = {"meta"}


class Page(html.parser.HTMLParser):
    """Elements, ids, links and the words of the text outside <nav>, <head>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.hrefs = [], [], [], []
        self.words = collections.Counter()
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a":
            self.hrefs.append(a.get("href"))
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag in ("nav", "head"):
            self.skip += 1

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1:] or "nothing"))
            return
        self.stack.pop()
        if tag in ("nav", "head"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.words.update(re.findall(r"[A-Za-z0-9_]+", data))


def markdown_words(text):
    """The words a reader sees in the Markdown: no fence languages, no link targets."""
    text = re.sub(r"^```[a-z]*$", "", text, flags=re.M)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return collections.Counter(re.findall(r"[A-Za-z0-9_]+", text))


def check_runbook():
    text = open(RUNBOOK, encoding="utf-8").read()
    try:
        doc, ids = conv.page(text)
    except conv.MarkdownError as e:
        check(False, "docs/runbook.md converts (%s)" % e)
        return
    check(True, "docs/runbook.md converts: %d bytes of HTML, %d ids" % (len(doc), len(ids)))
    p = Page()
    p.feed(doc)
    p.close()
    check(not p.errors and not p.stack, "every element is closed in order %s %s"
          % (p.errors[:3], p.stack))
    check(len(p.ids) == len(set(p.ids)) == len(ids), "one id per heading, none twice (%d)"
          % len(p.ids))
    alerts = [r["alert"] for path in RULE_FILES for g in yaml.safe_load(open(path))["groups"]
              for r in g["rules"] if "alert" in r]
    missing = [a for a in alerts if a.lower() not in p.ids]
    check(alerts and not missing, "each of the %d alerts has its id (missing %s)"
          % (len(alerts), missing))
    dangling = [h for h in p.hrefs if h.startswith("#") and h[1:] not in p.ids]
    check(not dangling, "every #link lands on an id (%s)" % dangling)
    want = markdown_words(text)
    lost, added = want - p.words, p.words - want
    check(not lost and not added, "the page's words are the Markdown's (lost %s, added %s)"
          % (dict(list(lost.items())[:8]), dict(list(added.items())[:8])))


REFUSED = [
    ("a blockquote", "> quoted\n"),
    ("raw HTML", "<div>x</div>\n"),
    ("inline HTML", "a <b>bold</b> word\n"),
    ("an autolink", "see <https://example.org>\n"),
    ("an image", "![alt](https://example.org/x.png)\n"),
    ("a numbered list", "1. one\n2. two\n"),
    ("a '*' list", "* one\n"),
    ("a nested list", "- one\n  - two\n"),
    ("an HTML entity", "a &amp; b\n"),
    ("a backslash escape", "a \\* b\n"),
    ("an underscore emphasis", "an _emphasised_ word\n"),
    ("a setext heading", "Title\n=====\n"),
    ("a thematic break", "a\n\n---\n\nb\n"),
    ("an indented code block", "a\n\n    code\n"),
    ("a reference link", "[text][ref]\n\n[ref]: https://example.org\n"),
    ("a hard break", "a line  \nnext\n"),
    ("an unclosed code block", "```sh\necho\n"),
    ("an unclosed code span", "a `b c\n"),
    ("a link to a missing anchor", "## A\n\nsee [B](#b)\n"),
    ("a link to another scheme", "[x](javascript:alert(1))\n"),
    ("a relative link", "[x](other.md)\n"),
    ("a link with a blank in its address", "[x](https://example.org/a b)\n"),
    ("a level-4 heading", "#### deep\n"),
    ("a tab", "a\tb\n"),
    ("a table row with a cell too many", "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n"),
    ("an aligned table", "| a |\n|:--|\n| 1 |\n"),
    ("strikethrough", "~~gone~~\n"),
    ("an unmatched *", "a * b\n"),
    ("two headings with one id", "## Same\n\n## same\n"),
]


def check_refusals():
    for what, md in REFUSED:
        try:
            conv.page(md)
            check(False, "%s is refused (it was converted)" % what)
        except conv.MarkdownError as e:
            check(True, "%s is refused: %s" % (what, e))


def check_escaping():
    md = ("# T\n\nAn `<script>alert(\"x\")</script>` & a 'quote' <3 and "
          "[a link](https://example.org/?a=1&b=\"2\").\n\n```sh\necho '<b>' \"&\" > /dev/null\n```\n"
          "\n| `a|b` | c |\n|---|---|\n| <1 | & |\n")
    doc, _ = conv.page(md)
    body = doc.split("<body>", 1)[1]
    check("<script>" not in body and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body,
          "a code span's HTML is escaped")
    check("&amp; a &#x27;quote&#x27; &lt;3" in body, "text's &, quotes and < are escaped")
    check('href="https://example.org/?a=1&amp;b=&quot;2&quot;"' in body,
          "a link's address is escaped in its attribute")
    check("echo &#x27;&lt;b&gt;&#x27; &quot;&amp;&quot; &gt; /dev/null\n" in body,
          "a code block is escaped")
    check("<th><code>a|b</code></th>" in body, "a | inside a code span does not split a cell")
    p = Page()
    p.feed(doc)
    check(not p.errors and not p.stack, "the escaped page parses cleanly %s" % p.errors[:3])


def main():
    check_runbook()
    check_refusals()
    check_escaping()
    print("%d failed" % len(failures) if failures else "all runbook checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
