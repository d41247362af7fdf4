/* Snapshot publication with reference counting and lazily rendered, cached pages. */
#include "snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "encoding.h"
#include "expo.h"
#include "refcount.h"

/* Snapshots freed since start (any thread): see publisher_publish. */
static atomic_uint_fast64_t snapshots_freed;

/* One rendered form of the page, made on first use. */
struct page {
        void *buf;
        size_t len;
};

struct snapshot {
        struct refcount refs;
        struct mset **sets;
        size_t n;
        usec_t realtime;
        pthread_mutex_t lock;
        struct page pages[_EXPO_FORMAT_MAX][2]; /* [format][gzip] */
        size_t estimate;                        /* of the text page's size */
        bool estimated;
        bool asked[_EXPO_FORMAT_MAX][2]; /* each form's first request is noted */
        struct publisher *pub;           /* that published it (outlives every request) */
        summarize_fn *summarize;         /* per set, may be NULL: what fills the summary */
        struct summary *summary;         /* the landing page's, made on first use */
};

/* When a form was first asked for on its last two snapshots: a scraper's interval. */
struct asked_times {
        usec_t last, prev;
};

struct publisher {
        pthread_mutex_t lock;
        pthread_cond_t changed; /* a snapshot published, or a beat */
        struct snapshot *cur;
        usec_t made; /* when cur was published (monotonic) */
        usec_t beat;
        struct asked_times asked[_EXPO_FORMAT_MAX][2];
        /* requests for the page: when they came, for the main loop's sampler (a ring) */
        usec_t arrivals[PUBLISHER_ARRIVALS];
        size_t narrivals, apos;
        /* on demand: what the main loop is asked for through wantfd */
        int wantfd;     /* an eventfd, -1: nothing is asked for */
        usec_t max_age; /* a page older is renewed first (0: never) */
        unsigned wants; /* PUBLISHER_WANT_*, asked and not yet answered */
        unsigned deaf;  /* of those, ones asked for in vain (no wait until answered) */
        uint64_t publishes, beats;
        /* the main loop's: snapshots freed by the last publication, publications since the last
         * look at the free heap, looks */
        uint64_t freed_seen;
        unsigned unlooked;
        uint64_t looks;
};

/* Notes the first request for a form on a snapshot (any thread). */
static void note_asked(struct snapshot *s, enum expo_format fmt, bool gzip)
{
        struct publisher *p = s->pub;
        usec_t now;

        if (!p || s->asked[fmt][gzip])
                return;
        s->asked[fmt][gzip] = true;
        now = now_monotonic();
        pthread_mutex_lock(&p->lock);
        p->asked[fmt][gzip].prev = p->asked[fmt][gzip].last;
        p->asked[fmt][gzip].last = now;
        pthread_mutex_unlock(&p->lock);
}

struct snapshot *snapshot_new(struct mset **sets, size_t n, usec_t realtime)
{
        struct snapshot *s = xcalloc(1, sizeof(*s));

        refcount_init(&s->refs);
        s->sets = xcalloc(n ? n : 1, sizeof(*s->sets));
        memcpy(s->sets, sets, n * sizeof(*sets));
        s->n = n;
        s->realtime = realtime;
        pthread_mutex_init(&s->lock, NULL);
        return s;
}

static void snapshot_destroy(struct snapshot *s)
{
        for (size_t i = 0; i < s->n; i++)
                mset_free(s->sets[i]);
        free(s->sets);
        free(s->summarize);
        summary_free(s->summary);
        for (size_t f = 0; f < _EXPO_FORMAT_MAX; f++)
                for (size_t z = 0; z < 2; z++)
                        free(s->pages[f][z].buf);
        pthread_mutex_destroy(&s->lock);
        free(s);
        atomic_fetch_add_explicit(&snapshots_freed, 1, memory_order_relaxed);
}

REFCOUNT_DEFINE(, struct snapshot, snapshot, refs, snapshot_destroy)

/* The text handed to the compressor at a time, and the least room it is given for output. */
#define GZIP_IN_CHUNK (16 * 1024)
#define GZIP_OUT_MIN  1024

/* A gzip member of the page, rendered in chunks into the compressor: the text is never whole
 * in memory. The output starts at a guess of its size and doubles when it is nearly full; the
 * compressor takes whatever room is left, so a page that fits the guess is never copied (asking
 * for a whole chunk of room before each call doubled every page once, a copy and, past the
 * heap's mmap threshold, a mapping made and torn down every scrape). */
static int render_gzip(struct snapshot *s, enum expo_format fmt, struct page *ret)
{
        struct expo_stream *st = expo_stream_new(s->sets, s->n, fmt);
        int err = 0;
        struct gzip_stream *z = encoding_gzip_stream_new(SNAPSHOT_GZIP_LEVEL, &err);
        char *in = xmalloc(GZIP_IN_CHUNK);
        /* metrics text compresses some tenfold at level 1 (the guess: a sixth of it) */
        size_t cap = expo_estimate(s->sets, s->n) / 6 + GZIP_OUT_MIN, len = 0;
        char *out = xmalloc(cap);
        int r = z ? 0 : err;

        while (r == 0) {
                size_t n = expo_stream_read(st, in, GZIP_IN_CHUNK), off = 0;
                bool finish = n == 0;
                do {
                        size_t used, wrote;
                        if (cap - len < GZIP_OUT_MIN) {
                                cap *= 2;
                                out = xrealloc(out, cap);
                        }
                        r = encoding_gzip_stream_deflate(z, in + off, n - off, finish, out + len,
                                                         cap - len, &used, &wrote);
                        off += used;
                        len += wrote;
                } while (r == 0 && (off < n || finish));
        }
        encoding_gzip_stream_free(z);
        expo_stream_free(st);
        free(in);
        if (r < 0) {
                free(out);
                return r;
        }
        ret->buf = xrealloc(out, len ? len : 1);
        ret->len = len;
        return 0;
}

static int make_page(struct snapshot *s, enum expo_format fmt, bool gzip)
{
        struct page *p = &s->pages[fmt][gzip];
        char *text;
        int r;

        if (p->buf)
                return 0;
        if (gzip) {
                /* from the plain page when it is there, else straight from the sets */
                if (s->pages[fmt][0].buf)
                        return encoding_gzip_compress(s->pages[fmt][0].buf, s->pages[fmt][0].len,
                                                      SNAPSHOT_GZIP_LEVEL, &p->buf, &p->len);
                return render_gzip(s, fmt, p);
        }
        r = expo_render(s->sets, s->n, fmt, &text, &p->len);
        if (r == 0)
                p->buf = text;
        return r;
}

int snapshot_page(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len)
{
        int r;

        if ((unsigned)fmt >= _EXPO_FORMAT_MAX)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        r = make_page(s, fmt, gzip);
        if (r == 0) {
                *ret_buf = s->pages[fmt][gzip].buf;
                *ret_len = s->pages[fmt][gzip].len;
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

struct page_stream {
        struct snapshot *snap;
        struct expo_stream *st;
        struct gzip_stream *z; /* NULL: plain */
        char *in;              /* gzip: text not yet compressed */
        size_t in_len, in_off;
        bool eof, done;
};

/* Whether the form is kept whole (s->lock held): a compressed page is kept when its text would
 * be, or when it is likely to be small enough itself. The protobuf page is always kept: it is
 * made whole even for a stream (a family's message is known after its last sample), so keeping
 * it costs no more memory and spares the next scrapes making it again (it is some four times
 * smaller than the text). */
static bool kept(struct snapshot *s, enum expo_format fmt, bool gzip)
{
        if (fmt == EXPO_FORMAT_PROTOBUF)
                return true;
        if (!s->estimated) {
                s->estimate = expo_estimate(s->sets, s->n);
                s->estimated = true;
        }
        return s->pages[fmt][gzip].buf || s->estimate <= SNAPSHOT_CACHE_MAX ||
               (gzip && s->estimate / 8 <= SNAPSHOT_CACHE_MAX);
}

bool snapshot_page_ready(struct snapshot *s, enum expo_format fmt, bool gzip)
{
        bool r;

        pthread_mutex_lock(&s->lock);
        r = s->pages[fmt][gzip].buf != NULL;
        pthread_mutex_unlock(&s->lock);
        return r;
}

int snapshot_body(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len, struct page_stream **ret_stream)
{
        struct page_stream *ps;
        bool keep;
        int r;

        if ((unsigned)fmt >= _EXPO_FORMAT_MAX)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        note_asked(s, fmt, gzip);
        keep = kept(s, fmt, gzip);
        if (keep) {
                r = make_page(s, fmt, gzip);
                if (r == 0) {
                        *ret_buf = s->pages[fmt][gzip].buf;
                        *ret_len = s->pages[fmt][gzip].len;
                        *ret_stream = NULL;
                }
                pthread_mutex_unlock(&s->lock);
                return r;
        }
        pthread_mutex_unlock(&s->lock);
        ps = xcalloc(1, sizeof(*ps));
        if (gzip) {
                ps->z = encoding_gzip_stream_new(SNAPSHOT_GZIP_LEVEL, &r);
                if (!ps->z) {
                        free(ps);
                        return r;
                }
                ps->in = xmalloc(EXPO_CHUNK);
        }
        ps->snap = snapshot_ref(s);
        ps->st = expo_stream_new(s->sets, s->n, fmt);
        *ret_buf = NULL;
        *ret_len = 0;
        *ret_stream = ps;
        return 0;
}

ssize_t page_stream_read(struct page_stream *ps, char *buf, size_t max)
{
        size_t out = 0;

        if (!ps->z)
                return (ssize_t)expo_stream_read(ps->st, buf, max);
        while (!ps->done && out < max) {
                size_t used, wrote;
                int r;

                if (ps->in_off == ps->in_len && !ps->eof) {
                        ps->in_len = expo_stream_read(ps->st, ps->in, EXPO_CHUNK);
                        ps->in_off = 0;
                        ps->eof = ps->in_len == 0;
                }
                r = encoding_gzip_stream_deflate(ps->z, ps->in + ps->in_off,
                                                 ps->in_len - ps->in_off, ps->eof, buf + out,
                                                 max - out, &used, &wrote);
                if (r < 0)
                        return r;
                ps->in_off += used;
                out += wrote;
                ps->done = r == 1;
                if (!used && !wrote && !ps->eof && ps->in_off < ps->in_len)
                        break; /* the compressor wants more room */
        }
        return (ssize_t)out;
}

struct page_stream *page_stream_free(struct page_stream *ps)
{
        if (ps) {
                expo_stream_free(ps->st);
                encoding_gzip_stream_free(ps->z);
                free(ps->in);
                snapshot_unref(ps->snap);
                free(ps);
        }
        return NULL;
}

int snapshot_text(struct snapshot *s, const char **ret_buf, size_t *ret_len)
{
        const void *buf;
        int r = snapshot_page(s, EXPO_FORMAT_TEXT, false, &buf, ret_len);

        if (r == 0)
                *ret_buf = buf;
        return r;
}

size_t snapshot_sets(const struct snapshot *s, struct mset *const **ret_sets)
{
        *ret_sets = s->sets;
        return s->n;
}

struct publisher *publisher_new(void)
{
        struct publisher *p = xcalloc(1, sizeof(*p));
        pthread_condattr_t ca;

        pthread_mutex_init(&p->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->changed, &ca);
        pthread_condattr_destroy(&ca);
        p->wantfd = -1;
        return p;
}

struct publisher *publisher_free(struct publisher *p)
{
        if (!p)
                return NULL;
        snapshot_unref(p->cur);
        if (p->wantfd >= 0)
                close(p->wantfd);
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}

int publisher_on_demand(struct publisher *p, usec_t max_age)
{
        int fd = -1;

        if (max_age && p->wantfd < 0) {
                fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                if (fd < 0)
                        return -errno;
        }
        pthread_mutex_lock(&p->lock);
        if (fd >= 0)
                p->wantfd = fd;
        p->max_age = max_age;
        pthread_mutex_unlock(&p->lock);
        return p->wantfd;
}

/* Caller holds the lock. Asks the main loop for what (once until it answers). */
static void ask(struct publisher *p, unsigned what)
{
        uint64_t one = 1;

        if ((p->wants & what) == what)
                return;
        p->wants |= what;
        if (write(p->wantfd, &one, sizeof one) < 0) {
                /* the counter is full (never: the main loop reads it): asked already */
        }
}

/* Caller holds the lock. Waits until cond's counter moves from seen or until deadline; false if
 * it did not. */
static bool wait_moved(struct publisher *p, const uint64_t *counter, uint64_t seen, usec_t deadline)
{
        struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
                              .tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000};

        while (*counter == seen)
                if (pthread_cond_timedwait(&p->changed, &p->lock, &ts) == ETIMEDOUT)
                        return *counter != seen;
        return true;
}

struct snapshot *publisher_fresh(struct publisher *p)
{
        struct snapshot *s;
        usec_t now = now_monotonic();

        pthread_mutex_lock(&p->lock);
        if (!p->narrivals ||
            now - p->arrivals[(p->apos + PUBLISHER_ARRIVALS - 1) % PUBLISHER_ARRIVALS] >=
                PUBLISHER_SAME) {
                p->arrivals[p->apos] = now;
                p->apos = (p->apos + 1) % PUBLISHER_ARRIVALS;
                if (p->narrivals < PUBLISHER_ARRIVALS)
                        p->narrivals++;
        }
        if (p->cur && p->max_age && p->wantfd >= 0 && now - p->made > p->max_age &&
            !(p->deaf & PUBLISHER_WANT_ROUND)) {
                uint64_t seen = p->publishes;
                ask(p, PUBLISHER_WANT_ROUND);
                if (!wait_moved(p, &p->publishes, seen, now + PUBLISHER_WAIT))
                        p->deaf |= PUBLISHER_WANT_ROUND; /* served as it is until answered */
        }
        s = snapshot_ref(p->cur);
        pthread_mutex_unlock(&p->lock);
        return s;
}

bool publisher_alive(struct publisher *p, usec_t stale)
{
        usec_t now = now_monotonic();
        bool alive;

        pthread_mutex_lock(&p->lock);
        alive = p->beat && now - p->beat <= stale;
        if (!alive && p->beat && p->max_age && p->wantfd >= 0 && !(p->deaf & PUBLISHER_WANT_BEAT)) {
                /* The main loop sleeps until it has work: is it there to answer? */
                uint64_t seen = p->beats;
                ask(p, PUBLISHER_WANT_BEAT);
                alive = wait_moved(p, &p->beats, seen, now + PUBLISHER_WAIT);
                if (!alive)
                        p->deaf |= PUBLISHER_WANT_BEAT;
        }
        pthread_mutex_unlock(&p->lock);
        return alive;
}

unsigned publisher_take_wants(struct publisher *p)
{
        uint64_t n;
        unsigned w;

        pthread_mutex_lock(&p->lock);
        if (p->wantfd >= 0)
                (void)!read(p->wantfd, &n, sizeof n);
        w = p->wants;
        pthread_mutex_unlock(&p->lock);
        return w;
}

size_t publisher_take_arrivals(struct publisher *p, usec_t *out, size_t max)
{
        size_t n;

        pthread_mutex_lock(&p->lock);
        n = p->narrivals < max ? p->narrivals : max;
        for (size_t i = 0; i < n; i++)
                out[i] = p->arrivals[(p->apos + PUBLISHER_ARRIVALS - n + i) % PUBLISHER_ARRIVALS];
        p->narrivals = 0;
        pthread_mutex_unlock(&p->lock);
        return n;
}

void publisher_publish(struct publisher *p, struct snapshot *s)
{
        struct snapshot *old;

        if (s)
                s->pub = p;
        pthread_mutex_lock(&p->lock);
        old = p->cur;
        p->cur = s;
        p->made = now_monotonic();
        p->publishes++;
        p->wants &= ~PUBLISHER_WANT_ROUND;
        p->deaf &= ~PUBLISHER_WANT_ROUND;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        /* The free heap the old snapshot leaves is what the next round takes: trimming it every
         * round gave the pages back and faulted them in again, with a TLB shootdown on every CPU
         * (a fifth of a scrape's CPU at 2 devices). It goes back only when it is much more than
         * a round's: after snapshots that slow readers held were let go (more than the one each
         * publication frees; their connections' memory goes with them), and every
         * PUBLISHER_LOOK_EVERY publications for the rest. Looking costs a walk of the free
         * heap (mallinfo2), a tenth of a round's CPU at 2 devices: not every round. */
        snapshot_unref(old);
        {
                uint64_t freed = atomic_load_explicit(&snapshots_freed, memory_order_relaxed);
                bool others = freed - p->freed_seen > 1;

                p->freed_seen = freed;
                if (others || ++p->unlooked >= PUBLISHER_LOOK_EVERY) {
                        p->unlooked = 0;
                        p->looks++;
                        malloc_give_back();
                }
        }
}

uint64_t publisher_heap_looks(const struct publisher *p)
{
        return p->looks;
}

int publisher_prepare(struct publisher *p, usec_t now, usec_t next)
{
        struct snapshot *s = publisher_get(p);
        int made = 0;

        if (!s)
                return 0;
        for (int fmt = 0; fmt < _EXPO_FORMAT_MAX; fmt++)
                for (int gz = 0; gz < 2; gz++) {
                        struct asked_times a;
                        usec_t every, due;
                        const void *buf;
                        size_t len;
                        bool keep;

                        pthread_mutex_lock(&p->lock);
                        a = p->asked[fmt][gz];
                        pthread_mutex_unlock(&p->lock);
                        if (!a.prev || a.last <= a.prev)
                                continue;
                        every = a.last - a.prev;
                        due = a.last + every;
                        /* a scraper that comes less often than every other snapshot, within the
                         * last two of its intervals, and whose next request comes before the
                         * next snapshot: this snapshot is the one it will read */
                        if (every < 2 * (next - now) || every > 3600 * USEC_PER_SEC ||
                            now > a.last + 2 * every || due < now || due >= next)
                                continue;
                        pthread_mutex_lock(&s->lock);
                        keep = kept(s, (enum expo_format)fmt, gz);
                        pthread_mutex_unlock(&s->lock);
                        if (keep && !snapshot_page_ready(s, (enum expo_format)fmt, gz) &&
                            snapshot_page(s, (enum expo_format)fmt, gz, &buf, &len) == 0)
                                made++;
                }
        snapshot_unref(s);
        return made;
}

struct snapshot *publisher_get(struct publisher *p)
{
        struct snapshot *s;

        pthread_mutex_lock(&p->lock);
        s = snapshot_ref(p->cur);
        pthread_mutex_unlock(&p->lock);
        return s;
}

void publisher_beat(struct publisher *p, usec_t now)
{
        pthread_mutex_lock(&p->lock);
        p->beat = now;
        p->beats++;
        p->wants &= ~PUBLISHER_WANT_BEAT;
        p->deaf &= ~PUBLISHER_WANT_BEAT;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
}

void snapshot_set_summarizers(struct snapshot *s, const summarize_fn *fns)
{
        free(s->summarize);
        s->summarize = xcalloc(s->n ? s->n : 1, sizeof(*s->summarize));
        memcpy(s->summarize, fns, s->n * sizeof(*fns));
}

const struct summary *snapshot_summary(struct snapshot *s)
{
        pthread_mutex_lock(&s->lock);
        if (!s->summary) {
                s->summary = summary_new();
                for (size_t i = 0; s->summarize && i < s->n; i++)
                        if (s->summarize[i])
                                s->summarize[i](s->sets[i], s->summary);
                summary_finish(s->summary);
        }
        pthread_mutex_unlock(&s->lock);
        return s->summary;
}
