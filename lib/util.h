/* Small helpers shared by every floor: cleanup attributes, time in microseconds, parsing. */
#pragma once

#include <sys/types.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef uint64_t usec_t;

#define USEC_PER_SEC  ((usec_t)1000000ULL)
#define USEC_PER_MSEC ((usec_t)1000ULL)
#define NSEC_PER_USEC ((uint64_t)1000ULL)
#define USEC_INFINITY ((usec_t)UINT64_MAX)

/* glibc before 2.34 (Debian 11 has 2.31) has no close_range() wrapper: the system call itself
 * (Linux 5.9 and later; on an older kernel it fails with ENOSYS, as the wrapper would). */
#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 34)
#include <sys/syscall.h>
static inline int close_range(unsigned int first, unsigned int last, int flags)
{
        return (int)syscall(__NR_close_range, first, last, flags);
}
#endif

#define ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f)   __attribute__((cleanup(f)))

static inline void freep(void *p)
{
        free(*(void **)p);
}

static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

#define _cleanup_free_  _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Current CLOCK_MONOTONIC / CLOCK_REALTIME / CLOCK_BOOTTIME in microseconds. Any thread. */
usec_t now_monotonic(void);
usec_t now_realtime(void);
usec_t now_boottime(void);

/* Parses a duration such as "250ms", "10s", "5m", "1h", "1m30s" (no bare numbers).
 * Returns 0 and sets *ret_usec, or -EINVAL (syntax, unknown unit) / -ERANGE (overflow). */
int parse_duration(const char *s, usec_t *ret_usec);

/* Formats a duration in the largest exact unit ("10s", "250ms", "1h"); returns buf. */
const char *format_duration(usec_t u, char *buf, size_t size);

/* Room format_double_shortest() needs: "-1.7976931348623157e+308" and its terminator. */
#define FORMAT_DOUBLE_MAX 25

/* Formats v as the first of "%.15g", "%.16g", "%.17g" that reads back (strtod) as exactly v: the
 * shortest form for a double (%g drops trailing zeros, so 0.1 is "0.1"), the one the exposition
 * and the state files write. NaN and infinities come out as printf spells them ("nan", "inf").
 * Returns buf; size should be at least FORMAT_DOUBLE_MAX. Pure. */
const char *format_double_shortest(double v, char *buf, size_t size);

/* Parses an unsigned decimal integer with optional binary suffix (K, M, G = 1024^n; "B"
 * accepted). Returns 0, -EINVAL or -ERANGE. */
int parse_size(const char *s, uint64_t *ret);

/* Parses a whole string as an unsigned 64-bit decimal. Returns 0, -EINVAL or -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);

/* Parses a boolean ("true/false", "yes/no", "on/off", "1/0"). Returns 0 or -EINVAL. */
int parse_bool(const char *s, bool *ret);

/* The value of a hexadecimal digit, or -1. */
int unhexchar(char c);

/* The pseudo-random generator of the code base: xorshift64 (Marsaglia, "Xorshift RNGs", 2003;
 * shifts 13, 7, 17), fast and small, not for secrets. The state is the caller's (one per thread),
 * never 0. */

/* A state from any seed (0, which xorshift would never leave, becomes a fixed odd constant). */
static inline uint64_t prng_seed(uint64_t seed)
{
        return seed ? seed : UINT64_C(0x9e3779b97f4a7c15);
}

/* The next number of the sequence (never 0); advances *state. */
static inline uint64_t prng_next(uint64_t *state)
{
        uint64_t x = *state;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return *state = x;
}

/* A uniform double in [0, 1), from the top 53 bits of the next number. */
static inline double prng_unit(uint64_t *state)
{
        return (double)(prng_next(state) >> 11) / (double)(UINT64_C(1) << 53);
}

/* Copies at most size-1 bytes and always terminates; returns true when nothing was cut. */
bool strscpy(char *dst, const char *src, size_t size);

/* The 32-bit FNV-1a hash of the string s (offset basis 2166136261, prime 16777619): a fixed,
 * unkeyed hash for spreading names (never for input an attacker controls in bulk). */
uint32_t hash_fnv1a32(const char *s);

/* Tunes malloc for a long-running daemon with big short-lived blocks (pages, tables): they are
 * mapped on their own and given back to the system when freed (glibc would otherwise raise its
 * mapping threshold after the first such free and keep them in the heap), free heap space past
 * 128 KiB is trimmed, and every thread shares one arena. Call once, before any thread. */
void malloc_setup(void);

/* Free heap kept for the next round to take, at most: past it, and when more of the heap is free
 * than in use (the snapshots and connection pools a flood of slow readers held, let go at once),
 * malloc_give_back() hands the free heap back to the system. */
#define MALLOC_GIVE_BACK_SLACK (1024 * 1024)

/* Hands the free heap back (malloc_trim) when it is more than MALLOC_GIVE_BACK_SLACK and more
 * than the heap in use; otherwise leaves it for the next round, which would fault it in again. */
void malloc_give_back(void);

/* Lets thread tid (0: the calling one) of this process run on every CPU the main thread may (what
 * CPUAffinity= or a cpuset allows now), undoing a pin to one CPU. 0 or -errno. */
int cpus_of_main_thread(pid_t tid);

/* Returns a malloc'd copy or aborts on out-of-memory (the daemon cannot go on without it). */
char *xstrdup(const char *s);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);

/* Grows *array (of elements of size elsz) so that it has room for need elements. Aborts on OOM. */
void grow_array(void **array, size_t *cap, size_t need, size_t elsz);

#define GROW(array, cap, need) grow_array((void **)&(array), &(cap), (need), sizeof(*(array)))
