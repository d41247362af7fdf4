/* Snapshot publication: the main loop publishes each round's snapshot; HTTP threads take a
 * reference to the latest (publisher_get(), publisher_fresh()). On demand, requests ask the main
 * loop for a round or a heartbeat and leave their arrival times for its sampler. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"
#include "util.h"

struct publisher;

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
