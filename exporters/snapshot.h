/* Snapshot publication: the main loop publishes an immutable set of metrics; HTTP threads take a
 * reference to the latest and render it (once per snapshot, cached). */
#pragma once

#include <stdbool.h>

#include "expo.h"
#include "metrics.h"
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
 * use and cached; valid while the reference is held. Returns 0 or -errno. Any thread. */
int snapshot_page(struct snapshot *s, enum expo_format fmt, bool gzip, const void **ret_buf,
                  size_t *ret_len);

/* The sets of the snapshot (read-only). */
size_t snapshot_sets(const struct snapshot *s, struct mset *const **ret_sets);

struct publisher *publisher_new(void);
struct publisher *publisher_free(struct publisher *p);
/* Replaces the current snapshot (takes over the caller's reference). Main thread. */
void publisher_publish(struct publisher *p, struct snapshot *s);
/* Returns a new reference to the current snapshot, or NULL before the first. Any thread. */
struct snapshot *publisher_get(struct publisher *p);
/* The main loop's heartbeat (monotonic usec of its last iteration). */
void publisher_beat(struct publisher *p, usec_t now);
usec_t publisher_last_beat(struct publisher *p);
