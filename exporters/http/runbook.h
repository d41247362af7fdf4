/* GET /runbook: docs/runbook.md as HTML, made at build time by docs/runbook_html.py and compiled
 * in (the generated runbook_html.c), served from that constant: no file is read. */
#pragma once

#include <microhttpd.h>
#include <stddef.h>

extern const char http_runbook_html[]; /* the page, NUL-terminated */
extern const size_t http_runbook_len;
extern const char http_runbook_etag[]; /* quoted: "..." */

/* 200 with the page (text/html; charset=utf-8, ETag, Cache-Control: no-cache), or 304 when the
 * request's If-None-Match names the page's ETag. GET and HEAD (libmicrohttpd sends no body for
 * HEAD), with web's extra headers; the caller has admitted the request (websec_admit). HTTP
 * threads. */
struct websec;
enum MHD_Result http_runbook_serve(struct MHD_Connection *c, struct websec *web);
