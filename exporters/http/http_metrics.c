/* The HTTP server's own metrics: the connection guard's counters. */
#include "http.h"
#include "util.h"

struct reason_count {
        const char *reason;
        uint64_t n;
};

/* One sample of f per reason, labelled reason="...", in the order given. */
static void add_by_reason(struct mset *out, struct mfamily *f, const struct reason_count *rc,
                          size_t n)
{
        for (size_t i = 0; i < n; i++)
                mfamily_add_u64(out, f, "", rc[i].n, "reason", rc[i].reason, NULL);
}

void http_server_export(struct http_server *s, struct mset *out)
{
        struct connguard_stats st;
        struct mfamily *f;

        if (!s)
                return;
        http_server_stats(s, &st);
        const struct reason_count refused[] = {{"network", st.refused_network},
                                               {"address_limit", st.refused_address},
                                               {"total_limit", st.refused_limit}};
        const struct reason_count closed[] = {
            {"evicted", st.evicted},
            {"header_timeout", st.timeout_header},
            {"request_timeout", st.timeout_request},
            {"idle_timeout", st.timeout_idle},
            {"write_timeout", st.timeout_write},
            {"network", st.closed_network},
            {"bad_framing", st.closed_framing},
        };
        mset_gauge(out, "diskpulse_http_connections", "HTTP connections open now.", (double)st.open,
                   NULL);
        f = mset_family(out, "diskpulse_http_connections_accepted_total",
                        "HTTP connections accepted and served.", MT_COUNTER);
        mfamily_add_u64(out, f, "", st.accepted, NULL);
        f = mset_family(out, "diskpulse_http_connections_refused_total",
                        "HTTP connections closed at once, unserved: source not allowed "
                        "(--web.allow-from), or over a connection limit.",
                        MT_COUNTER);
        add_by_reason(out, f, refused, ARRAY_SIZE(refused));
        f = mset_family(out, "diskpulse_http_connections_closed_total",
                        "HTTP connections the daemon closed: evicted at the connection limit, past "
                        "a deadline, from a network no longer allowed, or after a 400 for a "
                        "request whose framing is unsound (RFC 9112: smuggling).",
                        MT_COUNTER);
        add_by_reason(out, f, closed, ARRAY_SIZE(closed));
}
