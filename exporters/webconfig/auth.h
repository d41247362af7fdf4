/* HTTP basic authentication (RFC 7617) against bcrypt hashes: the Authorization header parser,
 * a cache of results, and one worker thread that runs libxcrypt's crypt_r so that no HTTP
 * thread ever spends a bcrypt's time. The cache key is an HMAC-SHA256, under a key drawn when
 * the checker is made, of (user, stored hash, presented password): the password itself is kept only while
 * its check runs, then wiped. Successes and failures are cached apart, so a client sending
 * wrong passwords cannot push a good scraper's entry out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_USER_MAX  256  /* bytes of a user name, with the NUL */
#define AUTH_PASS_MAX  1024 /* bytes of a password, with the NUL */
#define AUTH_QUEUE_MAX 32   /* bcrypt checks waiting at most; beyond, auth_submit refuses */

/* Parses an Authorization header value of the Basic scheme ("Basic " + base64 of
 * "user:password", the scheme name in any case). Returns true and fills user and pass
 * (NUL-terminated) when the value is well formed, both fit and neither holds a NUL; false for
 * anything else (another scheme, bad base64, no ':'). Pure; any thread. */
bool auth_parse_basic(const char *value, char *user, size_t usz, char *pass, size_t psz);

struct auth_key {
        unsigned char b[32];
};

/* The checks of one web config at work (websec.h): the HMAC key of the cache, the cache, the
 * worker thread (started by the first auth_submit) and its count of bcrypt runs. */
struct auth_checker;

/* A checker with a key drawn now, its cache empty, no thread yet. Any thread. */
struct auth_checker *auth_checker_new(void);
/* auth_cancel_all(), then drops the caller's reference: a is freed at once, or by a cancelled
 * worker when its bcrypt ends (so this never waits for a hash either). Accepts NULL; returns
 * NULL. Any thread but the worker. */
struct auth_checker *auth_checker_free(struct auth_checker *a);

/* The cache key of a check, under a's key. Any thread. */
void auth_key_of(const struct auth_checker *a, const char *user, const char *hash, const char *pass,
                 struct auth_key *ret);

/* The cached result of a check: 1 match, 0 no match, -ENOENT not cached. Any thread. */
int auth_cache_get(struct auth_checker *a, const struct auth_key *k);
/* Empties the cache (tests and benchmarks). */
void auth_cache_clear(struct auth_checker *a);

/* Loads libxcrypt (dlopen: a daemon without users never maps it); the web config's parser calls
 * it for the first user, so that a missing library is a config error. Returns 0, or a negative
 * errno with a message naming the Debian package in err (dynlib.h). Any thread. */
int auth_load(char *err, size_t errsz);

/* Checks pass against the bcrypt hash now, on the calling thread (what the worker runs).
 * Returns true on a match. Any thread. */
bool auth_bcrypt(const char *hash, const char *pass);

/* Queues the check of pass against hash, cached under k afterwards; a's worker thread calls
 * done(ud, match) when it is finished, unless auth_cancel_all() came first. Copies pass.
 * Returns 0, or -EBUSY when AUTH_QUEUE_MAX checks wait already, or a negative errno when no
 * worker thread can be started. Any thread. */
int auth_submit(struct auth_checker *a, const struct auth_key *k, const char *hash,
                const char *pass, void (*done)(void *ud, bool match), void *ud);

/* How many bcrypt checks a's worker has run (cache misses). Any thread. */
uint64_t auth_bcrypt_runs(const struct auth_checker *a);

/* How many checks wait in a's queue (not counting the running one). Any thread. */
size_t auth_queued(struct auth_checker *a);

/* How many worker threads of a run: the current one and cancelled ones whose bcrypt has not
 * ended yet. Any thread. */
size_t auth_workers(struct auth_checker *a);

/* Forgets every check of a: the queued ones and the one whose bcrypt is running; no done() is
 * called for them after this returns. Waits only for a done() already under way, never for a
 * bcrypt (whose time the hash's cost decides: a cost of 14 takes most of a second): the worker
 * is told to end and does when its hash does, without calling done(). The next auth_submit
 * starts a new worker. Any thread but the worker. */
void auth_cancel_all(struct auth_checker *a);
