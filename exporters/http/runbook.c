/* GET /runbook: the runbook compiled in, with a validator so a browser revalidates cheaply. */
#include "runbook.h"

#include <stdbool.h>
#include <string.h>

#include "websec.h"

static const char *skip_ows(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

/* etagc (RFC 9110 §8.8.3): %x21 / %x23-7E / obs-text */
static bool etagc(unsigned char c)
{
        return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

bool http_etag_listed(const char *inm, const char *etag)
{
        const char *p;
        bool match = false, any = false;

        if (!inm)
                return false;
        p = skip_ows(inm);
        if (*p == '*')
                return *skip_ows(p + 1) == 0; /* "*" alone: the page exists */
        for (;;) {
                const char *tag, *q;

                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++; /* empty list elements (RFC 9110 §5.6.1) */
                if (!*p)
                        return any && match;
                if (p[0] == 'W' && p[1] == '/')
                        p += 2; /* a weak tag matches weakly as well */
                if (*p != '"')
                        return false;
                tag = p;
                for (q = p + 1; *q && *q != '"'; q++)
                        if (!etagc((unsigned char)*q))
                                return false;
                if (!*q)
                        return false;
                if ((size_t)(q + 1 - tag) == strlen(etag) && strncmp(tag, etag, strlen(etag)) == 0)
                        match = true;
                any = true;
                p = skip_ows(q + 1);
                if (*p && *p != ',')
                        return false;
        }
}

enum MHD_Result http_runbook_serve(struct MHD_Connection *c, const char *if_none_match,
                                   struct websec *web)
{
        bool fresh = http_etag_listed(if_none_match, http_runbook_etag);
        struct MHD_Response *resp;
        enum MHD_Result r;

        /* The page is a constant of the binary: the response points at it, copying nothing. A
         * 304 is made of it too: libmicrohttpd sends no body with a 304 but the Content-Length
         * of the buffer, the 200's (RFC 9110 §8.6: that length or none; 0 would be false). */
        resp = MHD_create_response_from_buffer(http_runbook_len, (void *)http_runbook_html,
                                               MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        if (!fresh)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                        "text/html; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, http_runbook_etag);
        /* Stored, but checked with the ETag before each use: a new version is seen at once. */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        websec_add_headers(web, resp);
        r = MHD_queue_response(c, fresh ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}
