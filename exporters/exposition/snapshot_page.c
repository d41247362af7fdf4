/* A snapshot's pages: each form rendered once when first asked for and kept while it is small
 * enough (gzip through zlib, the text rendered in chunks into the compressor), or streamed into
 * each response as it is rendered. */
#include "snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "encoding.h"
#include "expo.h"
#include "snapshot_internal.h"

/* Notes the first request for a form on a snapshot, for its publisher. Under s->lock. */
static void note_asked(struct snapshot *s, enum expo_format fmt, bool gzip)
{
        if (!s->pub || s->asked[fmt][gzip])
                return;
        s->asked[fmt][gzip] = true;
        publisher_note_asked(s->pub, fmt, gzip, now_monotonic());
}

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
bool snapshot_page_kept(struct snapshot *s, enum expo_format fmt, bool gzip)
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
        keep = snapshot_page_kept(s, fmt, gzip);
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
