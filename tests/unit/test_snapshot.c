/* Unit tests of snapshot pages: small pages kept whole, big ones streamed (text, and gzip
 * compressed as it is read), every body the same page; the stream keeps its snapshot alive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <zlib.h>

#include <cmocka.h>

#include "snapshot.h"
#include "publisher.h"
#include "util.h"

/* A snapshot of one set: a table of rows devices with two families, and a generic gauge. */
static struct snapshot *make(size_t rows)
{
        static const char *const names[] = {"device", "model"};
        struct mrows *r = mrows_new(names, 2);
        struct mset *s = mset_new();
        struct mtable *t;
        char dev[32], model[64];

        for (size_t i = 0; i < rows; i++) {
                const char *v[2] = {dev, model};
                snprintf(dev, sizeof dev, "sd%zu", i);
                snprintf(model, sizeof model, "Model %zu \"x\"", i % 97);
                mrows_add(r, v);
        }
        t = mtable_new(r, 2);
        for (size_t i = 0; i < rows; i++)
                mtable_add_row(t, i, 3, (const uint64_t[]){i * 7919, i * 104729 + 1});
        mset_table_family(s, "a_total", "A.", MT_COUNTER, t, 0, MCELL_U64, 1);
        mset_table_family(s, "b_seconds_total", "B.", MT_COUNTER, t, 1, MCELL_MILLIS, 3);
        mset_gauge(s, "c", "C.", 0.5, NULL);
        mtable_unref(t);
        mrows_unref(r);
        return snapshot_new(&s, 1, 0);
}

static char *gunzip(const void *in, size_t len, size_t *ret_len)
{
        z_stream z;
        size_t cap = len * 16 + 4096;
        char *out = xmalloc(cap);

        memset(&z, 0, sizeof z);
        assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)len;
        for (;;) {
                int r;
                z.next_out = (Bytef *)out + z.total_out;
                z.avail_out = (uInt)(cap - z.total_out);
                r = inflate(&z, Z_FINISH);
                if (r == Z_STREAM_END)
                        break;
                assert_true(r == Z_OK || r == Z_BUF_ERROR);
                cap *= 2;
                out = xrealloc(out, cap);
        }
        assert_int_equal(z.avail_in, 0); /* one member, nothing after it */
        *ret_len = z.total_out;
        inflateEnd(&z);
        return out;
}

/* The whole body: the cached buffer, or the stream read in pieces of varying size. */
static char *body(struct snapshot *s, enum expo_format fmt, bool gz, bool *streamed, size_t *len)
{
        const void *buf;
        struct page_stream *ps;
        char *out;

        assert_int_equal(snapshot_body(s, fmt, gz, &buf, len, &ps), 0);
        *streamed = ps != NULL;
        if (!ps) {
                assert_non_null(buf);
                out = xmalloc(*len + 1);
                memcpy(out, buf, *len);
                return out;
        }
        assert_null(buf);
        {
                size_t cap = 1 << 20, n = 0, piece = 1;
                ssize_t k;
                out = xmalloc(cap);
                while ((k = page_stream_read(ps, out + n, piece)) > 0) {
                        n += (size_t)k;
                        piece = piece * 7 % 70001 + 1;
                        if (cap - n < 70002) {
                                cap *= 2;
                                out = xrealloc(out, cap);
                        }
                }
                assert_int_equal(k, 0);
                assert_int_equal(page_stream_read(ps, out + n, 100), 0);
                *len = n;
        }
        page_stream_free(ps);
        return out;
}

static void check(size_t rows, bool want_text_streamed, bool want_gzip_streamed)
{
        struct snapshot *s = make(rows);
        struct mset *const *sets;
        size_t n = snapshot_sets(s, &sets);

        for (int fmt = 0; fmt < _EXPO_FORMAT_MAX; fmt++) {
                char *want, *text, *z, *plain;
                size_t wl, tl, zl, pl;
                bool streamed;

                assert_int_equal(expo_render(sets, n, (enum expo_format)fmt, &want, &wl), 0);
                bool pb = fmt == EXPO_FORMAT_PROTOBUF; /* made whole anyway: always kept */
                text = body(s, (enum expo_format)fmt, false, &streamed, &tl);
                assert_int_equal(streamed, want_text_streamed && !pb);
                assert_int_equal(tl, wl);
                assert_memory_equal(text, want, wl);
                z = body(s, (enum expo_format)fmt, true, &streamed, &zl);
                assert_int_equal(streamed, want_gzip_streamed && !pb);
                /* text compresses fourfold at least; protobuf, without repeated names, less */
                assert_true(zl < (pb ? wl / 2 : wl / 4));
                plain = gunzip(z, zl, &pl);
                assert_int_equal(pl, wl);
                assert_memory_equal(plain, want, wl);
                free(want);
                free(text);
                free(z);
                free(plain);
        }
        snapshot_unref(s);
}

static void test_small_page_kept_whole(void **state)
{
        (void)state;
        check(100, false, false);
}

static void test_big_page_streamed_its_gzip_kept(void **state)
{
        (void)state;
        /* some 6 MB of text: past the limit, its gzip form well under it */
        check(60000, true, false);
}

static void test_huge_page_streamed_and_compressed_as_read(void **state)
{
        (void)state;
        /* some 40 MB: even its gzip form is not kept */
        check(400000, true, true);
}

static void test_stream_holds_the_snapshot(void **state)
{
        struct snapshot *s = make(60000);
        const void *buf;
        size_t len, total = 0;
        struct page_stream *ps;
        char piece[4096];
        ssize_t k;
        (void)state;

        assert_int_equal(snapshot_body(s, EXPO_FORMAT_TEXT, false, &buf, &len, &ps), 0);
        assert_non_null(ps);
        snapshot_unref(s); /* the stream's own reference keeps the sets */
        while ((k = page_stream_read(ps, piece, sizeof piece)) > 0)
                total += (size_t)k;
        assert_int_equal(k, 0);
        assert_true(total > SNAPSHOT_CACHE_MAX);
        assert_null(page_stream_free(ps));
        assert_null(page_stream_free(NULL));
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* The first request for a form on a snapshot, as http.c makes it. */
static void ask(struct publisher *p, enum expo_format fmt, bool gz)
{
        struct snapshot *s = publisher_get(p);
        const void *buf;
        size_t len;
        struct page_stream *ps;

        assert_int_equal(snapshot_body(s, fmt, gz, &buf, &len, &ps), 0);
        assert_null(ps);
        snapshot_unref(s);
}

static void test_steady_scraper_finds_its_page_made(void **state)
{
        struct publisher *p = publisher_new();
        struct snapshot *s;
        usec_t t1, t2, every, now;
        (void)state;

        /* a scraper every second asking for gzip'd OpenMetrics; snapshots come more often. The
         * requests are real (the publisher times them with the clock); the times handed to
         * publisher_prepare are computed from when they were made, so that a busy machine
         * stretching a sleep cannot move a request past a deadline the test chose. */
        publisher_publish(p, make(50));
        assert_int_equal(publisher_prepare(p, now_monotonic(), now_monotonic() + 450000), 0);
        ask(p, EXPO_FORMAT_OPENMETRICS, true);
        t1 = now_monotonic();
        sleep_ms(1000);
        publisher_publish(p, make(50));
        ask(p, EXPO_FORMAT_OPENMETRICS, true);
        t2 = now_monotonic();
        every = t2 - t1; /* 1 s, or more on a busy machine */
        publisher_publish(p, make(50));
        s = publisher_get(p);
        /* 300 ms before its next request */
        now = t2 + every - 300000;
        /* its next request comes after the next snapshot (100 ms away): nothing yet */
        assert_int_equal(publisher_prepare(p, now, now + 100000), 0);
        assert_false(snapshot_page_ready(s, EXPO_FORMAT_OPENMETRICS, true));
        /* before it (450 ms away): made now, and only that form, once */
        assert_int_equal(publisher_prepare(p, now, now + 450000), 1);
        assert_true(snapshot_page_ready(s, EXPO_FORMAT_OPENMETRICS, true));
        assert_false(snapshot_page_ready(s, EXPO_FORMAT_TEXT, false));
        assert_false(snapshot_page_ready(s, EXPO_FORMAT_TEXT, true));
        assert_int_equal(publisher_prepare(p, now, now + 450000), 0);
        snapshot_unref(s);
        /* a scraper that has not come for two of its intervals is no longer waited for */
        publisher_publish(p, make(50));
        now = t2 + 2 * every + 100000;
        assert_int_equal(publisher_prepare(p, now, now + 450000), 0);
        /* nor one that comes every snapshot or more often (its request would find the page
         * anyway) */
        ask(p, EXPO_FORMAT_TEXT, false);
        t1 = now_monotonic();
        sleep_ms(60);
        publisher_publish(p, make(50));
        ask(p, EXPO_FORMAT_TEXT, false);
        t2 = now_monotonic();
        every = t2 - t1;
        publisher_publish(p, make(50));
        now = t2 + every / 2;
        assert_int_equal(publisher_prepare(p, now, now + every), 0);
        publisher_free(p);
}

/* A main loop of its own: answers what it is asked through the descriptor (a new snapshot, or a
 * heartbeat) until told to stop. */
struct loop {
        struct publisher *p;
        int fd;
        bool stop;
        unsigned rounds, beats;
};

static void *loop_main(void *arg)
{
        struct loop *l = arg;

        while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
                struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
                unsigned w;
                if (poll(&pfd, 1, 50) <= 0)
                        continue;
                w = publisher_take_wants(l->p);
                /* counted before the answer, which wakes the waiting request */
                if (w & PUBLISHER_WANT_ROUND) {
                        __atomic_add_fetch(&l->rounds, 1, __ATOMIC_RELAXED);
                        publisher_publish(l->p, make(3));
                }
                if (w & (PUBLISHER_WANT_ROUND | PUBLISHER_WANT_BEAT)) {
                        __atomic_add_fetch(&l->beats, 1, __ATOMIC_RELAXED);
                        publisher_beat(l->p, now_monotonic());
                }
        }
        return NULL;
}

/* On demand: a request that finds the page older than max_age has a new one made first, and
 * the main loop is told when requests came; one younger is served as it is; a main loop that
 * does not answer costs the first request PUBLISHER_WAIT and the next ones nothing. */
static void test_on_demand(void **state)
{
        struct publisher *p = publisher_new();
        struct loop l = {.p = p};
        struct snapshot *first, *s;
        pthread_t th;
        usec_t t[8], t0;
        size_t n;
        (void)state;

        assert_int_equal(publisher_on_demand(p, 0), -1); /* not asked for: no descriptor */
        l.fd = publisher_on_demand(p, 200 * USEC_PER_MSEC);
        assert_true(l.fd >= 0);
        first = make(3);
        publisher_publish(p, snapshot_ref(first));
        publisher_beat(p, now_monotonic());
        assert_int_equal(pthread_create(&th, NULL, loop_main, &l), 0);

        /* young: as it is, no round */
        s = publisher_fresh(p);
        assert_ptr_equal(s, first);
        snapshot_unref(s);
        assert_int_equal(__atomic_load_n(&l.rounds, __ATOMIC_RELAXED), 0);
        /* older than max_age: a new one, made for this request */
        sleep_ms(300);
        s = publisher_fresh(p);
        assert_ptr_not_equal(s, first);
        assert_int_equal(__atomic_load_n(&l.rounds, __ATOMIC_RELAXED), 1);
        snapshot_unref(s);
        /* the requests' times, once (two within PUBLISHER_SAME are one) */
        n = publisher_take_arrivals(p, t, 8);
        assert_int_equal(n, 2);
        assert_true(t[1] - t[0] >= 300 * USEC_PER_MSEC);
        assert_int_equal(publisher_take_arrivals(p, t, 8), 0);
        /* a main loop that sleeps: its heartbeat is old, yet it answers */
        sleep_ms(300);
        assert_true(publisher_alive(p, 100 * USEC_PER_MSEC));
        assert_true(__atomic_load_n(&l.beats, __ATOMIC_RELAXED) >= 2);

        /* the main loop stops answering */
        __atomic_store_n(&l.stop, true, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        sleep_ms(300);
        t0 = now_monotonic();
        s = publisher_fresh(p); /* waits PUBLISHER_WAIT, then the old page */
        assert_true(now_monotonic() - t0 >= PUBLISHER_WAIT);
        assert_non_null(s);
        snapshot_unref(s);
        t0 = now_monotonic();
        s = publisher_fresh(p); /* no wait until the loop answers */
        assert_true(now_monotonic() - t0 < PUBLISHER_WAIT / 2);
        snapshot_unref(s);
        t0 = now_monotonic();
        assert_false(publisher_alive(p, 100 * USEC_PER_MSEC));
        assert_true(now_monotonic() - t0 >= PUBLISHER_WAIT);
        assert_false(publisher_alive(p, 100 * USEC_PER_MSEC)); /* at once */
        assert_true(now_monotonic() - t0 < PUBLISHER_WAIT + PUBLISHER_WAIT / 2);
        /* it answers again (a round): requests wait for it again */
        publisher_publish(p, make(3));
        publisher_beat(p, now_monotonic());
        assert_true(publisher_alive(p, 100 * USEC_PER_MSEC));

        snapshot_unref(first);
        publisher_free(p);
}

/* The free heap is looked at when snapshots that readers held are let go, else every
 * PUBLISHER_LOOK_EVERY publications: never at every round. */
static void test_heap_looked_at_when_held_snapshots_go(void **state)
{
        struct publisher *p = publisher_new();
        struct snapshot *held[5];
        uint64_t looks;

        (void)state;
        publisher_publish(p, make(3)); /* the first looks at what went before */
        looks = publisher_heap_looks(p);
        for (int i = 0; i < 2 * PUBLISHER_LOOK_EVERY; i++)
                publisher_publish(p, make(3));
        /* one snapshot freed per publication */
        assert_int_equal(publisher_heap_looks(p), looks + 2);
        looks = publisher_heap_looks(p);
        for (size_t i = 0; i < ARRAY_SIZE(held); i++) {
                publisher_publish(p, make(3));
                held[i] = publisher_get(p); /* a slow reader's */
        }
        publisher_publish(p, make(3));
        assert_int_equal(publisher_heap_looks(p), looks); /* held: nothing freed but the old */
        for (size_t i = 0; i < ARRAY_SIZE(held); i++)
                snapshot_unref(held[i]);
        publisher_publish(p, make(3));
        assert_int_equal(publisher_heap_looks(p), looks + 1);
        publisher_publish(p, make(3));
        assert_int_equal(publisher_heap_looks(p), looks + 1);
        publisher_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_small_page_kept_whole),
            cmocka_unit_test(test_big_page_streamed_its_gzip_kept),
            cmocka_unit_test(test_huge_page_streamed_and_compressed_as_read),
            cmocka_unit_test(test_stream_holds_the_snapshot),
            cmocka_unit_test(test_steady_scraper_finds_its_page_made),
            cmocka_unit_test(test_on_demand),
            cmocka_unit_test(test_heap_looked_at_when_held_snapshots_go),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
