/* The HTTP server's own metrics: the connection guard's counters. */
#include "http.h"

void http_server_export(struct http_server *s, struct mset *out)
{
        struct connguard_stats st;
        struct mfamily *f;

        if (!s)
                return;
        http_server_stats(s, &st);
        mset_gauge(out, "diskpulse_http_connections", "HTTP connections open now.", (double)st.open,
                   NULL);
        f = mset_family(out, "diskpulse_http_connections_accepted_total",
                        "HTTP connections accepted and served.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.accepted, NULL);
        f = mset_family(out, "diskpulse_http_connections_refused_total",
                        "HTTP connections closed at once, unserved: source not allowed "
                        "(--web.allow-from), or over a connection limit.",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.refused_network, "reason", "network", NULL);
        mfamily_add_u64(out, f, "", st.refused_address, "reason", "address_limit", NULL);
        mfamily_add_u64(out, f, "", st.refused_limit, "reason", "total_limit", NULL);
        f = mset_family(out, "diskpulse_http_connections_closed_total",
                        "HTTP connections the daemon closed: evicted at the connection limit, past "
                        "a deadline, from a network no longer allowed, or after a 400 for a "
                        "request whose framing is unsound (RFC 9112: smuggling).",
                        MT_COUNTER);
        mfamily_add_u64(out, f, "", st.evicted, "reason", "evicted", NULL);
        mfamily_add_u64(out, f, "", st.timeout_header, "reason", "header_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_request, "reason", "request_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_idle, "reason", "idle_timeout", NULL);
        mfamily_add_u64(out, f, "", st.timeout_write, "reason", "write_timeout", NULL);
        mfamily_add_u64(out, f, "", st.closed_network, "reason", "network", NULL);
        mfamily_add_u64(out, f, "", st.closed_framing, "reason", "bad_framing", NULL);
}
