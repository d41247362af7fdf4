/* GET /runbook: docs/runbook.md as HTML, made at build time by docs/runbook_html.py and compiled
 * in (the generated runbook_html.c), served from that constant: no file is read. */
#pragma once

#include <microhttpd.h>
#include <stddef.h>

extern const char http_runbook_html[]; /* the page, NUL-terminated */
extern const size_t http_runbook_len;
extern const char http_runbook_etag[]; /* quoted: "..." */

#include <stdbool.h>

/* Whether If-None-Match's field value inm (NULL: absent) fails the condition for a
 * representation of entity tag etag (quoted), so that the answer is 304 (RFC 9110 §13.1.2):
 * inm is "*" alone, or a list of entity tags ([W/]"..." with etagc bytes, empty elements
 * allowed) one of which matches etag weakly (a W/ prefix ignored). Anything else ("*x", "*"
 * within a list, a tag without its quotes) is not a valid field: false, the page is sent. Pure. */
bool http_etag_listed(const char *inm, const char *etag);

/* 200 with the page (text/html; charset=utf-8, ETag, Cache-Control: no-cache), or 304 when
 * if_none_match (the request's If-None-Match, its lines joined; NULL: none) lists the page's
 * ETag, with no body and the Content-Length the 200 has (RFC 9110 §8.6, §15.4.5). GET and HEAD
 * (libmicrohttpd sends no body for HEAD), with web's extra headers; the caller has admitted the
 * request (websec_admit). HTTP threads. */
struct websec;
enum MHD_Result http_runbook_serve(struct MHD_Connection *c, const char *if_none_match,
                                   struct websec *web);
