/* Reading files below a root directory fd. */
#include "fsroot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int root_open(const char *path)
{
        int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Paths are relative to the root fd even when written with a leading '/'. */
static const char *rel(int dirfd, const char *path)
{
        if (dirfd == AT_FDCWD)
                return path;
        while (*path == '/')
                path++;
        return *path ? path : ".";
}

/* Opens path below dirfd for reading when it is a regular file, and fills *st. Looked at by its
 * name first, so that nothing else is ever opened when nobody swaps files (opening a device node
 * can act: a watchdog starts counting, a tape rewinds; opening a FIFO wakes a writer waiting for
 * a reader); then opened without waiting (O_NONBLOCK: a FIFO swapped in meanwhile opens at once;
 * regular files ignore it) and looked at again through the descriptor, which is what counts.
 * Returns the descriptor, or -errno: -EINVAL when it is not a regular file (*st says what). */
static int open_regular(int dirfd, const char *path, struct stat *st)
{
        int fd;

        path = rel(dirfd, path);
        if (fstatat(dirfd, path, st, 0) < 0)
                return -errno;
        if (!S_ISREG(st->st_mode))
                return -EINVAL;
        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
                int r = S_ISREG(st->st_mode) ? -errno : -EINVAL;
                close(fd);
                return r;
        }
        return fd;
}

int read_attr_at(int dirfd, const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        ssize_t n;

        if (size < 2)
                return -EINVAL;
        fd = open_regular(dirfd, path, &st);
        if (fd < 0)
                return fd;
        n = read(fd, buf, size);
        if (n < 0)
                return -errno;
        if ((size_t)n >= size)
                return -EFBIG;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                n--;
        buf[n] = 0;
        return (int)n;
}

int read_fd_all(int fd, size_t max, char **ret_buf, size_t *ret_len)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;

        if (max > SIZE_MAX / 4)
                max = SIZE_MAX / 4; /* room for the arithmetic below */
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        if (cap > max)
                                return -EFBIG;
                        cap = cap ? cap * 2 : 16384;
                        if (cap > max + 1)
                                cap = max + 1;
                        buf = xrealloc(buf, cap + 1);
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return -EFBIG;
        }
        if (!buf)
                buf = xmalloc(1);
        buf[len] = 0;
        *ret_buf = buf;
        buf = NULL;
        *ret_len = len;
        return 0;
}

int read_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
        _cleanup_close_ int fd = -1;

        fd = openat(dirfd, rel(dirfd, path), O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_fd_all(fd, max, ret_buf, ret_len);
}

const char *file_kind(mode_t mode)
{
        switch (mode & S_IFMT) {
        case S_IFREG:
                return "a regular file";
        case S_IFDIR:
                return "a directory";
        case S_IFIFO:
                return "a FIFO";
        case S_IFSOCK:
                return "a socket";
        case S_IFCHR:
                return "a character device";
        case S_IFBLK:
                return "a block device";
        case S_IFLNK:
                return "a symbolic link";
        default:
                return "not a regular file";
        }
}

/* "larger than 1 MiB" (or KiB, or bytes: the largest unit that max is a whole number of). */
static void too_large(size_t max, char *why, size_t whysz)
{
        if (max >= 1024 * 1024 && max % (1024 * 1024) == 0)
                snprintf(why, whysz, "larger than %zu MiB", max / (1024 * 1024));
        else if (max >= 1024 && max % 1024 == 0)
                snprintf(why, whysz, "larger than %zu KiB", max / 1024);
        else
                snprintf(why, whysz, "larger than %zu bytes", max);
}

int open_regular_at(int dirfd, const char *path, size_t max, char *why, size_t whysz)
{
        struct stat st;
        int fd = open_regular(dirfd, path, &st);

        if (fd == -EINVAL) {
                if (why) {
                        const char *kind = file_kind(st.st_mode);
                        snprintf(why, whysz, "%s%s", kind,
                                 strcmp(kind, "not a regular file") ? ", not a regular file" : "");
                }
                return fd;
        }
        if (fd < 0) {
                if (why)
                        snprintf(why, whysz, "%s", strerror(-fd));
                return fd;
        }
        if ((uint64_t)st.st_size > (uint64_t)max) {
                if (why)
                        too_large(max, why, whysz);
                close(fd);
                return -EFBIG;
        }
        return fd;
}

int read_regular_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len,
                    char *why, size_t whysz)
{
        _cleanup_close_ int fd = open_regular_at(dirfd, path, max, why, whysz);
        int r;

        if (fd < 0)
                return fd;
        /* the size can grow between fstat() and the read: the bound holds there too */
        r = read_fd_all(fd, max, ret_buf, ret_len);
        if (r < 0 && why) {
                if (r == -EFBIG)
                        too_large(max, why, whysz);
                else
                        snprintf(why, whysz, "%s", strerror(-r));
        }
        return r;
}

int opendir_at(int dirfd, DIR **ret)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret = d;
        return fd;
}
