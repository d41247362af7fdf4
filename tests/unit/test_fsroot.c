/* Unit tests of reading files below a root directory fd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "fsroot.h"
#include "util.h"

struct root {
        char dir[64];
        int fd;
};

static void put(const char *dir, const char *name, const void *data, size_t len)
{
        char path[128];
        int fd;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t)len);
        close(fd);
}

static int setup(void **state)
{
        struct root *r = calloc(1, sizeof(*r));
        char sub[96];

        snprintf(r->dir, sizeof r->dir, "/tmp/diskpulse-test-fsroot-XXXXXX");
        if (!mkdtemp(r->dir))
                return -1;
        snprintf(sub, sizeof sub, "%s/block", r->dir);
        mkdir(sub, 0755);
        put(r->dir, "block/rotational", "1\n", 2);
        put(r->dir, "block/crlf", "write back\r\n\n", 13);
        put(r->dir, "block/empty", "", 0);
        put(r->dir, "block/nonl", "abc", 3);
        r->fd = root_open(r->dir);
        if (r->fd < 0)
                return -1;
        *state = r;
        return 0;
}

static int teardown(void **state)
{
        struct root *r = *state;

        close(r->fd);
        if (test_remove_tree(r->dir) < 0)
                return -1;
        free(r);
        return 0;
}

static void test_root_open(void **state)
{
        struct root *r = *state;
        char file[128];
        int fd;

        assert_int_equal(root_open("/nonexistent/root"), -ENOENT);
        /* a regular file is not a root */
        snprintf(file, sizeof file, "%s/block/rotational", r->dir);
        assert_int_equal(root_open(file), -ENOTDIR);
        fd = root_open("/");
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        /* O_PATH: usable as a directory fd */
        assert_int_equal(faccessat(fd, "proc", F_OK, 0), 0);
        close(fd);
}

static void test_read_attr(void **state)
{
        struct root *r = *state;
        char buf[32];

        assert_int_equal(read_attr_at(r->fd, "block/rotational", buf, sizeof buf), 1);
        assert_string_equal(buf, "1");
        /* trailing CR and LF stripped */
        assert_int_equal(read_attr_at(r->fd, "block/crlf", buf, sizeof buf), 10);
        assert_string_equal(buf, "write back");
        assert_int_equal(read_attr_at(r->fd, "block/empty", buf, sizeof buf), 0);
        assert_string_equal(buf, "");
        assert_int_equal(read_attr_at(r->fd, "block/nonl", buf, sizeof buf), 3);
        assert_string_equal(buf, "abc");
        /* a leading '/' is still below the root */
        assert_int_equal(read_attr_at(r->fd, "/block/rotational", buf, sizeof buf), 1);
        assert_int_equal(read_attr_at(r->fd, "block/missing", buf, sizeof buf), -ENOENT);
        /* does not fit: "1\n" needs 3 bytes with the terminator */
        assert_int_equal(read_attr_at(r->fd, "block/rotational", buf, 2), -EFBIG);
        assert_int_equal(read_attr_at(r->fd, "block/rotational", buf, 3), 1);
        assert_int_equal(read_attr_at(r->fd, "block/nonl", buf, 3), -EFBIG);
        assert_int_equal(read_attr_at(r->fd, "block/rotational", buf, 1), -EINVAL);
        /* AT_FDCWD reads host paths */
        assert_true(read_attr_at(AT_FDCWD, "/proc/self/stat", buf, sizeof buf) == -EFBIG);
}

static void test_read_file(void **state)
{
        struct root *r = *state;
        char *buf = (char *)0x1;
        size_t len = 99;
        size_t big = 100000;
        char *data = malloc(big);

        assert_int_equal(read_file_at(r->fd, "block/crlf", 1024, &buf, &len), 0);
        assert_int_equal(len, 13);
        assert_memory_equal(buf, "write back\r\n\n", 14); /* NUL-terminated, nothing stripped */
        free(buf);

        assert_int_equal(read_file_at(r->fd, "block/empty", 1024, &buf, &len), 0);
        assert_int_equal(len, 0);
        assert_string_equal(buf, "");
        free(buf);

        /* larger than one read, exactly at the limit, and past it */
        for (size_t i = 0; i < big; i++)
                data[i] = (char)('a' + i % 26);
        put(r->dir, "block/big", data, big);
        assert_int_equal(read_file_at(r->fd, "block/big", big, &buf, &len), 0);
        assert_int_equal(len, big);
        assert_memory_equal(buf, data, big);
        assert_int_equal(buf[big], 0);
        free(buf);

        buf = (char *)0x1;
        len = 99;
        assert_int_equal(read_file_at(r->fd, "block/big", big - 1, &buf, &len), -EFBIG);
        /* untouched on failure */
        assert_ptr_equal(buf, (char *)0x1);
        assert_int_equal(len, 99);
        assert_int_equal(read_file_at(r->fd, "block/missing", big, &buf, &len), -ENOENT);
        assert_ptr_equal(buf, (char *)0x1);
        assert_int_equal(read_file_at(r->fd, "block/nonl", 2, &buf, &len), -EFBIG);
        free(data);
}

/* A FIFO, a directory, a socket and a device node where a file is expected: each refused at
 * once, with what it is, never waited on (a FIFO without a writer would block a blocking open()
 * forever: the alarm turns such a hang into a failure instead of a stuck test). */
static void test_not_regular(void **state)
{
        struct root *r = *state;
        char path[160], why[128], buf[32], *text = (char *)0x1;
        size_t len = 99;
        int fd;

        snprintf(path, sizeof path, "%s/block/fifo", r->dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        snprintf(path, sizeof path, "%s/block/sock", r->dir);
        assert_int_equal(mknod(path, S_IFSOCK | 0600, 0), 0);
        alarm(20);

        assert_int_equal(read_attr_at(r->fd, "block/fifo", buf, sizeof buf), -EINVAL);
        assert_int_equal(read_attr_at(r->fd, "block", buf, sizeof buf), -EINVAL);
        assert_int_equal(read_attr_at(AT_FDCWD, "/dev/zero", buf, sizeof buf), -EINVAL);

        assert_int_equal(read_regular_at(r->fd, "block/fifo", 1024, &text, &len, why, sizeof why),
                         -EINVAL);
        assert_string_equal(why, "a FIFO, not a regular file");
        assert_int_equal(read_regular_at(r->fd, "block", 1024, &text, &len, why, sizeof why),
                         -EINVAL);
        assert_string_equal(why, "a directory, not a regular file");
        assert_int_equal(read_regular_at(AT_FDCWD, "/dev/zero", 1024, &text, &len, why, sizeof why),
                         -EINVAL);
        assert_string_equal(why, "a character device, not a regular file");
        assert_int_equal(read_regular_at(r->fd, "block/sock", 1024, &text, &len, why, sizeof why),
                         -EINVAL);
        assert_string_equal(why, "a socket, not a regular file");
        assert_int_equal(
            read_regular_at(r->fd, "block/missing", 1024, &text, &len, why, sizeof why), -ENOENT);
        assert_string_equal(why, strerror(ENOENT));
        /* untouched on failure; why may be NULL */
        assert_ptr_equal(text, (char *)0x1);
        assert_int_equal(len, 99);
        assert_int_equal(read_regular_at(r->fd, "block/fifo", 1024, &text, &len, NULL, 0), -EINVAL);
        /* a FIFO with a writer waiting is refused just the same: nothing read from it */
        fd = openat(r->fd, "block/fifo", O_RDWR | O_CLOEXEC | O_NONBLOCK);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "x = 1\n", 6), 6);
        assert_int_equal(read_regular_at(r->fd, "block/fifo", 1024, &text, &len, why, sizeof why),
                         -EINVAL);
        close(fd);
        alarm(0);

        /* never opened at all: a writer waiting for a reader (open() blocks until one comes)
         * still waits afterwards */
        {
                pid_t pid = fork();
                int st = 0;

                assert_true(pid >= 0);
                if (pid == 0) {
                        int w = openat(r->fd, "block/fifo", O_WRONLY | O_CLOEXEC);
                        _exit(w >= 0 ? 0 : 1);
                }
                usleep(200 * 1000); /* time for the child to block in open() */
                assert_int_equal(
                    read_regular_at(r->fd, "block/fifo", 1024, &text, &len, why, sizeof why),
                    -EINVAL);
                assert_int_equal(read_attr_at(r->fd, "block/fifo", buf, sizeof buf), -EINVAL);
                usleep(200 * 1000);
                assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still waiting */
                kill(pid, SIGKILL);
                assert_int_equal(waitpid(pid, &st, 0), pid);
        }

        assert_string_equal(file_kind(S_IFREG | 0644), "a regular file");
        assert_string_equal(file_kind(S_IFBLK), "a block device");
        assert_string_equal(file_kind(S_IFLNK), "a symbolic link");
        assert_string_equal(file_kind(S_IFSOCK), "a socket");
        assert_string_equal(file_kind(0), "not a regular file");
}

/* A regular file: read whole up to the bound; past it refused before reading, by its size, with
 * the bound in the message. */
static void test_read_regular(void **state)
{
        struct root *r = *state;
        char why[128], *text = NULL;
        size_t len = 0;
        char *big = malloc(3 * 1024 + 1);
        int fd;

        assert_int_equal(read_regular_at(r->fd, "block/crlf", 1024, &text, &len, why, sizeof why),
                         0);
        assert_int_equal(len, 13);
        assert_memory_equal(text, "write back\r\n\n", 14);
        free(text);
        text = NULL;
        assert_int_equal(read_regular_at(r->fd, "block/crlf", 13, &text, &len, why, sizeof why), 0);
        free(text);
        text = NULL;
        assert_int_equal(read_regular_at(r->fd, "block/crlf", 12, &text, &len, why, sizeof why),
                         -EFBIG);
        assert_string_equal(why, "larger than 12 bytes");
        memset(big, 'x', 3 * 1024 + 1);
        put(r->dir, "block/big3k", big, 3 * 1024 + 1);
        assert_int_equal(
            read_regular_at(r->fd, "block/big3k", 3 * 1024, &text, &len, why, sizeof why), -EFBIG);
        assert_string_equal(why, "larger than 3 KiB");
        assert_null(text);
        fd = open_regular_at(r->fd, "block/big3k", 1 << 20, why, sizeof why);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        /* procfs files say 0 bytes: read to their end, the bound still applies */
        assert_int_equal(
            read_regular_at(AT_FDCWD, "/proc/self/stat", 1 << 20, &text, &len, why, sizeof why), 0);
        assert_true(len > 10);
        free(text);
        text = NULL;
        assert_int_equal(
            read_regular_at(AT_FDCWD, "/proc/self/stat", 8, &text, &len, why, sizeof why), -EFBIG);
        assert_string_equal(why, "larger than 8 bytes");
        assert_int_equal(
            read_regular_at(AT_FDCWD, "/proc/self/stat", 2 << 20, &text, &len, NULL, 0), 0);
        free(text);
        free(big);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_root_open),    cmocka_unit_test(test_read_attr),
            cmocka_unit_test(test_read_file),    cmocka_unit_test(test_not_regular),
            cmocka_unit_test(test_read_regular),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
