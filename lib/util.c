/* Small helpers shared by every floor: time, number and duration parsing, allocation. */
#include "util.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static usec_t clock_usec(clockid_t id)
{
        struct timespec ts;

        if (clock_gettime(id, &ts) < 0)
                abort();
        return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / NSEC_PER_USEC;
}

usec_t now_monotonic(void)
{
        return clock_usec(CLOCK_MONOTONIC);
}

usec_t now_realtime(void)
{
        return clock_usec(CLOCK_REALTIME);
}

usec_t now_boottime(void)
{
        return clock_usec(CLOCK_BOOTTIME);
}

int parse_u64(const char *s, uint64_t *ret)
{
        uint64_t v = 0;

        if (!s || !isdigit((unsigned char)*s))
                return -EINVAL;
        for (; *s; s++) {
                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

int parse_duration(const char *s, usec_t *ret_usec)
{
        static const struct {
                const char *unit;
                usec_t mult;
        } units[] = {
            {"ms", USEC_PER_MSEC},      {"s", USEC_PER_SEC},         {"m", 60 * USEC_PER_SEC},
            {"h", 3600 * USEC_PER_SEC}, {"d", 86400 * USEC_PER_SEC}, {"us", 1},
        };
        usec_t total = 0;

        if (!s || !*s)
                return -EINVAL;
        while (*s) {
                uint64_t v = 0;
                size_t i, best = SIZE_MAX, best_len = 0;

                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                while (isdigit((unsigned char)*s)) {
                        unsigned d = (unsigned)(*s - '0');
                        if (v > (UINT64_MAX - d) / 10)
                                return -ERANGE;
                        v = v * 10 + d;
                        s++;
                }
                for (i = 0; i < ARRAY_SIZE(units); i++) {
                        size_t l = strlen(units[i].unit);
                        if (strncmp(s, units[i].unit, l) == 0 && l > best_len) {
                                best = i;
                                best_len = l;
                        }
                }
                if (best == SIZE_MAX)
                        return -EINVAL;
                /* "m" must not swallow the "m" of "ms": the longest unit wins above. */
                s += best_len;
                if (v > (UINT64_MAX - total) / units[best].mult)
                        return -ERANGE;
                total += v * units[best].mult;
        }
        *ret_usec = total;
        return 0;
}

const char *format_double_shortest(double v, char *buf, size_t size)
{
        for (int prec = 15; prec <= 17; prec++) {
                snprintf(buf, size, "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        return buf;
}

const char *format_duration(usec_t u, char *buf, size_t size)
{
        if (u == 0)
                snprintf(buf, size, "0s");
        else if (u % (3600 * USEC_PER_SEC) == 0)
                snprintf(buf, size, "%" PRIu64 "h", u / (3600 * USEC_PER_SEC));
        else if (u % (60 * USEC_PER_SEC) == 0)
                snprintf(buf, size, "%" PRIu64 "m", u / (60 * USEC_PER_SEC));
        else if (u % USEC_PER_SEC == 0)
                snprintf(buf, size, "%" PRIu64 "s", u / USEC_PER_SEC);
        else if (u % USEC_PER_MSEC == 0)
                snprintf(buf, size, "%" PRIu64 "ms", u / USEC_PER_MSEC);
        else
                snprintf(buf, size, "%" PRIu64 "us", u);
        return buf;
}

int parse_size(const char *s, uint64_t *ret)
{
        char num[32];
        size_t n = 0;
        uint64_t v, mult = 1;
        int r;

        if (!s)
                return -EINVAL;
        while (isdigit((unsigned char)s[n]) && n < sizeof(num) - 1)
                n++;
        if (n == 0 || n >= sizeof(num) - 1)
                return n ? -ERANGE : -EINVAL;
        memcpy(num, s, n);
        num[n] = 0;
        r = parse_u64(num, &v);
        if (r < 0)
                return r;
        s += n;
        if (*s == 'K' || *s == 'k')
                mult = 1024, s++;
        else if (*s == 'M')
                mult = 1024 * 1024, s++;
        else if (*s == 'G')
                mult = 1024 * 1024 * 1024, s++;
        if (mult > 1 && *s == 'i')
                s++;
        if (*s == 'B')
                s++;
        if (*s)
                return -EINVAL;
        if (v > UINT64_MAX / mult)
                return -ERANGE;
        *ret = v * mult;
        return 0;
}

int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"1", "true", "yes", "on"};
        static const char *const no[] = {"0", "false", "no", "off"};

        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

bool strscpy(char *dst, const char *src, size_t size)
{
        size_t l = strlen(src);

        if (size == 0)
                return l == 0;
        if (l >= size) {
                memcpy(dst, src, size - 1);
                dst[size - 1] = 0;
                return false;
        }
        memcpy(dst, src, l + 1);
        return true;
}

uint32_t hash_fnv1a32(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

static void oom(void)
{
        static const char msg[] = "diskpulse: out of memory\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        if (!p)
                oom();
        return p;
}

void *xcalloc(size_t n, size_t size)
{
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                oom();
        return p;
}

void *xrealloc(void *p, size_t n)
{
        p = realloc(p, n ? n : 1);
        if (!p)
                oom();
        return p;
}

char *xstrdup(const char *s)
{
        char *p = strdup(s);
        if (!p)
                oom();
        return p;
}

void grow_array(void **array, size_t *cap, size_t need, size_t elsz)
{
        size_t n;

        if (need <= *cap)
                return;
        n = *cap ? *cap * 2 : 8;
        while (n < need)
                n *= 2;
        if (n > SIZE_MAX / elsz)
                oom();
        *array = xrealloc(*array, n * elsz);
        *cap = n;
}

int unhexchar(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

void malloc_give_back(void)
{
#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 33)
        /* glibc before 2.33 (Debian 11 has 2.31) has no mallinfo2(): mallinfo()'s int fields,
         * which wrap only past 2 GiB, far beyond this heap. */
        struct mallinfo m = mallinfo();
        size_t free_bytes = (size_t)(unsigned)m.fordblks, used = (size_t)(unsigned)m.uordblks;
#else
        struct mallinfo2 m = mallinfo2();
        size_t free_bytes = m.fordblks, used = m.uordblks;
#endif

        if (free_bytes > MALLOC_GIVE_BACK_SLACK && free_bytes > used)
                (void)malloc_trim(0);
}

int cpus_of_main_thread(pid_t tid)
{
        cpu_set_t all;

        if (sched_getaffinity(getpid(), sizeof all, &all) < 0 ||
            sched_setaffinity(tid, sizeof all, &all) < 0)
                return -errno;
        return 0;
}

void malloc_setup(void)
{
        (void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        (void)mallopt(M_TRIM_THRESHOLD, 128 * 1024);
        (void)mallopt(M_ARENA_MAX, 1);
}
