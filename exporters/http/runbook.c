/* GET /runbook: the runbook compiled in, with a validator so a browser revalidates cheaply. */
#include "runbook.h"

#include <stdbool.h>
#include <string.h>

#include "websec.h"

/* RFC 9110 §13.1.2: If-None-Match is "*" or a list of entity tags, compared weakly (a W/ prefix
 * matches too). */
static bool etag_listed(const char *inm, const char *etag)
{
        size_t n = strlen(etag);

        for (const char *p = inm; *p;) {
                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++;
                if (*p == '*')
                        return true;
                if (strncmp(p, "W/", 2) == 0)
                        p += 2;
                if (strncmp(p, etag, n) == 0 &&
                    (p[n] == 0 || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
                        return true;
                while (*p && *p != ',')
                        p++;
        }
        return false;
}

enum MHD_Result http_runbook_serve(struct MHD_Connection *c, struct websec *web)
{
        const char *inm =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
        bool fresh = inm && etag_listed(inm, http_runbook_etag);
        struct MHD_Response *resp;
        enum MHD_Result r;

        /* The page is a constant of the binary: the response points at it, copying nothing. */
        resp = MHD_create_response_from_buffer(fresh ? 0 : http_runbook_len,
                                               (void *)http_runbook_html, MHD_RESPMEM_PERSISTENT);
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
