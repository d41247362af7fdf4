#!/usr/bin/env python3
"""docs/runbook.md as the HTML page the daemon serves at /runbook.

The runbook is written once, in Markdown; the build turns it into HTML with this script and
compiles the page into the binary (the installed docs get both). Only the subset of Markdown the
runbook uses is rendered: ATX headings (#, ##, ###), paragraphs, "- " lists (items continued by
indented or plain lines), fenced code blocks, pipe tables, and inside text code spans, **strong**,
*emphasis* and [links](http..., https..., #anchor). Anything else (a blockquote, raw HTML, an
image, a numbered or nested list, an entity, a backslash escape, an _underscore_ emphasis, a hard
break, a link to an anchor no heading makes, ...) stops the conversion with the line it is on, so
the page never silently renders less than the source says: the build fails instead.

Every heading gets an id: a heading that is one word (an alert's name) its lower case, which is
the anchor the rules' runbook_url annotations end with; any other heading the anchor GitHub would
give it (lower case, punctuation dropped, blanks as '-').

Usage: runbook_html.py RUNBOOK.md --html OUT.html [--c OUT.c]
       runbook_html.py RUNBOOK.md --check        convert, print the ids, write nothing
OUT.c defines http_runbook_html (the page, NUL-terminated), http_runbook_len (its length) and
http_runbook_etag (a quoted strong validator: the page's SHA-256, shortened)."""
import hashlib
import html
import re
import sys


class MarkdownError(Exception):
    """A construct this converter does not render, at a line of the source."""

    def __init__(self, lineno, msg):
        super().__init__("line %d: %s" % (lineno, msg))
        self.lineno = lineno


def esc(s):
    return html.escape(s, quote=True)


def slug(title):
    """The heading's id: one word in lower case, or GitHub's anchor for a heading of words."""
    if re.fullmatch(r"[A-Za-z0-9]+", title):
        return title.lower()
    s = re.sub(r"[^\w\- ]", "", title.lower())
    return s.replace(" ", "-")


def plain(title):
    """A heading's text without its inline marks (for its id and the table of contents)."""
    return re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title))


class Converter:
    def __init__(self):
        self.ids = []  # every heading's id, in order
        self.toc = []  # (id, text) of the level-2 headings
        self.anchor_links = []  # (lineno, anchor) of every link to "#anchor"

    # ---- inline text ----

    def inline(self, text, lineno):
        out = []
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c == "`":
                run = re.match(r"`+", text[i:]).end()
                end = text.find("`" * run, i + run)
                while end >= 0 and end + run < n and text[end + run] == "`":
                    end = text.find("`" * run, end + run + 1)
                if end < 0:
                    raise MarkdownError(lineno, "a code span that is not closed")
                code = text[i + run:end]
                if len(code) > 2 and code[0] == " " and code[-1] == " ":
                    code = code[1:-1]
                out.append("<code>%s</code>" % esc(code))
                i = end + run
            elif text.startswith("**", i):
                end = text.find("**", i + 2)
                if end < 0 or text[i + 2] == " " or text[end - 1] == " ":
                    raise MarkdownError(lineno, "a ** that opens or closes no strong text")
                out.append("<strong>%s</strong>" % self.inline(text[i + 2:end], lineno))
                i = end + 2
            elif c == "*":
                end = self.find_outside_code(text, "*", i + 1)
                if end < 0 or i + 1 >= n or text[i + 1] == " " or text[end - 1] == " " \
                        or text.startswith("**", end):
                    raise MarkdownError(lineno, "a * that opens or closes no emphasis")
                out.append("<em>%s</em>" % self.inline(text[i + 1:end], lineno))
                i = end + 1
            elif c == "[":
                m = re.match(r"\[([^\]]+)\]\(([^()\s]+)\)", text[i:])
                if not m:
                    if re.match(r"\[[^\]]*\](\[|:)", text[i:]):
                        raise MarkdownError(lineno, "a reference link")
                    if re.match(r"\[[^\]]*\]\(", text[i:]):
                        raise MarkdownError(lineno, "a link this converter does not render")
                    out.append(esc(c))
                    i += 1
                    continue
                url = m.group(2)
                if url.startswith("#"):
                    self.anchor_links.append((lineno, url[1:]))
                elif not re.match(r"https?://", url):
                    raise MarkdownError(lineno, "a link to %r (only http, https, #anchor)" % url)
                out.append('<a href="%s">%s</a>' % (esc(url), self.inline(m.group(1), lineno)))
                i += m.end()
            elif c == "!" and text.startswith("![", i):
                raise MarkdownError(lineno, "an image")
            elif c == "<" and re.match(r"<[A-Za-z/!?]", text[i:]):
                raise MarkdownError(lineno, "raw HTML or an autolink")
            elif c == "&" and re.match(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);",
                                       text[i:]):
                raise MarkdownError(lineno, "an HTML entity")
            elif c == "\\":
                raise MarkdownError(lineno, "a backslash escape or hard break")
            elif c == "_" and not (0 < i < n - 1 and text[i - 1].isalnum()
                                   and text[i + 1].isalnum()):
                raise MarkdownError(lineno, "an _ that may start or end emphasis")
            elif c == "~" and text.startswith("~~", i):
                raise MarkdownError(lineno, "strikethrough")
            else:
                out.append(esc(c))
                i += 1
        return "".join(out)

    @staticmethod
    def find_outside_code(text, ch, start):
        i = start
        while i < len(text):
            if text[i] == "`":
                run = re.match(r"`+", text[i:]).end()
                end = text.find("`" * run, i + run)
                if end < 0:
                    return -1
                i = end + run
                continue
            if text[i] == ch:
                return i
            i += 1
        return -1

    # ---- blocks ----

    @staticmethod
    def refuse_block(line, lineno):
        """Raises for a line that starts a block this converter does not render."""
        if "\t" in line:
            raise MarkdownError(lineno, "a tab")
        if line.endswith(" ") and line.strip():
            raise MarkdownError(lineno, "trailing blanks (a hard break)")
        s = line.lstrip(" ")
        if s.startswith(">"):
            raise MarkdownError(lineno, "a blockquote")
        if re.match(r"[0-9]+[.)]( |$)", s):
            raise MarkdownError(lineno, "a numbered list")
        if re.match(r"[*+]( |$)", s):
            raise MarkdownError(lineno, "a list item not written '- '")
        if re.fullmatch(r"(=+|-+|(\* *){3,}|(_ *){3,}|(- *){3,})", s):
            raise MarkdownError(lineno, "a setext heading or thematic break")
        if re.match(r"#{4,} ", s) or re.match(r"#+[^# ]", s) and not s.startswith("#!"):
            raise MarkdownError(lineno, "a heading this converter does not render")
        if re.match(r"\[[^\]]+\]:", s):
            raise MarkdownError(lineno, "a link reference definition")
        if s.startswith("<"):
            raise MarkdownError(lineno, "raw HTML")

    def heading(self, level, title, lineno):
        ident = slug(plain(title))
        if not ident:
            raise MarkdownError(lineno, "a heading without an id")
        if ident in self.ids:
            raise MarkdownError(lineno, "a second heading with the id %r" % ident)
        self.ids.append(ident)
        if level == 2:
            self.toc.append((ident, plain(title)))
        return '<h%d id="%s">%s</h%d>' % (level, esc(ident), self.inline(title, lineno), level)

    @staticmethod
    def cells(row, lineno):
        if not (row.startswith("|") and row.endswith("|")):
            raise MarkdownError(lineno, "a table row that does not start and end with |")
        parts, cur, code = [], [], 0
        i = 1
        while i < len(row) - 1:
            c = row[i]
            if c == "`":
                run = re.match(r"`+", row[i:]).end()
                cur.append("`" * run)
                code = 0 if code == run else (code or run)
                i += run
                continue
            if c == "|" and not code:
                parts.append("".join(cur).strip())
                cur = []
            else:
                cur.append(c)
            i += 1
        parts.append("".join(cur).strip())
        return parts

    def convert(self, text):
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        out = []
        i = 0

        def starts_block(line):
            return (line.startswith("```") or re.match(r"#{1,3} ", line)
                    or line.startswith("- ") or line.startswith("|"))

        while i < len(lines):
            line, lineno = lines[i], i + 1
            if not line.strip():
                i += 1
                continue
            if line.startswith("```"):
                lang = line[3:]
                if not re.fullmatch(r"[a-z]*", lang):
                    raise MarkdownError(lineno, "a code fence with %r after it" % lang)
                j = i + 1
                while j < len(lines) and lines[j] != "```":
                    if "\t" in lines[j]:
                        raise MarkdownError(j + 1, "a tab")
                    j += 1
                if j == len(lines):
                    raise MarkdownError(lineno, "a code block that is not closed")
                cls = ' class="language-%s"' % lang if lang else ""
                out.append("<pre><code%s>%s</code></pre>"
                           % (cls, esc("\n".join(lines[i + 1:j]) + "\n")))
                i = j + 1
                continue
            self.refuse_block(line, lineno)
            if line.startswith("    "):
                raise MarkdownError(lineno, "an indented code block")
            m = re.match(r"(#{1,3}) (.+)$", line)
            if m:
                out.append(self.heading(len(m.group(1)), m.group(2).strip(), lineno))
                i += 1
                continue
            if line.startswith("|"):
                if i + 1 >= len(lines) or not re.fullmatch(r"\|( *-+ *\|)+", lines[i + 1]):
                    raise MarkdownError(lineno, "a table without its |---| line (or aligned)")
                head = self.cells(line, lineno)
                rows = []
                j = i + 2
                while j < len(lines) and lines[j].startswith("|"):
                    self.refuse_block(lines[j], j + 1)
                    cells = self.cells(lines[j], j + 1)
                    if len(cells) != len(head):
                        raise MarkdownError(j + 1, "a table row with %d cells, not %d"
                                            % (len(cells), len(head)))
                    rows.append((cells, j + 1))
                    j += 1
                t = ["<table>", "<tr>" + "".join("<th>%s</th>" % self.inline(c, lineno)
                                                 for c in head) + "</tr>"]
                for cells, ln in rows:
                    t.append("<tr>" + "".join("<td>%s</td>" % self.inline(c, ln)
                                              for c in cells) + "</tr>")
                t.append("</table>")
                out.append("\n".join(t))
                i = j
                continue
            if line.startswith("- "):
                items = []
                while i < len(lines) and lines[i].startswith("- "):
                    item, start = [lines[i][2:]], i + 1
                    i += 1
                    while i < len(lines) and lines[i].strip() and not starts_block(lines[i]):
                        self.refuse_block(lines[i], i + 1)
                        cont = lines[i]
                        if cont.startswith("  "):
                            cont = cont[2:]
                            if cont.startswith(" ") or cont.startswith("- "):
                                raise MarkdownError(i + 1, "a nested list or indented block")
                        item.append(cont)
                        i += 1
                    items.append("<li>%s</li>" % self.inline(" ".join(item), start))
                out.append("<ul>\n%s\n</ul>" % "\n".join(items))
                continue
            para, start = [], lineno
            while i < len(lines) and lines[i].strip() and (not para or not starts_block(lines[i])):
                self.refuse_block(lines[i], i + 1)
                para.append(lines[i])
                i += 1
            out.append("<p>%s</p>" % self.inline(" ".join(para), start))
        for lineno, anchor in self.anchor_links:
            if anchor not in self.ids:
                raise MarkdownError(lineno, "a link to #%s, which no heading makes" % anchor)
        return out


def page(text):
    """(the HTML page, the heading ids) for the Markdown text; MarkdownError if it cannot."""
    conv = Converter()
    body = conv.convert(text)
    title = "diskpulse runbook"
    m = re.match(r"# (.+)\n", text)
    if m:
        title = plain(m.group(1))
    toc = "\n".join('<li><a href="#%s">%s</a></li>' % (esc(i), esc(t)) for i, t in conv.toc)
    head = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>%s</title><style>body{font-family:sans-serif;margin:2em auto;"
            "max-width:60em;padding:0 1em;line-height:1.4}pre{background:#f4f4f4;padding:.6em;"
            "overflow-x:auto}code{font-size:.95em}td,th{padding:2px 10px;text-align:left;"
            "vertical-align:top;border-bottom:1px solid #ddd}table{border-collapse:collapse}"
            "h2{border-top:1px solid #ccc;padding-top:.6em}</style></head><body>\n" % esc(title))
    nav = "<nav><ul>\n%s\n</ul></nav>" % toc
    # The contents go after the first heading and its introduction, before the first section.
    first = next((k for k, b in enumerate(body) if b.startswith("<h2")), len(body))
    parts = body[:first] + [nav] + body[first:]
    return head + "\n".join(parts) + "\n</body></html>\n", conv.ids


def c_source(data):
    """A C file defining the page as http_runbook_html / _len / _etag."""
    etag = '"%s"' % hashlib.sha256(data).hexdigest()[:20]
    out = ["/* Generated by docs/runbook_html.py from docs/runbook.md: do not edit. */",
           "#include <stddef.h>", "",
           "extern const char http_runbook_html[];",
           "extern const size_t http_runbook_len;",
           "extern const char http_runbook_etag[];", "",
           "const char http_runbook_html[] ="]
    for line in data.split(b"\n"):
        chunk = []
        for b in line + b"\n":
            if b in (0x22, 0x5C, 0x3F):  # " \ ? (no trigraphs)
                chunk.append("\\%03o" % b)
            elif 0x20 <= b < 0x7F:
                chunk.append(chr(b))
            else:
                chunk.append("\\%03o" % b)
        out.append('        "%s"' % "".join(chunk))
    out[-1] += ";"
    out.append("const size_t http_runbook_len = %d;" % len(data))
    out.append("const char http_runbook_etag[] = \"%s\";" % etag.replace('"', '\\"'))
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    src = argv[1]
    opts = dict(zip(argv[2::2], argv[3::2]))
    text = open(src, encoding="utf-8").read()
    try:
        doc, ids = page(text)
    except MarkdownError as e:
        print("%s:%s" % (src, e), file=sys.stderr)
        return 1
    if argv[2] == "--check":
        print("\n".join(ids))
        return 0
    data = doc.encode("utf-8")
    if "--html" in opts:
        with open(opts["--html"], "wb") as f:
            f.write(data)
    if "--c" in opts:
        with open(opts["--c"], "w") as f:
            f.write(c_source(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
