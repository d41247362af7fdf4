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
#include <sys/stat.h>
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_root_open),
            cmocka_unit_test(test_read_attr),
            cmocka_unit_test(test_read_file),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
