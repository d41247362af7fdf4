/* Logging: logfmt or JSON lines on stderr, journald priority prefixes under systemd. */
#pragma once

#include <stdbool.h>

#include "util.h"

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
enum log_format { LOG_FORMAT_LOGFMT, LOG_FORMAT_JSON };

/* Sets level and format; detects journald (JOURNAL_STREAM matching stderr). Main thread, before
 * other threads start; log_set_level may be called later (SIGHUP) from the main thread. */
void log_setup(enum log_level level, enum log_format format);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);

/* Parses "debug|info|warn|error" / "logfmt|json". Returns 0 or -EINVAL. */
int log_level_from_string(const char *s, enum log_level *ret);
int log_format_from_string(const char *s, enum log_format *ret);

/* Writes one line "msg" with optional key=value fields, e.g.
 * log_msg(LOG_LEVEL_WARN, "device gone", "device", "sda", NULL). Any thread.
 * Returns -err (if err != 0) so callers can `return log_msg_errno(...)`. */
void log_msg(enum log_level level, const char *msg, ...) __attribute__((sentinel));
int log_errno(enum log_level level, int err, const char *msg, ...) __attribute__((sentinel));

#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__, NULL)
#define log_info(...)  log_msg(LOG_LEVEL_INFO, __VA_ARGS__, NULL)
#define log_warn(...)  log_msg(LOG_LEVEL_WARN, __VA_ARGS__, NULL)
#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__, NULL)

/* Rate limit: returns true when the caller may log now (at most once per interval per state). */
struct ratelimit {
        usec_t interval;
        usec_t last;
        unsigned suppressed;
};
bool ratelimit_ok(struct ratelimit *rl, usec_t now);
