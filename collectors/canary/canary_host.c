/* The canary's real host: the ops table's implementations on the filesystem and sysfs. */
#include <fcntl.h>
#include <sys/stat.h>

#include "canary_internal.h"

static int real_open(void *ud, const char *dir, enum canary_mode mode, size_t size,
                     struct canary_file *ret)
{
        _cleanup_close_ int fd = -1;

        (void)ud;
        fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return canary_file_open(fd, mode, size, ret);
}

static int real_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        (void)ud;
        return canary_dir_check(f, dir);
}

static int real_probe(void *ud, struct canary_file *f, usec_t *ret_latency)
{
        (void)ud;
        return canary_probe_once(f, ret_latency);
}

static void real_close(void *ud, struct canary_file *f)
{
        (void)ud;
        canary_file_close(f);
}

static usec_t real_now(void *ud)
{
        (void)ud;
        return now_monotonic();
}

static usec_t real_realtime(void *ud)
{
        (void)ud;
        return now_realtime();
}

static int real_flushes(void *ud, int sysfs_fd, const struct canary_backing *b, uint64_t *ret)
{
        (void)ud;
        return canary_flushes(sysfs_fd, b, ret);
}

static int real_resolve(void *ud, int sysfs_fd, const char *dir, struct canary_backing *ret)
{
        struct stat st;

        (void)ud;
        if (stat(dir, &st) < 0)
                return -errno;
        return canary_resolve(sysfs_fd, st.st_dev, ret);
}

void canary_ops_fill(struct canary_ops *ret, const struct canary_ops *o)
{
        *ret = (struct canary_ops){
            .ud = o ? o->ud : NULL,
            .open = o && o->open ? o->open : real_open,
            .probe = o && o->probe ? o->probe : real_probe,
            .close = o && o->close ? o->close : real_close,
            .now = o && o->now ? o->now : real_now,
            .realtime = o && o->realtime ? o->realtime : real_realtime,
            .sleep = o ? o->sleep : NULL,
            .flushes = o && o->flushes ? o->flushes : real_flushes,
            .resolve = o && o->resolve ? o->resolve : real_resolve,
            .check_dir = o ? o->check_dir : real_check_dir,
        };
}

bool canary_ops_real_open(const struct canary_ops *ops)
{
        return ops->open == real_open;
}

void canary_sweep(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r = fd < 0 ? -errno : canary_remove_stale(fd);

        if (r > 0)
                log_info("removed canary files left by a crash", "path", dir);
}
