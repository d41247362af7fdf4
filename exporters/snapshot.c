/* Snapshot publication with reference counting and lazily rendered, cached pages. */
#include "snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "encoding.h"
#include "expo.h"

/* One rendered form of the page, made on first use. */
struct page {
        void *buf;
        size_t len;
};

struct snapshot {
        unsigned refs;
        struct mset **sets;
        size_t n;
        usec_t realtime;
        pthread_mutex_t lock;
        struct page pages[_EXPO_FORMAT_MAX][2]; /* [format][gzip] */
};

struct publisher {
        pthread_mutex_t lock;
        struct snapshot *cur;
        usec_t beat;
};

struct snapshot *snapshot_new(struct mset **sets, size_t n, usec_t realtime)
{
        struct snapshot *s = xcalloc(1, sizeof(*s));

        s->refs = 1;
        s->sets = xcalloc(n ? n : 1, sizeof(*s->sets));
        memcpy(s->sets, sets, n * sizeof(*sets));
        s->n = n;
        s->realtime = realtime;
        pthread_mutex_init(&s->lock, NULL);
        return s;
}

struct snapshot *snapshot_ref(struct snapshot *s)
{
        if (s)
                __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
        return s;
}

struct snapshot *snapshot_unref(struct snapshot *s)
{
        if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        for (size_t i = 0; i < s->n; i++)
                mset_free(s->sets[i]);
        free(s->sets);
        for (size_t f = 0; f < _EXPO_FORMAT_MAX; f++)
                for (size_t z = 0; z < 2; z++)
                        free(s->pages[f][z].buf);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

int snapshot_page(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len)
{
        struct page *plain, *gz;
        int r = 0;

        if ((unsigned)fmt >= _EXPO_FORMAT_MAX)
                return -EINVAL;
        plain = &s->pages[fmt][0];
        gz = &s->pages[fmt][1];
        pthread_mutex_lock(&s->lock);
        if (!plain->buf) {
                char *text;
                r = expo_render(s->sets, s->n, fmt, &text, &plain->len);
                if (r == 0)
                        plain->buf = text;
        }
        if (r == 0 && gzip && !gz->buf)
                r = gzip_compress(plain->buf, plain->len, SNAPSHOT_GZIP_LEVEL, &gz->buf, &gz->len);
        if (r == 0) {
                *ret_buf = gzip ? gz->buf : plain->buf;
                *ret_len = gzip ? gz->len : plain->len;
        }
        pthread_mutex_unlock(&s->lock);
        return r;
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
        pthread_mutex_init(&p->lock, NULL);
        return p;
}

struct publisher *publisher_free(struct publisher *p)
{
        if (!p)
                return NULL;
        snapshot_unref(p->cur);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}

void publisher_publish(struct publisher *p, struct snapshot *s)
{
        struct snapshot *old;

        pthread_mutex_lock(&p->lock);
        old = p->cur;
        p->cur = s;
        pthread_mutex_unlock(&p->lock);
        snapshot_unref(old);
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
        __atomic_store_n(&p->beat, now, __ATOMIC_RELAXED);
}

usec_t publisher_last_beat(struct publisher *p)
{
        return __atomic_load_n(&p->beat, __ATOMIC_RELAXED);
}
