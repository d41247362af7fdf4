/* One fdatasync canary probe: the work file (O_TMPFILE or unlinked), timed write + sync, ioprio. */
#include "canary_probe.h"

#include "fsroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ioprio_set(2), include/uapi/linux/ioprio.h: class in the top 3 of 16 bits. */
#define CANARY_IOPRIO_WHO_PROCESS 1
#define CANARY_IOPRIO_CLASS_BE    2
#define CANARY_IOPRIO_CLASS_SHIFT 13
#define CANARY_IOPRIO_LEVEL       7

/* Bytes written per write() while filling the file at open. */
#define FILL_CHUNK ((size_t)1024 * 1024)

static const char *const mode_names[_CANARY_MODE_MAX] = {
    [CANARY_MODE_FDATASYNC] = "fdatasync",
    [CANARY_MODE_APPEND] = "append",
    [CANARY_MODE_DSYNC] = "dsync",
    [CANARY_MODE_DIRECT] = "direct",
};

const char *canary_mode_to_string(enum canary_mode m)
{
        if ((unsigned)m >= _CANARY_MODE_MAX)
                return NULL;
        return mode_names[m];
}

int canary_mode_from_string(const char *s, enum canary_mode *ret)
{
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < _CANARY_MODE_MAX; i++)
                if (strcmp(s, mode_names[i]) == 0) {
                        *ret = (enum canary_mode)i;
                        return 0;
                }
        return -EINVAL;
}

/* Non-zero pseudo-random bytes (compressing or deduplicating SSDs must not get an easy time). */
static void fill_random(uint64_t *rng, void *buf, size_t n)
{
        unsigned char *p = buf;

        while (n >= 8) {
                uint64_t v = prng_next(rng) | 0x0101010101010101ULL;

                memcpy(p, &v, 8);
                p += 8;
                n -= 8;
        }
        while (n > 0) {
                *p++ = (unsigned char)(prng_next(rng) | 1);
                n--;
        }
}

static int pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
        const char *p = buf;

        while (n > 0) {
                ssize_t k = pwrite(fd, p, n, (off_t)off);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno > 0 ? -errno : -EIO;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t)k;
                off += (uint64_t)k;
        }
        return 0;
}

static int open_flags(enum canary_mode mode)
{
        int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;

        if (mode == CANARY_MODE_DSYNC)
                flags |= O_DSYNC;
        else if (mode == CANARY_MODE_DIRECT)
                flags |= O_DSYNC | O_DIRECT;
        return flags;
}

/* The unnamed work file: O_TMPFILE (open(2)), or a named file unlinked at once. */
static int create_file(int dirfd, int flags, bool no_tmpfile, uint64_t *rng, bool *ret_named)
{
        int fd;

        if (!no_tmpfile) {
                fd = openat(dirfd, ".", (flags & ~O_NOFOLLOW) | O_TMPFILE, 0600);
                if (fd >= 0) {
                        *ret_named = false;
                        return fd;
                }
                /* EOPNOTSUPP: the filesystem has no O_TMPFILE; EISDIR: the kernel has none. */
                if (errno != EOPNOTSUPP && errno != EISDIR)
                        return -errno;
        }
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                char name[64];

                snprintf(name, sizeof(name), CANARY_TEMP_PREFIX "%06llx",
                         (unsigned long long)(prng_next(rng) & 0xffffff));
                fd = openat(dirfd, name, flags | O_CREAT | O_EXCL, 0600);
                if (fd < 0) {
                        if (errno == EEXIST)
                                continue;
                        return -errno;
                }
                if (unlinkat(dirfd, name, 0) < 0) {
                        int r = -errno;

                        close(fd);
                        return r;
                }
                *ret_named = true;
                return fd;
        }
        return -EEXIST;
}

static bool is_stale_name(const char *n)
{
        size_t pl = strlen(CANARY_TEMP_PREFIX);

        if (strncmp(n, CANARY_TEMP_PREFIX, pl) != 0 || strlen(n) != pl + 6)
                return false;
        for (n += pl; *n; n++)
                if (!((*n >= '0' && *n <= '9') || (*n >= 'a' && *n <= 'f')))
                        return false;
        return true;
}

int canary_remove_stale(int dirfd)
{
        int fd, removed = 0;
        struct dirent *e;
        DIR *d;

        fd = opendir_at(dirfd, &d);
        if (fd < 0)
                return fd;
        while ((e = readdir(d))) {
                struct stat st;

                if (!is_stale_name(e->d_name) ||
                    fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                    st.st_uid != geteuid())
                        continue;
                if (unlinkat(fd, e->d_name, 0) == 0)
                        removed++;
        }
        closedir(d);
        return removed;
}

int canary_dir_check(const struct canary_file *f, const char *dir)
{
        struct stat st;

        if (stat(dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        return st.st_dev == f->dir_dev && st.st_ino == f->dir_ino ? 0 : -ESTALE;
}

int canary_file_open_flags(int dirfd, enum canary_mode mode, size_t size, unsigned flags,
                           struct canary_file *ret)
{
        struct canary_file f = {.fd = -1, .mode = mode};
        void *fill = NULL;
        size_t chunk = 0;
        int r;

        if ((unsigned)mode >= _CANARY_MODE_MAX || size == 0 || size > CANARY_SIZE_MAX ||
            (flags & ~(unsigned)CANARY_OPEN_NO_TMPFILE))
                return -EINVAL;
        if (mode == CANARY_MODE_DIRECT)
                size = (size + CANARY_DIRECT_ALIGN - 1) / CANARY_DIRECT_ALIGN * CANARY_DIRECT_ALIGN;
        f.size = size;
        f.file_bytes = CANARY_SLOTS * size;
        f.wrap_bytes =
            f.file_bytes > CANARY_APPEND_WRAP_MIN ? f.file_bytes : CANARY_APPEND_WRAP_MIN;
        f.rng = prng_seed(now_monotonic() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)ret);
        if (posix_memalign(&f.buf, CANARY_DIRECT_ALIGN, size) != 0)
                return -ENOMEM;

        {
                struct stat dst;
                if (fstat(dirfd, &dst) < 0) {
                        r = -errno;
                        goto fail;
                }
                f.dir_dev = dst.st_dev;
                f.dir_ino = dst.st_ino;
        }
        r = create_file(dirfd, open_flags(mode), flags & CANARY_OPEN_NO_TMPFILE, &f.rng, &f.named);
        if (r < 0)
                goto fail;
        f.fd = r;

        if (mode == CANARY_MODE_APPEND) {
                /* One record, so that a full filesystem shows here and not at the first probe. */
                fill_random(&f.rng, f.buf, size);
                r = pwrite_all(f.fd, f.buf, size, 0);
                if (r < 0)
                        goto fail;
                f.offset = size;
        } else {
                chunk = f.file_bytes < FILL_CHUNK ? f.file_bytes : FILL_CHUNK;
                /* Real data over the whole file: no holes, no unwritten extents. The buffer is
                 * mapped, not malloc'd: freed in a thread's arena after every reopen, it left
                 * that arena growing by its size each time (fragmentation around f.buf). */
                fill =
                    mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (fill == MAP_FAILED) {
                        fill = NULL;
                        r = -ENOMEM;
                        goto fail;
                }
                for (uint64_t off = 0; off < f.file_bytes; off += chunk) {
                        size_t n = f.file_bytes - off < chunk ? f.file_bytes - off : chunk;

                        fill_random(&f.rng, fill, n);
                        r = pwrite_all(f.fd, fill, n, off);
                        if (r < 0)
                                goto fail;
                }
                f.offset = 0;
        }
        if (fsync(f.fd) < 0) {
                r = -errno;
                goto fail;
        }
        if (fill)
                munmap(fill, chunk);
        *ret = f;
        return 0;

fail:
        if (fill)
                munmap(fill, chunk);
        free(f.buf);
        if (f.fd >= 0)
                close(f.fd);
        return r;
}

int canary_file_open(int dirfd, enum canary_mode mode, size_t size, struct canary_file *ret)
{
        return canary_file_open_flags(dirfd, mode, size, 0, ret);
}

int canary_probe_once(struct canary_file *f, usec_t *ret_latency)
{
        usec_t t0, t1;
        uint64_t off;
        int r;

        if (!f || f->fd < 0 || f->poisoned || !f->buf)
                return -EBADFD;

        if (f->mode == CANARY_MODE_APPEND) {
                if (f->offset + f->size > f->wrap_bytes) {
                        if (ftruncate(f->fd, 0) < 0) {
                                r = errno > 0 ? -errno : -EIO;
                                f->poisoned = true;
                                return r;
                        }
                        f->offset = 0;
                }
                off = f->offset;
        } else
                off = (f->seq % CANARY_SLOTS) * f->size;

        fill_random(&f->rng, f->buf, f->size);
        if (f->size >= sizeof(f->seq))
                memcpy(f->buf, &f->seq, sizeof(f->seq));

        t0 = now_monotonic();
        r = pwrite_all(f->fd, f->buf, f->size, off);
        if (r == 0 && (f->mode == CANARY_MODE_FDATASYNC || f->mode == CANARY_MODE_APPEND))
                if (fdatasync(f->fd) < 0)
                        r = errno > 0 ? -errno : -EIO;
        t1 = now_monotonic();
        if (r < 0) {
                f->poisoned = true;
                return r;
        }

        f->seq++;
        f->offset = off + f->size;
        *ret_latency = t1 > t0 ? t1 - t0 : 1;
        return 0;
}

int canary_file_close(struct canary_file *f)
{
        int r = 0;

        if (!f)
                return 0;
        if (f->fd >= 0 && close(f->fd) < 0)
                r = -errno;
        free(f->buf);
        *f = (struct canary_file){.fd = -1};
        return r;
}

int canary_set_ioprio(void)
{
        int prio = (CANARY_IOPRIO_CLASS_BE << CANARY_IOPRIO_CLASS_SHIFT) | CANARY_IOPRIO_LEVEL;

        if (syscall(SYS_ioprio_set, CANARY_IOPRIO_WHO_PROCESS, 0, prio) < 0)
                return -errno;
        return 0;
}
