/* Snapshots: an immutable set of metrics that HTTP threads render, each form once per snapshot
 * (cached) or streamed into a response; publisher.h hands the latest to them. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "expo.h"
#include "metrics.h"
#include "summary.h"
#include "util.h"

struct snapshot;

/* Makes a snapshot owning the n sets (taken over, and the array copied). Never fails. */
struct snapshot *snapshot_new(struct mset **sets, size_t n, usec_t realtime);
/* Reference counting; any thread. unref accepts NULL and returns NULL. */
struct snapshot *snapshot_ref(struct snapshot *s);
struct snapshot *snapshot_unref(struct snapshot *s);

/* The text exposition of the snapshot, rendered on first use; valid while the reference is
 * held. Returns 0 or -errno. Any thread. */
int snapshot_text(struct snapshot *s, const char **ret_buf, size_t *ret_len);

/* zlib level of the compressed pages: the fastest; metrics text compresses about as well at 1
 * as at 6, and a 16 MB page of 10,000 devices costs a fraction of the CPU. */
#define SNAPSHOT_GZIP_LEVEL 1

/* The page in format fmt, gzip-compressed when gzip is set, rendered and compressed on first
 * use and cached, whatever its size; valid while the reference is held. Returns 0 or -errno.
 * Any thread. */
int snapshot_page(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len);

/* A page kept whole at most this big (an estimate decides before rendering): at 10,000 devices
 * the text page (some 18 MB) is rendered for each response as it is sent, its gzip form (a
 * tenth of it) is kept. */
#define SNAPSHOT_CACHE_MAX (4u << 20)

/* A response body rendered (and compressed) as it is read. */
struct page_stream;

/* The body of a response with the page in format fmt (gzip-compressed when gzip): the cached
 * page (*ret_buf, *ret_len, valid while the caller's reference is held; *ret_stream NULL) when
 * it is at most SNAPSHOT_CACHE_MAX, else a stream (*ret_stream, which holds its own reference
 * to s; *ret_buf NULL). Returns 0 or -errno. Any thread. */
int snapshot_body(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len, struct page_stream **ret_stream);
/* The next bytes of the body, at most max: returns how many, 0 at the end, or -errno. One
 * thread at a time. */
ssize_t page_stream_read(struct page_stream *ps, char *buf, size_t max);
/* Drops the stream and its reference; accepts NULL; returns NULL. */
struct page_stream *page_stream_free(struct page_stream *ps);
/* Whether the form is made and kept on the snapshot. Any thread. */
bool snapshot_page_ready(struct snapshot *s, enum expo_format fmt, bool gzip);

/* The sets of the snapshot (read-only). */
size_t snapshot_sets(const struct snapshot *s, struct mset *const **ret_sets);
/* What fills the landing page's status summary: fns[i] (may be NULL) from set i, for each of
 * the snapshot's sets (copied). Before publishing. */
void snapshot_set_summarizers(struct snapshot *s, const summarize_fn *fns);
/* The status summary, made from the sets on first use (a round costs nothing for a page rarely
 * asked for); read-only, valid while the reference is held. Any thread. */
const struct summary *snapshot_summary(struct snapshot *s);
