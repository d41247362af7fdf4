/* What the exposition's snapshot and publisher files share: the snapshot and publisher structs
 * and the calls between them. They call one way: publisher.c (publication, pages made ahead)
 * -> snapshot_page.c (the pages: cache, gzip, streams) -> publisher_demand.c (what requests ask
 * of the main loop) -> snapshot.c (the snapshot object). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "expo.h"
#include "publisher.h"
#include "refcount.h"
#include "summary.h"

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

/* ---- snapshot.c ---- */

/* Snapshots freed since start. Any thread. */
uint64_t snapshot_freed_count(void);

/* ---- snapshot_page.c ---- */

/* Whether the form is kept whole on the snapshot rather than streamed. Under s->lock. */
bool snapshot_page_kept(struct snapshot *s, enum expo_format fmt, bool gzip);

/* ---- publisher_demand.c ---- */

/* Notes the first request for a form on one of p's snapshots, at now (the scraper's interval
 * publisher_prepare() looks at). Any thread. */
void publisher_note_asked(struct publisher *p, enum expo_format fmt, bool gzip, usec_t now);
