/* Logging: logfmt or JSON lines on stderr, journald priority prefixes under systemd. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "escape.h"

static enum log_level min_level = LOG_LEVEL_INFO;
static enum log_format format = LOG_FORMAT_LOGFMT;
static bool journal;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"debug", "info", "warn", "error"};
/* syslog priorities: debug 7, info 6, warning 4, err 3 */
static const int level_prio[] = {7, 6, 4, 3};

static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino;
}

void log_setup(enum log_level level, enum log_format fmt)
{
        min_level = level;
        format = fmt;
        journal = stderr_is_journal();
}

void log_set_level(enum log_level level)
{
        __atomic_store_n(&min_level, level, __ATOMIC_RELAXED);
}

bool log_enabled(enum log_level level)
{
        return level >= __atomic_load_n(&min_level, __ATOMIC_RELAXED);
}

int log_level_from_string(const char *s, enum log_level *ret)
{
        for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
                if (strcmp(s, level_names[i]) == 0) {
                        *ret = (enum log_level)i;
                        return 0;
                }
        return -EINVAL;
}

int log_format_from_string(const char *s, enum log_format *ret)
{
        if (strcmp(s, "logfmt") == 0)
                *ret = LOG_FORMAT_LOGFMT;
        else if (strcmp(s, "json") == 0)
                *ret = LOG_FORMAT_JSON;
        else
                return -EINVAL;
        return 0;
}

/* Appends s quoted for logfmt (only when needed) or JSON (always). */
static void put_value(FILE *f, const char *s, bool json)
{
        size_t (*escape)(const char *, char *) = json ? escape_json : escape_logfmt;
        char small[256], *e = small;
        size_t n;

        if (!json && !escape_logfmt_needs_quotes(s)) {
                fputs(s, f);
                return;
        }
        n = escape(s, NULL);
        if (n > sizeof small) {
                e = malloc(n);
                if (!e)
                        return;
        }
        escape(s, e);
        fputc('"', f);
        fwrite(e, 1, n, f);
        fputc('"', f);
        if (e != small)
                free(e);
}

static void put_field(FILE *f, const char *key, const char *value, bool first)
{
        bool json = format == LOG_FORMAT_JSON;

        if (json) {
                fputs(first ? "{" : ",", f);
                put_value(f, key, true);
                fputc(':', f);
        } else {
                if (!first)
                        fputc(' ', f);
                fputs(key, f);
                fputc('=', f);
        }
        put_value(f, value, json);
}

static void vlog(enum log_level level, int err, const char *msg, va_list ap)
{
        char ts[64], buf[2048];
        struct timespec now;
        struct tm tm;
        FILE *f;

        if (!log_enabled(level))
                return;
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 now.tv_nsec / 1000000);

        f = fmemopen(buf, sizeof buf - 2, "w");
        if (!f)
                return;
        if (journal)
                fprintf(f, "<%d>", level_prio[level]);
        put_field(f, "ts", ts, true);
        put_field(f, "level", level_names[level], false);
        put_field(f, "msg", msg, false);
        for (;;) {
                const char *k = va_arg(ap, const char *);
                const char *v;
                if (!k)
                        break;
                v = va_arg(ap, const char *);
                put_field(f, k, v ? v : "", false);
        }
        if (err)
                put_field(f, "err", strerror(err), false);
        if (format == LOG_FORMAT_JSON)
                fputc('}', f);
        fflush(f);
        long len = ftell(f);
        fclose(f);
        if (len < 0)
                return;
        buf[len] = '\n';
        pthread_mutex_lock(&log_lock);
        fwrite(buf, 1, (size_t)len + 1, stderr);
        fflush(stderr);
        pthread_mutex_unlock(&log_lock);
}

void log_msg(enum log_level level, const char *msg, ...)
{
        va_list ap;
        int saved = errno;

        va_start(ap, msg);
        vlog(level, 0, msg, ap);
        va_end(ap);
        errno = saved;
}

int log_errno(enum log_level level, int err, const char *msg, ...)
{
        va_list ap;

        if (err < 0)
                err = -err;
        va_start(ap, msg);
        vlog(level, err, msg, ap);
        va_end(ap);
        return -err;
}

bool ratelimit_ok(struct ratelimit *rl, usec_t now)
{
        if (rl->last != 0 && now - rl->last < rl->interval) {
                rl->suppressed++;
                return false;
        }
        rl->last = now ? now : 1;
        rl->suppressed = 0;
        return true;
}
