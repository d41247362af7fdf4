/* The lowest layer of the canary's files: the collector's and targets' references and what every
 * layer above reports with (errno names, a target's rate-limited error log). Calls no other file
 * of the canary but the records' (to free them). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "canary_internal.h"
#include "log.h"

#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 32)
/* glibc before 2.32 (Debian 11 has 2.31) has no strerrorname_np(): the names a write, fsync or
 * open of a canary target can fail with; any other is E<number>, as for an unknown one. */
static const char *strerrorname_np(int err)
{
        switch (err) {
#define NAME(e)                                                                                    \
        case e:                                                                                    \
                return #e
                NAME(EPERM);
                NAME(ENOENT);
                NAME(EINTR);
                NAME(EIO);
                NAME(ENXIO);
                NAME(EBADF);
                NAME(EAGAIN);
                NAME(ENOMEM);
                NAME(EACCES);
                NAME(EBUSY);
                NAME(EEXIST);
                NAME(EXDEV);
                NAME(ENODEV);
                NAME(ENOTDIR);
                NAME(EISDIR);
                NAME(EINVAL);
                NAME(ENFILE);
                NAME(EMFILE);
                NAME(EFBIG);
                NAME(ENOSPC);
                NAME(EROFS);
                NAME(ENAMETOOLONG);
                NAME(ENOSYS);
                NAME(ELOOP);
                NAME(EOPNOTSUPP);
                NAME(ETIMEDOUT);
                NAME(ESTALE);
                NAME(EDQUOT);
                NAME(EUCLEAN);
#undef NAME
        }
        return NULL;
}
#endif

const char *canary_errno_name(int err, char *buf, size_t size)
{
        const char *s = strerrorname_np(err);

        if (s)
                return s;
        snprintf(buf, size, "E%d", err);
        return buf;
}

static void canary_destroy(struct canary *c)
{
        free(c->t);
        canary_records_free(&c->records);
        if (c->state_dir_fd >= 0)
                close(c->state_dir_fd);
        if (c->sysfs_fd >= 0)
                close(c->sysfs_fd);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->state_lock);
        free(c);
}

REFCOUNT_DEFINE(, struct canary, canary, ref, canary_destroy)

static void canary_target_destroy(struct ctarget *t)
{
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                canary_stats_done(&t->stats[g]);
        free(t->errs);
        free(t->path);
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->wake);
        canary_unref(t->c);
        free(t);
}

REFCOUNT_DEFINE(, struct ctarget, canary_target, ref, canary_target_destroy)

void canary_target_log_error(struct ctarget *t, const char *msg, int err, usec_t now)
{
        char buf[16];

        if (ratelimit_ok(&t->log_rl, now))
                log_warn(msg, "path", t->path, "mode", canary_mode_to_string(t->mode), "errno",
                         canary_errno_name(err, buf, sizeof buf));
}
