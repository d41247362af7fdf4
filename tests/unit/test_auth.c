/* Unit tests of exporters/webconfig/auth.c: the Authorization header parser, bcrypt through
 * crypt_r, the cache keys, the worker and its queue bound, the cache's separate tables, and a
 * cancel that never waits for a running bcrypt. */
#include <crypt.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "base64.h"

static void test_parse_basic(void **state)
{
        static const struct {
                const char *value;
                const char *user, *pass; /* NULL: refused */
        } cases[] = {
            {"Basic YWxpY2U6c2VjcmV0", "alice", "secret"},
            {"basic YWxpY2U6c2VjcmV0", "alice", "secret"},
            {"BASIC YWxpY2U6c2VjcmV0", "alice", "secret"},
            {"  Basic \t YWxpY2U6c2VjcmV0  ", "alice", "secret"},
            {"Basic Ojp4", "", ":x"},                  /* "::x": empty user */
            {"Basic YTo=", "a", ""},                   /* "a:" */
            {"Basic YTpiOmM=", "a", "b:c"},            /* the first colon splits */
            {"Basic w6TDtsO8OnDDpHNz", "äöü", "päss"}, /* UTF-8 */
            {"Basic YWxpY2U=", NULL, NULL},            /* no colon */
            {"Basic YWxpY2U6c2VjcmV0=", NULL, NULL},   /* bad padding */
            {"Basic YWxpY2U6c2VjcmV", NULL, NULL},     /* not a multiple of 4 */
            {"Basic YTpiZ===", NULL, NULL},
            {"Basic YTpi=Q==", NULL, NULL}, /* padding inside */
            {"Basic YR==", NULL, NULL},     /* non-zero bits after the data */
            {"Basic YWxp Y2U6", NULL, NULL},
            {"Basic YWxpY2U6c2VjcmV0 extra", NULL, NULL},
            {"Basic !!!!", NULL, NULL},
            {"Basic YWxpY2U6c2Vj-mV0", NULL, NULL}, /* base64url is not base64 */
            {"Basic YWxpY2U6c2Vj_mV0", NULL, NULL},
            {"Basic YWxpY2U6\nc2VjcmV0", NULL, NULL}, /* no line breaks inside */
            {"Basic YWxpY2U6\r\nc2VjcmV0", NULL, NULL},
            {"Basic YWxpY2U6\vc2VjcmV0", NULL, NULL},
            {"Basic YWxpY2U6c2VjcmV0\n", NULL, NULL},
            {"Basic YTo", NULL, NULL}, /* padding required */
            {"Basic YQ=", NULL, NULL},
            {"Basic =YTo", NULL, NULL},
            {"Basic YTo==", NULL, NULL},
            {"Basic ", NULL, NULL},
            {"Basic", NULL, NULL},
            {"BasicYWxpY2U6c2VjcmV0", NULL, NULL},
            {"Bearer YWxpY2U6c2VjcmV0", NULL, NULL},
            {"Digest username=\"alice\"", NULL, NULL},
            {"Basic YQA6Yg==", NULL, NULL}, /* "a\0:b": a NUL */
            {"Basic YTpiAA==", NULL, NULL}, /* "a:b\0" */
            {"", NULL, NULL},
            {NULL, NULL, NULL},
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char user[AUTH_USER_MAX] = "untouched", pass[AUTH_PASS_MAX] = "untouched";
                bool ok = auth_parse_basic(cases[i].value, user, sizeof user, pass, sizeof pass);
                if (ok != (cases[i].user != NULL))
                        fail_msg("case %zu (%s): %s", i, cases[i].value ? cases[i].value : "NULL",
                                 ok ? "accepted" : "refused");
                if (ok && (strcmp(user, cases[i].user) != 0 || strcmp(pass, cases[i].pass) != 0))
                        fail_msg("case %zu: got \"%s\" \"%s\"", i, user, pass);
        }
}

static void test_parse_lengths(void **state)
{
        char plain[4096], hdr[8192], user[AUTH_USER_MAX], pass[AUTH_PASS_MAX];
        size_t n;
        (void)state;

        /* the longest user and password that fit, then one byte more of each */
        memset(plain, 'u', AUTH_USER_MAX - 1);
        plain[AUTH_USER_MAX - 1] = ':';
        memset(plain + AUTH_USER_MAX, 'p', AUTH_PASS_MAX - 1);
        n = AUTH_USER_MAX + AUTH_PASS_MAX - 1;
        strcpy(hdr, "Basic ");
        base64_encode(plain, n, hdr + 6);
        assert_true(auth_parse_basic(hdr, user, sizeof user, pass, sizeof pass));
        assert_int_equal(strlen(user), AUTH_USER_MAX - 1);
        assert_int_equal(strlen(pass), AUTH_PASS_MAX - 1);
        plain[n] = 'p';
        base64_encode(plain, n + 1, hdr + 6);
        assert_false(auth_parse_basic(hdr, user, sizeof user, pass, sizeof pass));
        memmove(plain + 1, plain, n);
        base64_encode(plain, n + 1, hdr + 6);
        assert_false(auth_parse_basic(hdr, user, sizeof user, pass, sizeof pass));
        /* small buffers bound it too */
        assert_false(auth_parse_basic("Basic YWxpY2U6c2VjcmV0", user, 5, pass, sizeof pass));
        assert_true(auth_parse_basic("Basic YWxpY2U6c2VjcmV0", user, 6, pass, 7));
        assert_false(auth_parse_basic("Basic YWxpY2U6c2VjcmV0", user, 6, pass, 6));
}

/* Known answers from crypt_blowfish's test vectors (Openwall), in the variants libxcrypt
 * reads, and hashes made here with the same library. */
static void test_bcrypt(void **state)
{
        char setting[64], hash[128];
        struct crypt_data cd;
        (void)state;

        assert_true(
            auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"));
        assert_true(
            auth_bcrypt("$2b$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"));
        assert_true(
            auth_bcrypt("$2y$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"));
        assert_false(
            auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U*"));
        assert_true(
            auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK", "U*U*"));
        assert_false(
            auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", ""));
        /* a hash one character off, a setting alone, a non-bcrypt string */
        assert_false(
            auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeX", "U*U"));
        assert_false(auth_bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.", "U*U"));
        assert_false(auth_bcrypt("*0", "U*U"));
        assert_non_null(crypt_gensalt_rn("$2b$", 4, NULL, 0, setting, sizeof setting));
        memset(&cd, 0, sizeof cd);
        snprintf(hash, sizeof hash, "%s", crypt_r("pässword", setting, &cd));
        assert_true(auth_bcrypt(hash, "pässword"));
        assert_false(auth_bcrypt(hash, "password"));
}

static void test_keys(void **state)
{
        struct auth_checker *a = auth_checker_new(), *other = auth_checker_new();
        struct auth_key ka, b;
        (void)state;

        auth_key_of(a, "alice", "$2y$h", "secret", &ka);
        auth_key_of(a, "alice", "$2y$h", "secret", &b);
        assert_memory_equal(ka.b, b.b, sizeof ka.b);
        auth_key_of(a, "alic", "e$2y$h", "secret", &b); /* the boundaries count */
        assert_memory_not_equal(ka.b, b.b, sizeof ka.b);
        auth_key_of(a, "alice", "$2y$h", "secreT", &b);
        assert_memory_not_equal(ka.b, b.b, sizeof ka.b);
        auth_key_of(a, "alice", "$2y$H", "secret", &b);
        assert_memory_not_equal(ka.b, b.b, sizeof ka.b);
        auth_key_of(a, "bob", "$2y$h", "secret", &b);
        assert_memory_not_equal(ka.b, b.b, sizeof ka.b);
        /* the key is not a plain hash of the password: no byte string of it appears */
        assert_null(memmem(ka.b, sizeof ka.b, "secret", 6));
        /* each checker draws its own key: another one's cache cannot be probed with it */
        auth_key_of(other, "alice", "$2y$h", "secret", &b);
        assert_memory_not_equal(ka.b, b.b, sizeof ka.b);
        auth_checker_free(other);
        auth_checker_free(a);
}

struct waiter {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned done, matches;
};

static struct waiter wt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void on_done(void *ud, bool match)
{
        (void)ud;
        pthread_mutex_lock(&wt.lock);
        wt.done++;
        wt.matches += match;
        pthread_cond_broadcast(&wt.cond);
        pthread_mutex_unlock(&wt.lock);
}

static void wait_done(unsigned n)
{
        pthread_mutex_lock(&wt.lock);
        while (wt.done < n)
                pthread_cond_wait(&wt.cond, &wt.lock);
        pthread_mutex_unlock(&wt.lock);
}

static void make_hash(unsigned cost, const char *pass, char *out, size_t size)
{
        char setting[64];
        struct crypt_data cd;

        assert_non_null(crypt_gensalt_rn("$2b$", cost, NULL, 0, setting, sizeof setting));
        memset(&cd, 0, sizeof cd);
        snprintf(out, size, "%s", crypt_r(pass, setting, &cd));
}

static void test_worker_and_cache(void **state)
{
        struct auth_checker *a = auth_checker_new();
        char hash[128];
        struct auth_key good, bad;
        (void)state;

        auth_cache_clear(a);
        wt.done = wt.matches = 0;
        make_hash(4, "right", hash, sizeof hash);
        auth_key_of(a, "alice", hash, "right", &good);
        auth_key_of(a, "alice", hash, "wrong", &bad);
        assert_int_equal(auth_cache_get(a, &good), -ENOENT);
        assert_int_equal(auth_submit(a, &good, hash, "right", on_done, NULL), 0);
        assert_int_equal(auth_submit(a, &bad, hash, "wrong", on_done, NULL), 0);
        wait_done(2);
        assert_int_equal(wt.matches, 1);
        assert_int_equal(auth_cache_get(a, &good), 1);
        assert_int_equal(auth_cache_get(a, &bad), 0);

        /* many wrong passwords fill the failure table but cannot push out the good entry */
        for (unsigned i = 0; i < 200; i++) {
                char p[32];
                struct auth_key k;
                snprintf(p, sizeof p, "guess%u", i);
                auth_key_of(a, "alice", hash, p, &k);
                assert_int_equal(auth_submit(a, &k, hash, p, on_done, NULL), 0);
                if (i % 16 == 15)
                        wait_done(2 + i + 1);
        }
        wait_done(202);
        assert_int_equal(wt.matches, 1);
        assert_int_equal(auth_cache_get(a, &good), 1);
        assert_int_equal(auth_cache_get(a, &bad), -ENOENT); /* the oldest failures went */
        {
                struct auth_key k;
                auth_key_of(a, "alice", hash, "guess199", &k);
                assert_int_equal(auth_cache_get(a, &k), 0); /* the newest stayed */
        }
        auth_cache_clear(a);
        assert_int_equal(auth_cache_get(a, &good), -ENOENT);
        auth_checker_free(a);
}

/* The first check's done() holds the worker until released, so the queue fills for sure. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_entered, gate_open;

static void gate_done(void *ud, bool match)
{
        pthread_mutex_lock(&gate_lock);
        gate_entered = true;
        pthread_cond_broadcast(&gate_cond);
        while (!gate_open)
                pthread_cond_wait(&gate_cond, &gate_lock);
        pthread_mutex_unlock(&gate_lock);
        on_done(ud, match);
}

static void *cancel_thread(void *arg)
{
        auth_cancel_all(arg);
        return NULL;
}

static void test_queue_bound(void **state)
{
        struct auth_checker *a = auth_checker_new();
        char hash[128];
        struct auth_key k;
        unsigned accepted = 0;
        pthread_t t;
        (void)state;

        auth_cache_clear(a);
        wt.done = wt.matches = 0;
        make_hash(4, "x", hash, sizeof hash);
        auth_key_of(a, "a", hash, "x", &k);
        assert_int_equal(auth_submit(a, &k, hash, "x", gate_done, NULL), 0);
        pthread_mutex_lock(&gate_lock);
        while (!gate_entered)
                pthread_cond_wait(&gate_cond, &gate_lock);
        pthread_mutex_unlock(&gate_lock);
        /* the worker is held; the queue takes AUTH_QUEUE_MAX, then refuses */
        for (unsigned i = 0; i < AUTH_QUEUE_MAX + 8; i++) {
                char p[16];
                int r;
                snprintf(p, sizeof p, "p%u", i);
                auth_key_of(a, "a", hash, p, &k);
                r = auth_submit(a, &k, hash, p, on_done, NULL);
                assert_true(r == 0 || r == -EBUSY);
                accepted += r == 0;
        }
        assert_int_equal(accepted, AUTH_QUEUE_MAX);
        assert_int_equal(auth_queued(a), AUTH_QUEUE_MAX);
        /* cancelling drops the queued ones at once and waits for the running one */
        assert_int_equal(pthread_create(&t, NULL, cancel_thread, a), 0);
        while (auth_queued(a) > 0)
                usleep(1000);
        pthread_mutex_lock(&gate_lock);
        gate_open = true;
        pthread_cond_broadcast(&gate_cond);
        pthread_mutex_unlock(&gate_lock);
        assert_int_equal(pthread_join(t, NULL), 0);
        pthread_mutex_lock(&wt.lock);
        assert_int_equal(wt.done, 1);
        assert_int_equal(wt.matches, 1);
        pthread_mutex_unlock(&wt.lock);
        auth_key_of(a, "a", hash, "x", &k);
        assert_int_equal(auth_cache_get(a, &k), 1);
        /* and a new worker starts for the next check */
        auth_key_of(a, "a", hash, "y", &k);
        assert_int_equal(auth_submit(a, &k, hash, "y", on_done, NULL), 0);
        wait_done(2);
        assert_int_equal(auth_cache_get(a, &k), 0);
        auth_cancel_all(a);
        auth_checker_free(a);
}

/* Seconds on CLOCK_MONOTONIC. */
static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Threads of this process now (/proc/self/task). */
static unsigned threads_now(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        unsigned n = 0;

        assert_non_null(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

/* A stop never waits for a bcrypt, whose time the configured cost decides: a check cancelled
 * while its hash runs is forgotten at once (auth_cancel_all returns before the hash ends, and
 * its done() is never called, not even when the hash ends), and freeing the checker then does
 * not wait either (the worker frees it when the hash ends). The hashes are of cost 13 (0.4 s
 * of CPU here): the cancel comes as soon as the worker has taken the check; should this thread
 * have been kept off the CPU for a whole hash meanwhile (the hash ended first), it tries
 * again. Before the fix every try saw the cancel wait for the hash. */
static void test_cancel_running(void **state)
{
        struct auth_checker *a = auth_checker_new();
        char dear[128], cheap[128];
        struct auth_key k;
        unsigned done0, base;
        uint64_t runs = 0;
        double t0, took = 0;
        bool caught = false;
        (void)state;

        wt.done = wt.matches = 0;
        make_hash(13, "x", dear, sizeof dear);
        make_hash(4, "x", cheap, sizeof cheap);
        for (unsigned attempt = 0; attempt < 3 && !caught; attempt++) {
                char p[16];

                snprintf(p, sizeof p, "x%u", attempt);
                pthread_mutex_lock(&wt.lock);
                done0 = wt.done;
                pthread_mutex_unlock(&wt.lock);
                runs = auth_bcrypt_runs(a);
                auth_key_of(a, "a", dear, p, &k);
                assert_int_equal(auth_submit(a, &k, dear, p, on_done, NULL), 0);
                while (auth_queued(a) > 0) /* the worker has taken it: its bcrypt runs */
                        usleep(1000);
                t0 = now_s();
                auth_cancel_all(a);
                took = now_s() - t0;
                /* the hash had not ended when the cancel returned */
                caught = auth_bcrypt_runs(a) == runs;
                printf(
                    "# try %u: cancel with a cost-13 bcrypt running returned in %.6f s, the hash "
                    "%s\n",
                    attempt + 1, took, caught ? "still running" : "over");
                /* the cancelled worker ends by itself when its hash does */
                while (auth_workers(a) > 0)
                        usleep(1000);
                assert_int_equal(auth_bcrypt_runs(a), runs + 1);
        }
        assert_true(caught);
        /* ... and calls no done() for it */
        pthread_mutex_lock(&wt.lock);
        assert_int_equal(wt.done, done0);
        pthread_mutex_unlock(&wt.lock);

        /* a new check starts a new worker and is answered */
        auth_key_of(a, "a", cheap, "y", &k);
        assert_int_equal(auth_submit(a, &k, cheap, "y", on_done, NULL), 0);
        wait_done(done0 + 1);
        assert_int_equal(wt.matches, 0);

        /* freed while a hash runs: the worker holds the checker until the hash ends, then frees
         * it and ends (the sanitizers see any use after the free) */
        assert_int_equal(auth_workers(a), 1); /* y's, waiting for the next check */
        base = threads_now();
        auth_key_of(a, "a", dear, "z", &k);
        assert_int_equal(auth_submit(a, &k, dear, "z", on_done, NULL), 0);
        while (auth_queued(a) > 0)
                usleep(1000);
        t0 = now_s();
        auth_checker_free(a);
        took = now_s() - t0;
        printf("# freed with a bcrypt running: returned in %.6f s\n", took);
        t0 = now_s();
        while (threads_now() >= base && now_s() - t0 < 50)
                usleep(1000);
        assert_int_equal(threads_now(), base - 1);
        pthread_mutex_lock(&wt.lock);
        assert_int_equal(wt.done, done0 + 1);
        pthread_mutex_unlock(&wt.lock);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_basic),      cmocka_unit_test(test_parse_lengths),
            cmocka_unit_test(test_bcrypt),           cmocka_unit_test(test_keys),
            cmocka_unit_test(test_worker_and_cache), cmocka_unit_test(test_queue_bound),
            cmocka_unit_test(test_cancel_running),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
