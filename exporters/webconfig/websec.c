/* The web config in libmicrohttpd: TLS through tls.c's certificate callback, basic auth through
 * auth.c, with connections suspended (MHD_suspend_connection) while their bcrypt check runs on
 * auth.c's worker, so that the HTTP thread goes on serving everyone else. */
#include "websec.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "auth.h"
#include "fsroot.h"
#include "log.h"
#include "metrics.h"
#include "refcount.h"
#include "tls.h"
#include "util.h"
#include "webconfig.h"

#define MAX_FILE (1 << 20)

struct websec {
        struct refcount refs;
        char *path;            /* NULL: no web config */
        struct webconfig *cfg; /* NULL: no web config */
        struct tls_creds *tls; /* NULL: plain HTTP */
        const char *dummy;     /* the hash checked for unknown users */
};

/* A request whose bcrypt check was handed to the worker. */
struct pending {
        struct pending *next;
        struct MHD_Connection *conn;
        bool known;     /* the user exists */
        bool suspended; /* the connection waits for done() */
        bool finished, match;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct websec *current;
static bool started, started_tls, stopping;
static char *started_prio;
static struct MHD_OptionItem mhd_opts[3];
static struct pending *pendings;
static size_t n_pending;
/* basic auth outcomes: let in, refused (401), too many waiting (503) */
static uint64_t n_ok, n_refused, n_busy;

static void count(uint64_t *c)
{
        __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

static struct websec *websec_ref(struct websec *s)
{
        if (s)
                refcount_get(&s->refs);
        return s;
}

struct websec *websec_free(struct websec *s)
{
        if (!s || !refcount_put(&s->refs))
                return NULL;
        free(s->path);
        webconfig_free(s->cfg);
        tls_creds_unref(s->tls);
        free(s);
        return NULL;
}

static struct websec *get(void)
{
        struct websec *s;

        pthread_mutex_lock(&lock);
        s = websec_ref(current);
        pthread_mutex_unlock(&lock);
        return s;
}

int websec_load(const char *path, struct websec **ret, char *err, size_t errsz)
{
        struct websec *s = xcalloc(1, sizeof(*s));
        _cleanup_free_ char *buf = NULL, *dir = NULL;
        size_t len;
        unsigned max_cost = 0;
        char *slash;
        int r;

        refcount_init(&s->refs);
        if (!path || !*path) {
                *ret = s;
                return 0;
        }
        s->path = xstrdup(path);
        r = read_file_at(AT_FDCWD, path, MAX_FILE, &buf, &len);
        if (r < 0) {
                snprintf(err, errsz, "cannot read web config file %s: %s", path,
                         r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
                websec_free(s);
                return r;
        }
        dir = xstrdup(path);
        slash = strrchr(dir, '/');
        if (slash)
                slash[slash == dir ? 1 : 0] = 0;
        else
                dir[0] = 0;
        r = webconfig_parse(buf, len, path, dir, &s->cfg, err, errsz);
        if (r >= 0 && s->cfg->tls)
                r = tls_creds_load(s->cfg, path, &s->tls, err, errsz);
        if (r < 0) {
                websec_free(s);
                return r;
        }
        /* An unknown user costs a bcrypt too, of the dearest hash, so that the time of a
         * refusal does not tell which names exist. */
        for (size_t i = 0; i < s->cfg->n_users; i++)
                if (s->cfg->users[i].cost > max_cost) {
                        max_cost = s->cfg->users[i].cost;
                        s->dummy = s->cfg->users[i].hash;
                }
        *ret = s;
        return 0;
}

void websec_describe(const struct websec *s, FILE *out)
{
        const struct webconfig *c = s ? s->cfg : NULL;
        bool any = false;

        if (!c) {
                fputs("# web: plain HTTP, no authentication\n", out);
                return;
        }
        fprintf(out, "# web: config %s\n", s->path);
        if (s->tls) {
                char when[32] = "?";
                time_t t = (time_t)tls_creds_not_after(s->tls);
                struct tm tm;
                if (gmtime_r(&t, &tm))
                        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
                fprintf(out, "# web: TLS %s to %s, client certificates %s\n",
                        webconfig_tls_version_name(c->min_version),
                        webconfig_tls_version_name(c->max_version),
                        webconfig_client_auth_name(c->client_auth));
                fprintf(out, "# web: certificate \"%s\", valid until %s\n",
                        tls_creds_subject(s->tls), when);
                fprintf(out, "# web: GnuTLS priorities %s\n", tls_creds_priorities(s->tls));
        } else {
                fputs("# web: plain HTTP (no tls_server_config)\n", out);
        }
        fprintf(out, "# web: basic auth %s", c->n_users ? "required, users" : "off");
        for (size_t i = 0; i < c->n_users; i++)
                fprintf(out, " %s", c->users[i].name);
        fputs("\n# web: headers", out);
        for (size_t i = 0; i < WEB_HEADER_MAX; i++)
                if (c->headers[i]) {
                        fprintf(out, " %s", webconfig_header_names[i]);
                        any = true;
                }
        fputs(any ? "\n" : " none\n", out);
}

void websec_install(struct websec *s)
{
        struct websec *old;

        pthread_mutex_lock(&lock);
        old = current;
        if (started && (s->tls != NULL) != started_tls) {
                log_warn("TLS is turned on or off only by a restart; the running server keeps it",
                         "tls", started_tls ? "on" : "off");
                if (started_tls && old) {
                        s->tls = tls_creds_ref(old->tls);
                } else {
                        s->tls = tls_creds_unref(s->tls);
                }
        } else if (started && s->tls && started_prio &&
                   strcmp(tls_creds_priorities(s->tls), started_prio) != 0) {
                log_warn("min_version, max_version, cipher_suites, curve_preferences and "
                         "prefer_server_cipher_suites change only on restart; the running server "
                         "keeps its own");
        }
        current = s;
        pthread_mutex_unlock(&lock);
        tls_creds_use(s->tls);
        if (s->tls && tls_creds_not_after(s->tls) < (long long)time(NULL))
                log_warn("the TLS certificate has expired", "subject", tls_creds_subject(s->tls));
        if (s->cfg)
                log_info("web config in use", "file", s->path, "tls", s->tls ? "on" : "off",
                         "client_auth_type",
                         s->tls ? webconfig_client_auth_name(s->cfg->client_auth) : "-",
                         "basic_auth", s->cfg->n_users ? "on" : "off");
        websec_free(old);
}

static void mark_started(void)
{
        pthread_mutex_lock(&lock);
        if (!started) {
                started = true;
                started_tls = current && current->tls;
                free(started_prio);
                started_prio = started_tls ? xstrdup(tls_creds_priorities(current->tls)) : NULL;
        }
        stopping = false;
        pthread_mutex_unlock(&lock);
}

unsigned websec_mhd_flags(void)
{
        mark_started();
        return (started_tls ? MHD_USE_TLS : 0) | MHD_ALLOW_SUSPEND_RESUME;
}

const struct MHD_OptionItem *websec_mhd_options(int listen_fd)
{
        size_t n = 0;
        int one = 1;

        mark_started();
        if (started_tls) {
                /* GnuTLS sends a handshake flight as several records: without TCP_NODELAY
                 * (inherited by accepted sockets) Nagle's algorithm holds the later ones until
                 * the client's delayed ACK, 40 ms on Linux. */
                if (setsockopt(listen_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
                        log_debug("cannot set TCP_NODELAY", "error", strerror(errno));
                mhd_opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK2, 0,
                                                        (void *)tls_creds_retrieve};
                mhd_opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, started_prio};
        }
        mhd_opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        return mhd_opts;
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *body)
{
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result q;

        if (!r)
                return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (status == MHD_HTTP_UNAUTHORIZED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                        "Basic realm=\"diskpulse\", charset=\"UTF-8\"");
        else
                MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        websec_add_headers(r);
        q = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return q;
}

static bool decide(struct MHD_Connection *c, bool allow, enum MHD_Result *ret)
{
        count(allow ? &n_ok : &n_refused);
        if (allow)
                return true;
        *ret = respond(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized\n");
        return false;
}

/* Called by the worker when a check is done, or never when it was cancelled. */
static void check_done(void *ud, bool match)
{
        struct pending *p = ud;

        pthread_mutex_lock(&lock);
        if (!p->finished) {
                p->finished = true;
                p->match = match;
                if (p->suspended && p->conn)
                        MHD_resume_connection(p->conn);
        }
        pthread_mutex_unlock(&lock);
}

/* Takes the pending check of c out of the list; with the lock held. */
static struct pending *take_pending(struct MHD_Connection *c)
{
        for (struct pending **pp = &pendings; *pp; pp = &(*pp)->next)
                if ((*pp)->conn == c) {
                        struct pending *p = *pp;
                        *pp = p->next;
                        n_pending--;
                        return p;
                }
        return NULL;
}

static bool check_basic(struct websec *s, struct MHD_Connection *c, enum MHD_Result *ret)
{
        const char *hdr =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        char user[AUTH_USER_MAX], pass[AUTH_PASS_MAX];
        const struct web_user *u = NULL;
        const char *hash;
        struct auth_key key;
        struct pending *p;
        bool allow;
        int r;

        pthread_mutex_lock(&lock);
        if (stopping) {
                pthread_mutex_unlock(&lock);
                *ret = MHD_NO;
                return false;
        }
        /* the second call, after check_done() resumed the connection */
        p = take_pending(c);
        if (p && !p->finished) {
                /* never happens (a suspended connection is not served): keep the entry for
                 * check_done() but let it not touch the connection */
                p->conn = NULL;
                p->suspended = false;
                p->next = pendings;
                pendings = p;
                n_pending++;
                pthread_mutex_unlock(&lock);
                *ret = MHD_NO;
                return false;
        }
        pthread_mutex_unlock(&lock);
        if (p) {
                allow = p->match && p->known;
                free(p);
                return decide(c, allow, ret);
        }
        if (!auth_parse_basic(hdr, user, sizeof user, pass, sizeof pass))
                return decide(c, false, ret);
        for (size_t i = 0; i < s->cfg->n_users && !u; i++)
                if (strcmp(s->cfg->users[i].name, user) == 0)
                        u = &s->cfg->users[i];
        hash = u ? u->hash : s->dummy;
        auth_key_of(user, hash, pass, &key);
        r = auth_cache_get(&key);
        if (r >= 0) {
                explicit_bzero(pass, sizeof pass);
                return decide(c, r == 1 && u, ret);
        }
        p = xcalloc(1, sizeof(*p));
        p->conn = c;
        p->known = u != NULL;
        /* With the lock held throughout, check_done() cannot resume the connection before it
         * is suspended, and websec_stop() cannot free p under us. */
        pthread_mutex_lock(&lock);
        r = stopping                      ? -ECANCELED
            : n_pending >= AUTH_QUEUE_MAX ? -EBUSY
                                          : auth_submit(&key, hash, pass, check_done, p);
        explicit_bzero(pass, sizeof pass);
        if (r < 0) {
                pthread_mutex_unlock(&lock);
                free(p);
                if (r == -ECANCELED) {
                        *ret = MHD_NO;
                        return false;
                }
                count(&n_busy);
                *ret = respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many logins at once\n");
                return false;
        }
        p->next = pendings;
        pendings = p;
        n_pending++;
        MHD_suspend_connection(c);
        p->suspended = true;
        pthread_mutex_unlock(&lock);
        *ret = MHD_YES;
        return false;
}

bool websec_admit(struct MHD_Connection *c, enum MHD_Result *ret)
{
        struct websec *s = get();
        bool ok = true;

        if (s && s->tls) {
                const union MHD_ConnectionInfo *i =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
                if (!i || !i->tls_session ||
                    !tls_creds_session_ok((gnutls_session_t)i->tls_session)) {
                        *ret = MHD_NO;
                        ok = false;
                }
        }
        if (ok && s && s->cfg && s->cfg->n_users)
                ok = check_basic(s, c, ret);
        websec_free(s);
        return ok;
}

void websec_add_headers(struct MHD_Response *r)
{
        struct websec *s = get();

        for (size_t i = 0; s && s->cfg && i < WEB_HEADER_MAX; i++)
                if (s->cfg->headers[i])
                        MHD_add_response_header(r, webconfig_header_names[i], s->cfg->headers[i]);
        websec_free(s);
}

void websec_stop(void)
{
        pthread_mutex_lock(&lock);
        stopping = true;
        for (struct pending *p = pendings; p; p = p->next)
                if (!p->finished) {
                        p->finished = true;
                        p->match = false;
                        if (p->suspended && p->conn)
                                MHD_resume_connection(p->conn);
                }
        pthread_mutex_unlock(&lock);
        /* queued checks are dropped; the running one finds its request finished already */
        auth_cancel_all();
        pthread_mutex_lock(&lock);
        while (pendings) {
                struct pending *p = pendings;
                pendings = p->next;
                free(p);
        }
        n_pending = 0;
        pthread_mutex_unlock(&lock);
}

void websec_export(struct mset *out)
{
        struct websec *s = get();
        struct mfamily *f;

        if (s && s->cfg && s->cfg->n_users) {
                f = mset_family(out, "diskpulse_http_basic_auth_total",
                                "Requests checked by basic auth, by result: ok, refused (401), "
                                "busy (503, too many bcrypt checks waiting).",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", __atomic_load_n(&n_ok, __ATOMIC_RELAXED), "result",
                                "ok", NULL);
                mfamily_add_u64(out, f, "", __atomic_load_n(&n_refused, __ATOMIC_RELAXED), "result",
                                "refused", NULL);
                mfamily_add_u64(out, f, "", __atomic_load_n(&n_busy, __ATOMIC_RELAXED), "result",
                                "busy", NULL);
                f = mset_family(out, "diskpulse_http_bcrypt_checks_total",
                                "bcrypt computations run for basic auth (checks not answered from "
                                "the cache).",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", auth_bcrypt_runs(), NULL);
        }
        if (s && s->tls && tls_creds_client_auth(s->tls) != WEB_CLIENT_NONE) {
                f = mset_family(out, "diskpulse_http_tls_client_cert_refused_total",
                                "TLS handshakes ended because of the client's certificate.",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", tls_creds_refused_client_certs(), NULL);
        }
        websec_free(s);
}
