/* The web config object in libmicrohttpd: TLS through the certificate callback here, which
 * hands over tls.c's credentials, basic auth through the object's auth.c checker, with
 * connections suspended (MHD_suspend_connection) while their bcrypt check runs on its worker, so
 * that the HTTP thread goes on serving everyone else. */
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

/* The configuration of one file, shared by the requests that read it (reference counted). */
struct websec_conf {
        struct refcount refs;
        char *path;            /* NULL: no web config */
        struct webconfig *cfg; /* NULL: no web config */
        struct tls_creds *tls; /* NULL: plain HTTP */
        const char *dummy;     /* the hash checked for unknown users */
};

/* A request whose bcrypt check was handed to the worker. */
struct pending {
        struct pending *next;
        struct websec *s;
        struct MHD_Connection *conn;
        bool known;     /* the user exists */
        bool suspended; /* the connection waits for done() */
        bool finished, match;
};

struct websec {
        pthread_mutex_t lock;
        struct websec_conf *conf; /* of new handshakes and requests */
        struct auth_checker *auth;
        struct MHD_Daemon *daemon; /* the server's, while attached */
        struct websec *next_served;
        bool started, started_tls, stopping;
        char *started_prio;
        struct MHD_OptionItem mhd_opts[3];
        struct pending *pendings;
        size_t n_pending;
        /* basic auth outcomes: let in, refused (401), too many waiting (503); handshakes ended
         * for the client's certificate */
        uint64_t n_ok, n_refused, n_busy, n_cert_refused;
};

/* libmicrohttpd's certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK2) and GnuTLS's verify
 * function take no closure: a handshake finds the web config of its server through its session
 * (whose pointer libmicrohttpd sets to the connection), the connection's daemon and this list of
 * the attached objects. It is the part's only mutable file-scope state. */
static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static struct websec *served;

static void count(uint64_t *c)
{
        __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

static void conf_destroy(struct websec_conf *c)
{
        free(c->path);
        webconfig_free(c->cfg);
        tls_creds_unref(c->tls);
        free(c);
}

REFCOUNT_DEFINE(static, struct websec_conf, conf, refs, conf_destroy)

/* A reference to the configuration in use now. */
static struct websec_conf *get(struct websec *s)
{
        struct websec_conf *c;

        pthread_mutex_lock(&s->lock);
        c = conf_ref(s->conf);
        pthread_mutex_unlock(&s->lock);
        return c;
}

struct websec *websec_free(struct websec *s)
{
        if (!s)
                return NULL;
        if (s->daemon)
                websec_detach(s); /* freed before its server: no handshake may find it */
        s->auth = auth_checker_free(s->auth);
        while (s->pendings) {
                struct pending *p = s->pendings;
                s->pendings = p->next;
                free(p);
        }
        conf_unref(s->conf);
        free(s->started_prio);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

static int load_conf(const char *path, struct websec_conf *c, char *err, size_t errsz)
{
        _cleanup_free_ char *buf = NULL, *dir = NULL;
        size_t len;
        unsigned max_cost = 0;
        char *slash, why[128];
        int r;

        c->path = xstrdup(path);
        /* a regular file only: a FIFO in its place would block a reload forever */
        r = read_regular_at(AT_FDCWD, path, MAX_FILE, &buf, &len, why, sizeof why);
        if (r < 0) {
                snprintf(err, errsz, "cannot read web config file %s: %s", path, why);
                return r;
        }
        dir = xstrdup(path);
        slash = strrchr(dir, '/');
        if (slash)
                slash[slash == dir ? 1 : 0] = 0;
        else
                dir[0] = 0;
        r = webconfig_parse(buf, len, path, dir, &c->cfg, err, errsz);
        if (r >= 0 && c->cfg->tls)
                r = tls_creds_load(c->cfg, path, &c->tls, err, errsz);
        if (r < 0)
                return r;
        /* An unknown user costs a bcrypt too, of the dearest hash, so that the time of a
         * refusal does not tell which names exist. */
        for (size_t i = 0; i < c->cfg->n_users; i++)
                if (c->cfg->users[i].cost > max_cost) {
                        max_cost = c->cfg->users[i].cost;
                        c->dummy = c->cfg->users[i].hash;
                }
        return 0;
}

int websec_load(const char *path, struct websec **ret, char *err, size_t errsz)
{
        struct websec_conf *c = xcalloc(1, sizeof(*c));
        struct websec *s;
        int r;

        refcount_init(&c->refs);
        if (path && *path && (r = load_conf(path, c, err, errsz)) < 0) {
                conf_unref(c);
                return r;
        }
        s = xcalloc(1, sizeof(*s));
        pthread_mutex_init(&s->lock, NULL);
        s->conf = c;
        s->auth = auth_checker_new();
        *ret = s;
        return 0;
}

void websec_describe(const struct websec *s, FILE *out)
{
        const struct websec_conf *w = s ? s->conf : NULL;
        const struct webconfig *c = w ? w->cfg : NULL;
        bool any = false;

        if (!c) {
                fputs("# web: plain HTTP, no authentication\n", out);
                return;
        }
        fprintf(out, "# web: config %s\n", w->path);
        if (w->tls) {
                char when[32] = "?";
                time_t t = (time_t)tls_creds_not_after(w->tls);
                struct tm tm;
                if (gmtime_r(&t, &tm))
                        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
                fprintf(out, "# web: TLS %s to %s, client certificates %s\n",
                        webconfig_tls_version_name(c->min_version),
                        webconfig_tls_version_name(c->max_version),
                        webconfig_client_auth_name(c->client_auth));
                fprintf(out, "# web: certificate \"%s\", valid until %s\n",
                        tls_creds_subject(w->tls), when);
                fprintf(out, "# web: GnuTLS priorities %s\n", tls_creds_priorities(w->tls));
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

struct websec *websec_install(struct websec *running, struct websec *next)
{
        struct websec *s = running ? running : next;
        struct websec_conf *c = next->conf, *old;

        if (running) {
                next->conf = NULL;
                websec_free(next);
        }
        pthread_mutex_lock(&s->lock);
        old = running ? s->conf : NULL;
        if (s->started && (c->tls != NULL) != s->started_tls) {
                log_warn("TLS is turned on or off only by a restart; the running server keeps it",
                         "tls", s->started_tls ? "on" : "off");
                if (s->started_tls && old) {
                        c->tls = tls_creds_ref(old->tls);
                } else {
                        c->tls = tls_creds_unref(c->tls);
                }
        } else if (s->started && c->tls && s->started_prio &&
                   strcmp(tls_creds_priorities(c->tls), s->started_prio) != 0) {
                log_warn("min_version, max_version, cipher_suites, curve_preferences and "
                         "prefer_server_cipher_suites change only on restart; the running server "
                         "keeps its own");
        }
        s->conf = c;
        pthread_mutex_unlock(&s->lock);
        if (c->tls && tls_creds_not_after(c->tls) < (long long)time(NULL))
                log_warn("the TLS certificate has expired", "subject", tls_creds_subject(c->tls));
        if (c->cfg)
                log_info("web config in use", "file", c->path, "tls", c->tls ? "on" : "off",
                         "client_auth_type",
                         c->tls ? webconfig_client_auth_name(c->cfg->client_auth) : "-",
                         "basic_auth", c->cfg->n_users ? "on" : "off");
        conf_unref(old);
        return s;
}

static void mark_started(struct websec *s)
{
        pthread_mutex_lock(&s->lock);
        if (!s->started) {
                s->started = true;
                s->started_tls = s->conf->tls != NULL;
                free(s->started_prio);
                s->started_prio =
                    s->started_tls ? xstrdup(tls_creds_priorities(s->conf->tls)) : NULL;
        }
        s->stopping = false;
        pthread_mutex_unlock(&s->lock);
}

unsigned websec_mhd_flags(struct websec *s)
{
        mark_started(s);
        return (s->started_tls ? MHD_USE_TLS : 0) | MHD_ALLOW_SUSPEND_RESUME;
}

/* The attached object whose daemon serves the connection of session t; NULL when none. It stays
 * attached while its daemon runs, so the daemon's threads may use it without the lock. */
static struct websec *served_by(gnutls_session_t t)
{
        struct MHD_Connection *c = gnutls_session_get_ptr(t);
        const union MHD_ConnectionInfo *i =
            c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON) : NULL;
        struct websec *s = NULL;

        pthread_mutex_lock(&served_lock);
        for (s = served; s && i && s->daemon != i->daemon; s = s->next_served)
                ;
        pthread_mutex_unlock(&served_lock);
        return i ? s : NULL;
}

static int verify_peer(gnutls_session_t t)
{
        struct websec *s = served_by(t);
        struct websec_conf *c = s ? get(s) : NULL;
        int r = tls_creds_verify(c ? c->tls : NULL, t);

        conf_unref(c);
        if (r < 0 && s)
                count(&s->n_cert_refused);
        return r < 0 ? -1 : 0;
}

/* The retrieve function of MHD_OPTION_HTTPS_CERT_CALLBACK2: the certificate of the server's web
 * config in use now. */
static int retrieve(gnutls_session_t t, const struct gnutls_cert_retr_st *info,
                    gnutls_pcert_st **certs, unsigned int *certs_length, gnutls_ocsp_data_st **ocsp,
                    unsigned int *ocsp_length, gnutls_privkey_t *privkey, unsigned int *flags)
{
        struct websec *s = served_by(t);
        struct websec_conf *c = s ? get(s) : NULL;
        int r = c && c->tls
                    ? tls_creds_hand_over(c->tls, t, verify_peer, certs, certs_length, privkey)
                    : -1;

        (void)info;
        conf_unref(c);
        if (r < 0)
                return -1;
        *ocsp = NULL;
        *ocsp_length = 0;
        *flags = GNUTLS_CERT_RETR_DEINIT_ALL;
        return 0;
}

const struct MHD_OptionItem *websec_mhd_options(struct websec *s, int listen_fd)
{
        size_t n = 0;
        int one = 1;

        mark_started(s);
        if (s->started_tls) {
                /* GnuTLS sends a handshake flight as several records: without TCP_NODELAY
                 * (inherited by accepted sockets) Nagle's algorithm holds the later ones until
                 * the client's delayed ACK, 40 ms on Linux. */
                if (setsockopt(listen_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
                        log_debug("cannot set TCP_NODELAY", "error", strerror(errno));
                s->mhd_opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK2, 0, (void *)retrieve};
                s->mhd_opts[n++] =
                    (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, s->started_prio};
        }
        s->mhd_opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        return s->mhd_opts;
}

void websec_attach(struct websec *s, struct MHD_Daemon *d)
{
        pthread_mutex_lock(&served_lock);
        s->daemon = d;
        s->next_served = served;
        served = s;
        pthread_mutex_unlock(&served_lock);
}

void websec_detach(struct websec *s)
{
        pthread_mutex_lock(&served_lock);
        for (struct websec **p = &served; *p; p = &(*p)->next_served)
                if (*p == s) {
                        *p = s->next_served;
                        break;
                }
        s->daemon = NULL;
        s->next_served = NULL;
        pthread_mutex_unlock(&served_lock);
}

static enum MHD_Result respond(struct websec *s, struct MHD_Connection *c, unsigned status,
                               const char *body)
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
        websec_add_headers(s, r);
        q = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return q;
}

static bool decide(struct websec *s, struct MHD_Connection *c, bool allow, enum MHD_Result *ret)
{
        count(allow ? &s->n_ok : &s->n_refused);
        if (allow)
                return true;
        *ret = respond(s, c, MHD_HTTP_UNAUTHORIZED, "Unauthorized\n");
        return false;
}

/* Called by the worker when a check is done, or never when it was cancelled. */
static void check_done(void *ud, bool match)
{
        struct pending *p = ud;
        struct websec *s = p->s;

        pthread_mutex_lock(&s->lock);
        if (!p->finished) {
                p->finished = true;
                p->match = match;
                if (p->suspended && p->conn)
                        MHD_resume_connection(p->conn);
        }
        pthread_mutex_unlock(&s->lock);
}

/* Takes the pending check of c out of the list; with the lock held. */
static struct pending *take_pending(struct websec *s, struct MHD_Connection *c)
{
        for (struct pending **pp = &s->pendings; *pp; pp = &(*pp)->next)
                if ((*pp)->conn == c) {
                        struct pending *p = *pp;
                        *pp = p->next;
                        s->n_pending--;
                        return p;
                }
        return NULL;
}

static bool check_basic(struct websec *s, const struct websec_conf *w, struct MHD_Connection *c,
                        enum MHD_Result *ret)
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

        pthread_mutex_lock(&s->lock);
        if (s->stopping) {
                pthread_mutex_unlock(&s->lock);
                *ret = MHD_NO;
                return false;
        }
        /* the second call, after check_done() resumed the connection */
        p = take_pending(s, c);
        if (p && !p->finished) {
                /* never happens (a suspended connection is not served): keep the entry for
                 * check_done() but let it not touch the connection */
                p->conn = NULL;
                p->suspended = false;
                p->next = s->pendings;
                s->pendings = p;
                s->n_pending++;
                pthread_mutex_unlock(&s->lock);
                *ret = MHD_NO;
                return false;
        }
        pthread_mutex_unlock(&s->lock);
        if (p) {
                allow = p->match && p->known;
                free(p);
                return decide(s, c, allow, ret);
        }
        if (!auth_parse_basic(hdr, user, sizeof user, pass, sizeof pass))
                return decide(s, c, false, ret);
        for (size_t i = 0; i < w->cfg->n_users && !u; i++)
                if (strcmp(w->cfg->users[i].name, user) == 0)
                        u = &w->cfg->users[i];
        hash = u ? u->hash : w->dummy;
        auth_key_of(s->auth, user, hash, pass, &key);
        r = auth_cache_get(s->auth, &key);
        if (r >= 0) {
                explicit_bzero(pass, sizeof pass);
                return decide(s, c, r == 1 && u, ret);
        }
        p = xcalloc(1, sizeof(*p));
        p->s = s;
        p->conn = c;
        p->known = u != NULL;
        /* With the lock held throughout, check_done() cannot resume the connection before it
         * is suspended, and websec_stop() cannot free p under us. */
        pthread_mutex_lock(&s->lock);
        r = s->stopping ? -ECANCELED
            : s->n_pending >= AUTH_QUEUE_MAX
                ? -EBUSY
                : auth_submit(s->auth, &key, hash, pass, check_done, p);
        explicit_bzero(pass, sizeof pass);
        if (r < 0) {
                pthread_mutex_unlock(&s->lock);
                free(p);
                if (r == -ECANCELED) {
                        *ret = MHD_NO;
                        return false;
                }
                count(&s->n_busy);
                *ret = respond(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many logins at once\n");
                return false;
        }
        p->next = s->pendings;
        s->pendings = p;
        s->n_pending++;
        MHD_suspend_connection(c);
        p->suspended = true;
        pthread_mutex_unlock(&s->lock);
        *ret = MHD_YES;
        return false;
}

bool websec_admit(struct websec *s, struct MHD_Connection *c, enum MHD_Result *ret)
{
        struct websec_conf *w = get(s);
        bool ok = true;

        if (w->tls) {
                const union MHD_ConnectionInfo *i =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
                if (!i || !i->tls_session ||
                    !tls_creds_session_ok(w->tls, (gnutls_session_t)i->tls_session)) {
                        *ret = MHD_NO;
                        ok = false;
                }
        }
        if (ok && w->cfg && w->cfg->n_users)
                ok = check_basic(s, w, c, ret);
        conf_unref(w);
        return ok;
}

void websec_add_headers(struct websec *s, struct MHD_Response *r)
{
        struct websec_conf *w = get(s);

        for (size_t i = 0; w->cfg && i < WEB_HEADER_MAX; i++)
                if (w->cfg->headers[i])
                        MHD_add_response_header(r, webconfig_header_names[i], w->cfg->headers[i]);
        conf_unref(w);
}

void websec_stop(struct websec *s)
{
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        for (struct pending *p = s->pendings; p; p = p->next)
                if (!p->finished) {
                        p->finished = true;
                        p->match = false;
                        if (p->suspended && p->conn)
                                MHD_resume_connection(p->conn);
                }
        pthread_mutex_unlock(&s->lock);
        /* queued checks are dropped; the running one finds its request finished already */
        auth_cancel_all(s->auth);
        pthread_mutex_lock(&s->lock);
        while (s->pendings) {
                struct pending *p = s->pendings;
                s->pendings = p->next;
                free(p);
        }
        s->n_pending = 0;
        pthread_mutex_unlock(&s->lock);
}

void websec_export(struct websec *s, struct mset *out)
{
        struct websec_conf *w = s ? get(s) : NULL;
        struct mfamily *f;

        if (w && w->cfg && w->cfg->n_users) {
                f = mset_family(out, "diskpulse_http_basic_auth_total",
                                "Requests checked by basic auth, by result: ok, refused (401), "
                                "busy (503, too many bcrypt checks waiting).",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", __atomic_load_n(&s->n_ok, __ATOMIC_RELAXED), "result",
                                "ok", NULL);
                mfamily_add_u64(out, f, "", __atomic_load_n(&s->n_refused, __ATOMIC_RELAXED),
                                "result", "refused", NULL);
                mfamily_add_u64(out, f, "", __atomic_load_n(&s->n_busy, __ATOMIC_RELAXED), "result",
                                "busy", NULL);
                f = mset_family(out, "diskpulse_http_bcrypt_checks_total",
                                "bcrypt computations run for basic auth (checks not answered from "
                                "the cache).",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", auth_bcrypt_runs(s->auth), NULL);
        }
        if (w && w->tls && tls_creds_client_auth(w->tls) != WEB_CLIENT_NONE) {
                f = mset_family(out, "diskpulse_http_tls_client_cert_refused_total",
                                "TLS handshakes ended because of the client's certificate.",
                                MT_COUNTER);
                mfamily_add_u64(out, f, "", __atomic_load_n(&s->n_cert_refused, __ATOMIC_RELAXED),
                                NULL);
        }
        conf_unref(w);
}
