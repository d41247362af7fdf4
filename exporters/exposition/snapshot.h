/* Snapshot publication: the main loop publishes an immutable set of metrics; HTTP threads take a
 * reference to the latest and render it (once per snapshot, cached). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "expo.h"
#include "metrics.h"
#include "summary.h"
#include "util.h"

struct snapshot;
struct publisher;

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

/* The sets of the snapshot (read-only). */
size_t snapshot_sets(const struct snapshot *s, struct mset *const **ret_sets);
/* What fills the landing page's status summary: fns[i] (may be NULL) from set i, for each of
 * the snapshot's sets (copied). Before publishing. */
void snapshot_set_summarizers(struct snapshot *s, const summarize_fn *fns);
/* The status summary, made from the sets on first use (a round costs nothing for a page rarely
 * asked for); read-only, valid while the reference is held. Any thread. */
const struct summary *snapshot_summary(struct snapshot *s);

struct publisher *publisher_new(void);
struct publisher *publisher_free(struct publisher *p);
/* Replaces the current snapshot (takes over the caller's reference; the publisher must outlive
 * every request for it); the free heap goes back to the system when much of it is free
 * (malloc_give_back), looked at when snapshots besides the old one were freed. Main thread. */
void publisher_publish(struct publisher *p, struct snapshot *s);
/* Publications between looks at the free heap when no snapshot but the replaced one was freed. */
#define PUBLISHER_LOOK_EVERY 16
/* Looks at the free heap (malloc_give_back) publications have made. Main thread. */
uint64_t publisher_heap_looks(const struct publisher *p);
/* Renders ahead what a steady scraper will ask for: a form (format and coding) whose first
 * requests on the last two snapshots came at an interval of at least two snapshots, and whose next
 * request is due between now and next (when the snapshot after the current one comes), is made
 * on the current snapshot now, so that the request finds it ready. A scraper that missed its
 * time twice is no longer waited for. Returns how many forms it made. Main thread, after
 * publishing. */
int publisher_prepare(struct publisher *p, usec_t now, usec_t next);
/* Whether the form is made and kept on the snapshot. Any thread. */
bool snapshot_page_ready(struct snapshot *s, enum expo_format fmt, bool gzip);

/* Returns a new reference to the current snapshot, or NULL before the first. Any thread. */
struct snapshot *publisher_get(struct publisher *p);
/* The main loop's heartbeat (monotonic usec of its last iteration); main thread. */
void publisher_beat(struct publisher *p, usec_t now);

/* ---- on demand: a main loop that samples when the page is asked for ---- */

/* What the main loop is asked for (publisher_take_wants()). */
#define PUBLISHER_WANT_ROUND 1u /* a snapshot newer than max_age, for a request waiting */
#define PUBLISHER_WANT_BEAT  2u /* a heartbeat, for a health check waiting */
/* How long a request waits for what it asked; one that waited in vain makes the next ones not
 * wait until the main loop has answered (a stuck loop costs each request nothing). */
#define PUBLISHER_WAIT (2 * USEC_PER_SEC)
/* Request times kept for the main loop between its wake-ups; two nearer than this are one. */
#define PUBLISHER_ARRIVALS 64
#define PUBLISHER_SAME     (50 * USEC_PER_MSEC)

/* A request for a page is served a snapshot at most max_age old: an older one is renewed first
 * (0: never, the main loop publishes at its own pace). Returns the descriptor (an eventfd) that
 * becomes readable when the main loop is asked for something, or -1 (max_age 0) or -errno. Main
 * thread; may be called again (SIGHUP). */
int publisher_on_demand(struct publisher *p, usec_t max_age);
/* The current snapshot for a request for the page (notes when it came), renewed first when it
 * is older than max_age: the main loop is asked and the call waits (PUBLISHER_WAIT at most) for
 * it to publish. NULL before the first. Any thread. */
struct snapshot *publisher_fresh(struct publisher *p);
/* Whether the main loop is alive: its last heartbeat is at most stale old, or (on demand) it
 * answers within PUBLISHER_WAIT when asked. Any thread. */
bool publisher_alive(struct publisher *p, usec_t stale);
/* What the main loop is asked for (PUBLISHER_WANT_*; what it publishes or beats answers);
 * clears the descriptor. Main thread. */
unsigned publisher_take_wants(struct publisher *p);
/* The arrival times of the requests for the page since the last call, oldest first (at most
 * max, the newest). Main thread. */
size_t publisher_take_arrivals(struct publisher *p, usec_t *out, size_t max);
