/* Snapshot publication with reference counting and a lazily rendered, cached text form. */
#include "snapshot.h"

#include <pthread.h>
#include <string.h>

#include "encoding.h"
#include "expo.h"

struct snapshot {
        unsigned refs;
        struct mset **sets;
        size_t n;
        usec_t realtime;
        pthread_mutex_t lock;
        char *text;
        size_t text_len;
        void *gz; /* the text gzip-compressed, made on first use */
        size_t gz_len;
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
        free(s->text);
        free(s->gz);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

int snapshot_text(struct snapshot *s, const char **ret_buf, size_t *ret_len)
{
        int r = 0;

        pthread_mutex_lock(&s->lock);
        if (!s->text)
                r = expo_render_text(s->sets, s->n, &s->text, &s->text_len);
        if (r == 0) {
                *ret_buf = s->text;
                *ret_len = s->text_len;
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

int snapshot_gzip(struct snapshot *s, const void **ret_buf, size_t *ret_len)
{
        int r = 0;

        pthread_mutex_lock(&s->lock);
        if (!s->text)
                r = expo_render_text(s->sets, s->n, &s->text, &s->text_len);
        if (r == 0 && !s->gz)
                r = gzip_compress(s->text, s->text_len, SNAPSHOT_GZIP_LEVEL, &s->gz, &s->gz_len);
        if (r == 0) {
                *ret_buf = s->gz;
                *ret_len = s->gz_len;
        }
        pthread_mutex_unlock(&s->lock);
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
