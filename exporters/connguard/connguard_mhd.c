/* The connection guard's side of libmicrohttpd: its notifications (connection started and
 * closed, request line, headers complete, request completed) move each connection through its
 * phases; the options that install them. libmicrohttpd's thread. */
#include <netinet/in.h>
#include <string.h>

#include "connguard_internal.h"

/* Seconds for libmicrohttpd's own inactivity timeout: a backstop behind the guard's deadlines,
 * never shorter than any of them. */
static unsigned backstop_seconds(const struct connguard_config *cfg)
{
        usec_t m =
            cfg->idle_timeout > cfg->request_timeout ? cfg->idle_timeout : cfg->request_timeout;
        return (unsigned)(m / USEC_PER_SEC) + 2;
}

static struct gconn *conn_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

/* libmicrohttpd's thread: a connection was set up, or is about to be closed. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct connguard *g = cls;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fi =
                    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *ai =
                    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                int fd = fi ? fi->connect_fd : -1;
                struct gconn *c = NULL;
                unsigned backstop;

                pthread_mutex_lock(&g->lock);
                if (fd >= 0 && (size_t)fd < g->nbyfd)
                        c = g->byfd[fd];
                if (c && !c->started)
                        g->pending--;
                if (!c || c->started) {
                        /* Its record was dropped as stale (libmicrohttpd took longer than
                         * PENDING_MAX_AGE): count it again. */
                        struct netaddr a;
                        bool ip = ai && ai->client_addr &&
                                  cidr_netaddr_from_sockaddr(ai->client_addr,
                                                             sizeof(struct sockaddr_in6), &a) == 0;
                        c = connguard_conn_new(g, fd, &a, ip, now_monotonic());
                        if (fd >= 0)
                                connguard_table_put(g, c);
                }
                c->started = true;
                *socket_context = c;
                backstop = backstop_seconds(&g->cfg);
                pthread_mutex_unlock(&g->lock);
                (void)MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, backstop);
                return;
        }
        if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
                struct gconn *c = *socket_context;

                pthread_mutex_lock(&g->lock);
                if (c->in_table && g->byfd[c->fd] == c)
                        g->byfd[c->fd] = NULL;
                connguard_uncount(g, c);
                pthread_mutex_unlock(&g->lock);
                free(c);
                *socket_context = NULL;
        }
}

/* libmicrohttpd's thread: a request line has arrived. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *mc)
{
        struct connguard *g = cls;
        struct gconn *c = conn_of(mc);

        (void)uri;
        if (c) {
                pthread_mutex_lock(&g->lock);
                if (c->phase == PHASE_IDLE)
                        connguard_begin_request(g, c, now_monotonic(), false);
                pthread_mutex_unlock(&g->lock);
        }
        return NULL;
}

void connguard_headers_done(struct connguard *g, struct MHD_Connection *mc)
{
        struct gconn *c = conn_of(mc);

        if (!c)
                return;
        pthread_mutex_lock(&g->lock);
        if (c->phase == PHASE_IDLE)
                connguard_begin_request(g, c, now_monotonic(), false);
        c->phase = PHASE_HANDLING;
        pthread_mutex_unlock(&g->lock);
}

/* libmicrohttpd's thread: a response has been sent (or the request ended otherwise). */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct connguard *g = cls;
        struct gconn *c = conn_of(mc);
        uint64_t rx;
        uint32_t segs;

        (void)req_cls;
        (void)toe;
        if (!c)
                return;
        rx = connguard_rx_bytes(c->fd, &segs);
        pthread_mutex_lock(&g->lock);
        c->phase = PHASE_IDLE;
        c->since = now_monotonic();
        c->rx_mark = rx;
        c->segs_mark = segs;
        /* Unless it is closing: its next request's first byte wakes the guard (a byte already
         * there is reported at once). */
        if (!c->closing)
                connguard_arm(g, c, true);
        connguard_busy(g);
        connguard_share_cpu(g);
        pthread_mutex_unlock(&g->lock);
}

void connguard_mhd_options(struct connguard *g, struct MHD_OptionItem *opts)
{
        struct MHD_OptionItem o[CONNGUARD_MHD_OPTIONS] = {
            {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, g},
            {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_request_line, g},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, g},
            /* The guard counts; libmicrohttpd's own limit must never be the one that binds. */
            {MHD_OPTION_CONNECTION_LIMIT, 1 << 20, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)backstop_seconds(&g->cfg), NULL},
            {MHD_OPTION_END, 0, NULL},
        };
        memcpy(opts, o, sizeof o);
}
