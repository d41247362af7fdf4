/* Basic authentication: RFC 7617 (the Basic scheme), RFC 4648 section 4 (base64, decoded by GnuTLS), libxcrypt's
 * crypt(5) for bcrypt ($2b$, $2y$, $2a$). */
#include "auth.h"

#include <crypt.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "dynlib.h"
#include "log.h"
#include "refcount.h"
#include "util.h"

/* libxcrypt, loaded when a web config names users (auth_load): the one function used. A
 * dlopen()ed library's symbol table, loaded once for the process (dynlib.h), is the part's only
 * file-scope state here; everything a check needs is in its struct auth_checker. */
static __typeof__(crypt_r) *sym_crypt_r;
static const struct dynlib_sym crypt_syms[] = {DYNLIB_SYM(crypt_r)};
static struct dynlib libcrypt =
    DYNLIB_INIT("libcrypt.so.1", "libcrypt1", "basic authentication", crypt_syms);

int auth_load(char *err, size_t errsz)
{
        return dynlib_load(&libcrypt, err, errsz);
}

/* True when s has the shape of Go's base64.StdEncoding (RFC 4648 section 4 with padding): groups
 * of four from the standard alphabet, '=' only as the last one or two bytes. GnuTLS decodes, and
 * checks that a padded group leaves no bits over, but skips whitespace and stops quietly at a
 * byte outside the alphabet (base64url's '-' ends the data early): what it must not see is
 * refused here. */
static bool b64_strict_shape(const char *s, size_t len)
{
        size_t pad = 0;

        if (len == 0 || len % 4)
                return false;
        pad = (s[len - 1] == '=') + (s[len - 1] == '=' && s[len - 2] == '=');
        for (size_t i = 0; i < len - pad; i++) {
                char c = s[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '+' || c == '/'))
                        return false;
        }
        return true;
}

bool auth_parse_basic(const char *value, char *user, size_t usz, char *pass, size_t psz)
{
        const char *p = value, *tok;
        size_t toklen, n;
        gnutls_datum_t b64, plain = {NULL, 0};
        unsigned char *buf, *colon;
        bool ok = false;

        if (!value || usz == 0 || psz == 0)
                return false;
        while (*p == ' ' || *p == '\t')
                p++;
        if (strncasecmp(p, "Basic", 5) != 0 || (p[5] != ' ' && p[5] != '\t'))
                return false;
        p += 5;
        while (*p == ' ' || *p == '\t')
                p++;
        tok = p;
        toklen = strcspn(tok, " \t");
        for (const char *q = tok + toklen; *q; q++)
                if (*q != ' ' && *q != '\t')
                        return false; /* one token68 only (RFC 7235 section 2.1) */
        if (toklen > ((AUTH_USER_MAX + AUTH_PASS_MAX) / 3 + 1) * 4 ||
            !b64_strict_shape(tok, toklen))
                return false;
        b64 = (gnutls_datum_t){.data = (unsigned char *)tok, .size = (unsigned)toklen};
        if (gnutls_base64_decode2(&b64, &plain) < 0)
                return false;
        buf = plain.data;
        n = plain.size;
        colon = buf ? memchr(buf, ':', n) : NULL;
        if (colon && !memchr(buf, 0, n) && (size_t)(colon - buf) < usz &&
            n - (size_t)(colon + 1 - buf) < psz) {
                size_t ul = (size_t)(colon - buf), pl = n - ul - 1;
                memcpy(user, buf, ul);
                user[ul] = 0;
                memcpy(pass, colon + 1, pl);
                pass[pl] = 0;
                ok = true;
        }
        if (buf)
                explicit_bzero(buf, n);
        gnutls_free(buf);
        return ok;
}

#define CACHE_SLOTS 64

struct slot {
        struct auth_key key;
        uint64_t used; /* 0: empty */
};

struct job {
        struct job *next;
        struct auth_key key;
        char hash[64];
        char *pass;
        void (*done)(void *ud, bool match);
        void *ud;
};

struct auth_checker {
        /* its owner's, and one of each worker thread still running (a worker cancelled in the
         * middle of a bcrypt holds one until the hash ends, so stopping never waits for it) */
        struct refcount refs;
        unsigned char hmac_key[32];

        pthread_mutex_t cache_lock;
        struct slot cache_ok[CACHE_SLOTS], cache_bad[CACHE_SLOTS];
        uint64_t cache_tick;

        /* the worker */
        pthread_mutex_t lock;
        pthread_cond_t wake, idle;
        struct job *head, *tail;
        size_t queued;
        bool started;
        size_t workers;  /* worker threads running: the current one and cancelled ones */
        bool in_done;    /* the worker is in a job's done(): a cancel waits for that */
        uint64_t worker; /* the current worker's number; a cancel moves it on, which tells a
                            worker still running that it is not the current one any more */
        uint64_t bcrypt_runs;
};

struct auth_checker *auth_checker_new(void)
{
        struct auth_checker *a = xcalloc(1, sizeof(*a));
        size_t got = 0;

        refcount_init(&a->refs);
        while (got < sizeof a->hmac_key) {
                ssize_t r = getrandom(a->hmac_key + got, sizeof a->hmac_key - got, 0);
                if (r < 0 && errno != EINTR)
                        abort(); /* no randomness: nothing safe to do */
                if (r > 0)
                        got += (size_t)r;
        }
        pthread_mutex_init(&a->cache_lock, NULL);
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->wake, NULL);
        pthread_cond_init(&a->idle, NULL);
        return a;
}

static void checker_destroy(struct auth_checker *a)
{
        explicit_bzero(a->hmac_key, sizeof a->hmac_key);
        explicit_bzero(a->cache_ok, sizeof a->cache_ok);
        explicit_bzero(a->cache_bad, sizeof a->cache_bad);
        pthread_mutex_destroy(&a->cache_lock);
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->wake);
        pthread_cond_destroy(&a->idle);
        free(a);
}

REFCOUNT_DEFINE(static, struct auth_checker, checker, refs, checker_destroy)

struct auth_checker *auth_checker_free(struct auth_checker *a)
{
        if (!a)
                return NULL;
        auth_cancel_all(a);
        /* a worker still in a bcrypt frees a when the hash ends */
        return checker_unref(a);
}

void auth_key_of(const struct auth_checker *a, const char *user, const char *hash, const char *pass,
                 struct auth_key *ret)
{
        const char *parts[3] = {user, hash, pass};
        gnutls_hmac_hd_t h;

        if (gnutls_hmac_init(&h, GNUTLS_MAC_SHA256, a->hmac_key, sizeof a->hmac_key) < 0)
                abort();
        for (size_t i = 0; i < 3; i++) {
                uint32_t l = (uint32_t)strlen(parts[i]);
                unsigned char be[4] = {(unsigned char)(l >> 24), (unsigned char)(l >> 16),
                                       (unsigned char)(l >> 8), (unsigned char)l};
                /* length-prefixed, so ("ab", "c") and ("a", "bc") differ */
                gnutls_hmac(h, be, sizeof be);
                gnutls_hmac(h, parts[i], l);
        }
        gnutls_hmac_deinit(h, ret->b);
}

static bool key_eq(const struct auth_key *a, const struct auth_key *b)
{
        unsigned char d = 0;

        for (size_t i = 0; i < sizeof a->b; i++)
                d |= a->b[i] ^ b->b[i];
        return d == 0;
}

static struct slot *find(struct slot *t, const struct auth_key *k)
{
        for (size_t i = 0; i < CACHE_SLOTS; i++)
                if (t[i].used && key_eq(&t[i].key, k))
                        return &t[i];
        return NULL;
}

int auth_cache_get(struct auth_checker *a, const struct auth_key *k)
{
        struct slot *s;
        int r = -ENOENT;

        pthread_mutex_lock(&a->cache_lock);
        if ((s = find(a->cache_ok, k))) {
                s->used = ++a->cache_tick;
                r = 1;
        } else if ((s = find(a->cache_bad, k))) {
                s->used = ++a->cache_tick;
                r = 0;
        }
        pthread_mutex_unlock(&a->cache_lock);
        return r;
}

static void cache_put(struct auth_checker *a, const struct auth_key *k, bool match)
{
        struct slot *t = match ? a->cache_ok : a->cache_bad, *s;

        pthread_mutex_lock(&a->cache_lock);
        s = find(t, k);
        if (!s) {
                s = &t[0];
                for (size_t i = 1; i < CACHE_SLOTS && s->used; i++)
                        if (!t[i].used || t[i].used < s->used)
                                s = &t[i];
                s->key = *k;
        }
        s->used = ++a->cache_tick;
        pthread_mutex_unlock(&a->cache_lock);
}

void auth_cache_clear(struct auth_checker *a)
{
        pthread_mutex_lock(&a->cache_lock);
        memset(a->cache_ok, 0, sizeof a->cache_ok);
        memset(a->cache_bad, 0, sizeof a->cache_bad);
        pthread_mutex_unlock(&a->cache_lock);
}

static bool bcrypt_with(struct crypt_data *cd, const char *hash, const char *pass)
{
        size_t hl = strlen(hash);
        const char *out;
        unsigned char d = 0;
        char why[512];

        if (auth_load(why, sizeof why) < 0) {
                log_error("bcrypt check refused", "error", why);
                return false;
        }
        memset(cd, 0, sizeof(*cd));
        out = sym_crypt_r(pass, hash, cd);
        if (!out || out[0] == '*' || strlen(out) != hl) {
                explicit_bzero(cd, sizeof(*cd));
                return false;
        }
        for (size_t i = 0; i < hl; i++)
                d |= (unsigned char)(out[i] ^ hash[i]);
        explicit_bzero(cd, sizeof(*cd));
        return d == 0;
}

bool auth_bcrypt(const char *hash, const char *pass)
{
        struct crypt_data *cd = xmalloc(sizeof(*cd));
        bool ok = bcrypt_with(cd, hash, pass);

        free(cd);
        return ok;
}

uint64_t auth_bcrypt_runs(const struct auth_checker *a)
{
        return __atomic_load_n(&a->bcrypt_runs, __ATOMIC_RELAXED);
}

static void job_free(struct job *j)
{
        explicit_bzero(j->pass, strlen(j->pass));
        free(j->pass);
        free(j);
}

/* The worker thread: takes the queue's checks one by one. It holds a reference to a (taken by
 * auth_submit) and is detached: auth_cancel_all() never joins it. A worker whose number is no
 * longer a->worker was cancelled: it calls no done() any more (its requests are gone) and ends,
 * at the latest when its bcrypt does, then drops its reference. */
static void *worker(void *arg)
{
        struct auth_checker *a = arg;
        struct crypt_data *cd = xmalloc(sizeof(*cd));
        uint64_t me;

        (void)pthread_setname_np(pthread_self(), "dp-auth"); /* top -H */
        /* Started from libmicrohttpd's thread, which may be kept on one CPU while the load is
         * light (connguard_cpu.c), and the thread would keep that: the checks may run on every
         * CPU the process may use (the main thread's). */
        (void)cpus_of_main_thread(0);
        pthread_mutex_lock(&a->lock);
        me = a->worker;
        for (;;) {
                struct job *j;
                int cached;
                bool match;

                while (!a->head && a->worker == me)
                        pthread_cond_wait(&a->wake, &a->lock);
                if (a->worker != me)
                        break;
                j = a->head;
                a->head = j->next;
                if (!a->head)
                        a->tail = NULL;
                a->queued--;
                pthread_mutex_unlock(&a->lock);

                /* another request may have brought the same credentials meanwhile */
                cached = auth_cache_get(a, &j->key);
                match = cached >= 0 ? cached == 1 : bcrypt_with(cd, j->hash, j->pass);
                if (cached < 0) {
                        cache_put(a, &j->key, match);
                        __atomic_add_fetch(&a->bcrypt_runs, 1, __ATOMIC_RELAXED);
                }

                pthread_mutex_lock(&a->lock);
                if (a->worker != me) {
                        /* cancelled while the hash ran: nobody waits for the answer */
                        job_free(j);
                        break;
                }
                /* done() runs without the lock (it takes its caller's, which is held around
                 * auth_submit), and a cancel waits for it to return */
                a->in_done = true;
                pthread_mutex_unlock(&a->lock);
                j->done(j->ud, match);
                job_free(j);
                pthread_mutex_lock(&a->lock);
                a->in_done = false;
                pthread_cond_broadcast(&a->idle);
        }
        a->workers--;
        pthread_mutex_unlock(&a->lock);
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        checker_unref(a);
        return NULL;
}

int auth_submit(struct auth_checker *a, const struct auth_key *k, const char *hash,
                const char *pass, void (*done)(void *ud, bool match), void *ud)
{
        struct job *j;

        if (strlen(hash) >= sizeof j->hash)
                return -EINVAL;
        pthread_mutex_lock(&a->lock);
        if (a->queued >= AUTH_QUEUE_MAX) {
                pthread_mutex_unlock(&a->lock);
                return -EBUSY;
        }
        if (!a->started) {
                sigset_t all, old;
                pthread_attr_t attr;
                pthread_t t;
                int r;

                /* the worker takes no signal: they belong to the main loop */
                sigfillset(&all);
                pthread_sigmask(SIG_BLOCK, &all, &old);
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                checker_ref(a); /* the worker's */
                r = pthread_create(&t, &attr, worker, a);
                pthread_attr_destroy(&attr);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (r != 0) {
                        (void)checker_unref(a); /* not the last: the caller holds one */
                        pthread_mutex_unlock(&a->lock);
                        return -r;
                }
                a->started = true;
                a->workers++;
        }
        j = xcalloc(1, sizeof(*j));
        j->key = *k;
        strscpy(j->hash, hash, sizeof j->hash);
        j->pass = xstrdup(pass);
        j->done = done;
        j->ud = ud;
        if (a->tail)
                a->tail->next = j;
        else
                a->head = j;
        a->tail = j;
        a->queued++;
        pthread_cond_signal(&a->wake);
        pthread_mutex_unlock(&a->lock);
        return 0;
}

/* One of the checker's counts, read under its lock. */
static size_t count_locked(struct auth_checker *a, const size_t *count)
{
        size_t n;

        pthread_mutex_lock(&a->lock);
        n = *count;
        pthread_mutex_unlock(&a->lock);
        return n;
}

size_t auth_queued(struct auth_checker *a)
{
        return count_locked(a, &a->queued);
}

size_t auth_workers(struct auth_checker *a)
{
        return count_locked(a, &a->workers);
}

void auth_cancel_all(struct auth_checker *a)
{
        pthread_mutex_lock(&a->lock);
        while (a->head) {
                struct job *j = a->head;
                a->head = j->next;
                job_free(j);
        }
        a->tail = NULL;
        a->queued = 0;
        /* A done() under way is let finish (it only hands a result over); a bcrypt under way
         * is not waited for: its worker learns here that it is no longer the current one, and
         * ends by itself when the hash does, without a done(). The next auth_submit starts
         * another worker. */
        while (a->in_done)
                pthread_cond_wait(&a->idle, &a->lock);
        if (a->started) {
                a->worker++;
                a->started = false;
                pthread_cond_broadcast(&a->wake);
        }
        pthread_mutex_unlock(&a->lock);
}
