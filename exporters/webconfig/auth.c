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
#include "util.h"

/* libxcrypt, loaded when a web config names users (auth_load): the one function used. */
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

/* The HMAC key, drawn once. */
static unsigned char hmac_key[32];
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_key_init(void)
{
        size_t got = 0;

        while (got < sizeof hmac_key) {
                ssize_t r = getrandom(hmac_key + got, sizeof hmac_key - got, 0);
                if (r < 0 && errno != EINTR)
                        abort(); /* no randomness: nothing safe to do */
                if (r > 0)
                        got += (size_t)r;
        }
}

void auth_key_of(const char *user, const char *hash, const char *pass, struct auth_key *ret)
{
        const char *parts[3] = {user, hash, pass};
        gnutls_hmac_hd_t h;

        pthread_once(&hmac_once, hmac_key_init);
        if (gnutls_hmac_init(&h, GNUTLS_MAC_SHA256, hmac_key, sizeof hmac_key) < 0)
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

#define CACHE_SLOTS 64

struct slot {
        struct auth_key key;
        uint64_t used; /* 0: empty */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot cache_ok[CACHE_SLOTS], cache_bad[CACHE_SLOTS];
static uint64_t cache_tick;

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

int auth_cache_get(const struct auth_key *k)
{
        struct slot *s;
        int r = -ENOENT;

        pthread_mutex_lock(&cache_lock);
        if ((s = find(cache_ok, k))) {
                s->used = ++cache_tick;
                r = 1;
        } else if ((s = find(cache_bad, k))) {
                s->used = ++cache_tick;
                r = 0;
        }
        pthread_mutex_unlock(&cache_lock);
        return r;
}

static void cache_put(const struct auth_key *k, bool match)
{
        struct slot *t = match ? cache_ok : cache_bad, *s;

        pthread_mutex_lock(&cache_lock);
        s = find(t, k);
        if (!s) {
                s = &t[0];
                for (size_t i = 1; i < CACHE_SLOTS && s->used; i++)
                        if (!t[i].used || t[i].used < s->used)
                                s = &t[i];
                s->key = *k;
        }
        s->used = ++cache_tick;
        pthread_mutex_unlock(&cache_lock);
}

void auth_cache_clear(void)
{
        pthread_mutex_lock(&cache_lock);
        memset(cache_ok, 0, sizeof cache_ok);
        memset(cache_bad, 0, sizeof cache_bad);
        pthread_mutex_unlock(&cache_lock);
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

static uint64_t bcrypt_runs;

uint64_t auth_bcrypt_runs(void)
{
        return __atomic_load_n(&bcrypt_runs, __ATOMIC_RELAXED);
}

struct job {
        struct job *next;
        struct auth_key key;
        char hash[64];
        char *pass;
        void (*done)(void *ud, bool match);
        void *ud;
};

static struct {
        pthread_mutex_t lock;
        pthread_cond_t wake, idle;
        struct job *head, *tail;
        size_t queued;
        bool busy, started, quit;
        pthread_t thread;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

static void job_free(struct job *j)
{
        explicit_bzero(j->pass, strlen(j->pass));
        free(j->pass);
        free(j);
}

static void *worker(void *arg)
{
        struct crypt_data *cd = xmalloc(sizeof(*cd));

        (void)arg;
        /* Started from libmicrohttpd's thread, which may be kept on one CPU while the load is
         * light (connguard_cpu.c), and the thread would keep that: the checks may run on every
         * CPU the process may use (the main thread's). */
        (void)cpus_of_main_thread(0);
        pthread_mutex_lock(&w.lock);
        for (;;) {
                struct job *j;
                int cached;
                bool match;

                while (!w.head && !w.quit)
                        pthread_cond_wait(&w.wake, &w.lock);
                if (w.quit)
                        break;
                j = w.head;
                w.head = j->next;
                if (!w.head)
                        w.tail = NULL;
                w.queued--;
                w.busy = true;
                pthread_mutex_unlock(&w.lock);

                /* another request may have brought the same credentials meanwhile */
                cached = auth_cache_get(&j->key);
                match = cached >= 0 ? cached == 1 : bcrypt_with(cd, j->hash, j->pass);
                if (cached < 0) {
                        cache_put(&j->key, match);
                        __atomic_add_fetch(&bcrypt_runs, 1, __ATOMIC_RELAXED);
                }
                j->done(j->ud, match);
                job_free(j);

                pthread_mutex_lock(&w.lock);
                w.busy = false;
                pthread_cond_broadcast(&w.idle);
        }
        pthread_mutex_unlock(&w.lock);
        free(cd);
        return NULL;
}

int auth_submit(const struct auth_key *k, const char *hash, const char *pass,
                void (*done)(void *ud, bool match), void *ud)
{
        struct job *j;

        if (strlen(hash) >= sizeof j->hash)
                return -EINVAL;
        pthread_mutex_lock(&w.lock);
        if (w.queued >= AUTH_QUEUE_MAX) {
                pthread_mutex_unlock(&w.lock);
                return -EBUSY;
        }
        if (!w.started) {
                sigset_t all, old;
                int r;

                /* the worker takes no signal: they belong to the main loop */
                sigfillset(&all);
                pthread_sigmask(SIG_BLOCK, &all, &old);
                r = pthread_create(&w.thread, NULL, worker, NULL);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (r != 0) {
                        pthread_mutex_unlock(&w.lock);
                        return -r;
                }
                w.started = true;
        }
        j = xcalloc(1, sizeof(*j));
        j->key = *k;
        strscpy(j->hash, hash, sizeof j->hash);
        j->pass = xstrdup(pass);
        j->done = done;
        j->ud = ud;
        if (w.tail)
                w.tail->next = j;
        else
                w.head = j;
        w.tail = j;
        w.queued++;
        pthread_cond_signal(&w.wake);
        pthread_mutex_unlock(&w.lock);
        return 0;
}

size_t auth_queued(void)
{
        size_t n;

        pthread_mutex_lock(&w.lock);
        n = w.queued;
        pthread_mutex_unlock(&w.lock);
        return n;
}

void auth_cancel_all(void)
{
        pthread_mutex_lock(&w.lock);
        while (w.head) {
                struct job *j = w.head;
                w.head = j->next;
                job_free(j);
        }
        w.tail = NULL;
        w.queued = 0;
        while (w.busy)
                pthread_cond_wait(&w.idle, &w.lock);
        if (w.started) {
                /* the worker ends; the next auth_submit starts another */
                w.quit = true;
                pthread_cond_signal(&w.wake);
                pthread_mutex_unlock(&w.lock);
                pthread_join(w.thread, NULL);
                pthread_mutex_lock(&w.lock);
                w.started = w.quit = false;
        }
        pthread_mutex_unlock(&w.lock);
}
