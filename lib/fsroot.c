/* Reading files below a root directory fd. */
#include "fsroot.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
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

int read_attr_at(int dirfd, const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = -1;
        ssize_t n;

        if (size < 2)
                return -EINVAL;
        fd = openat(dirfd, rel(dirfd, path), O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
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
