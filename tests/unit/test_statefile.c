/* Unit tests of lib/statefile.c: atomic replacement (both temp-file ways), the old content kept
 * when a write fails (full and read-only tmpfs in a private mount namespace), no temp files left,
 * the flush that fsync causes, reading with limits, stale temp removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "fsroot.h"
#include "statefile.h"
#include "util.h"

static int setup_dir(void **state)
{
        struct tmpdir *d = calloc(1, sizeof(*d));

        if (!d || test_tmpdir_new(d, "test_statefile") < 0) {
                free(d);
                return -1;
        }
        *state = d;
        return 0;
}

static int teardown_dir(void **state)
{
        struct tmpdir *d = *state;
        int r = test_tmpdir_free(d);

        free(d);
        return r;
}

/* The names in the directory other than "." and "..", sorted, joined by spaces. */
static void list_dir(int dirfd, char *out, size_t size)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *names[64];
        size_t n = 0, o = 0;
        struct dirent *e;
        DIR *dir;

        assert_true(fd >= 0);
        dir = fdopendir(fd);
        assert_non_null(dir);
        while ((e = readdir(dir)) && n < ARRAY_SIZE(names))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        names[n++] = strdup(e->d_name);
        closedir(dir);
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++)
                        if (strcmp(names[j], names[i]) < 0) {
                                char *t = names[i];
                                names[i] = names[j];
                                names[j] = t;
                        }
        out[0] = 0;
        for (size_t i = 0; i < n; i++) {
                o += (size_t)snprintf(out + o, size - o, "%s%s", i ? " " : "", names[i]);
                free(names[i]);
        }
}

static void assert_content(int dirfd, const char *name, const char *want)
{
        char *buf = NULL;
        size_t len = 0;

        assert_int_equal(statefile_read(dirfd, name, 1 << 20, &buf, &len), 0);
        assert_int_equal(len, strlen(want));
        assert_string_equal(buf, want);
        free(buf);
}

static void test_write_and_replace(void **state)
{
        static const unsigned flag_sets[] = {0, STATEFILE_NO_TMPFILE};
        struct tmpdir *d = *state;
        char names[512];

        for (size_t k = 0; k < ARRAY_SIZE(flag_sets); k++) {
                unsigned fl = flag_sets[k];

                assert_int_equal(statefile_write_atomic_flags(d->fd, "state", "one\n", 4, fl), 0);
                assert_content(d->fd, "state", "one\n");
                assert_int_equal(
                    statefile_write_atomic_flags(d->fd, "state", "second version\n", 15, fl), 0);
                assert_content(d->fd, "state", "second version\n");
                /* shorter content replaces, never leaves a tail */
                assert_int_equal(statefile_write_atomic_flags(d->fd, "state", "3", 1, fl), 0);
                assert_content(d->fd, "state", "3");
                assert_int_equal(statefile_write_atomic_flags(d->fd, "state", NULL, 0, fl), 0);
                assert_content(d->fd, "state", "");
                /* no temp file left behind */
                list_dir(d->fd, names, sizeof names);
                assert_string_equal(names, "state");
        }

        struct stat st;
        assert_int_equal(fstatat(d->fd, "state", &st, 0), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_nlink, 1);
        assert_int_equal(st.st_mode & 07777, STATEFILE_MODE);

        /* a big one */
        size_t big = 3 * 1024 * 1024 + 17;
        char *data = malloc(big + 1), *back = NULL;
        size_t len = 0;
        assert_non_null(data);
        for (size_t i = 0; i < big; i++)
                data[i] = (char)('a' + i % 23);
        assert_int_equal(statefile_write_atomic(d->fd, "big", data, big), 0);
        assert_int_equal(statefile_read(d->fd, "big", big, &back, &len), 0);
        assert_int_equal(len, big);
        assert_memory_equal(back, data, big);
        free(back);
        free(data);
        assert_int_equal(unlinkat(d->fd, "big", 0), 0);
}

/* 0600 whatever the umask: a wide one (0), the usual one, one that takes the owner's write bit
 * away; over a file that had a wider mode; both temp-file ways. */
static void test_mode_regardless_of_umask(void **state)
{
        static const mode_t masks[] = {0, 022, 002, 0277, 0777};
        struct tmpdir *d = *state;
        struct stat st;
        mode_t old = umask(0);

        for (size_t m = 0; m < ARRAY_SIZE(masks); m++)
                for (unsigned fl = 0; fl <= STATEFILE_NO_TMPFILE; fl++) {
                        int fd = openat(d->fd, "wide", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
                        assert_true(fd >= 0);
                        assert_int_equal(fchmod(fd, 0666), 0);
                        close(fd);
                        umask(masks[m]);
                        assert_int_equal(statefile_write_atomic_flags(d->fd, "state", "s", 1, fl),
                                         0);
                        assert_int_equal(statefile_write_atomic_flags(d->fd, "wide", "w", 1, fl),
                                         0);
                        umask(0);
                        assert_int_equal(fstatat(d->fd, "state", &st, 0), 0);
                        if ((st.st_mode & 07777) != 0600)
                                fail_msg("umask %03o flags %u: mode %03o", masks[m], fl,
                                         st.st_mode & 07777);
                        assert_int_equal(fstatat(d->fd, "wide", &st, 0), 0);
                        assert_int_equal(st.st_mode & 07777, 0600);
                        assert_content(d->fd, "wide", "w");
                        assert_int_equal(unlinkat(d->fd, "state", 0), 0);
                        assert_int_equal(unlinkat(d->fd, "wide", 0), 0);
                }
        umask(old);
}

static void test_restrict_mode(void **state)
{
        struct tmpdir *d = *state;
        struct stat st;
        int fd = openat(d->fd, "old", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(fchmod(fd, 0644), 0);
        close(fd);
        assert_int_equal(statefile_restrict_mode(d->fd, "old"), 1);
        assert_int_equal(fstatat(d->fd, "old", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(statefile_restrict_mode(d->fd, "old"), 0);
        assert_int_equal(statefile_restrict_mode(d->fd, "absent"), -ENOENT);
        assert_int_equal(statefile_restrict_mode(d->fd, "a/b"), -EINVAL);
        /* a symlink is not followed (its target keeps its mode), a directory is not a file */
        assert_int_equal(fchmodat(d->fd, "old", 0644, 0), 0);
        assert_int_equal(symlinkat("old", d->fd, "link"), 0);
        assert_int_equal(statefile_restrict_mode(d->fd, "link"), -ELOOP);
        assert_int_equal(fstatat(d->fd, "old", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(mkdirat(d->fd, "dir", 0755), 0);
        assert_int_equal(statefile_restrict_mode(d->fd, "dir"), -EINVAL);
        assert_int_equal(unlinkat(d->fd, "link", 0), 0);
        assert_int_equal(unlinkat(d->fd, "old", 0), 0);
        assert_int_equal(unlinkat(d->fd, "dir", AT_REMOVEDIR), 0);
}

/* "state.corrupt-YYYYMMDDTHHMMSSZ", optionally followed by "-N". */
static void assert_aside_name(const char *got, const char *tag)
{
        char prefix[64];
        size_t pl;

        snprintf(prefix, sizeof prefix, "state.%s-", tag);
        pl = strlen(prefix);
        if (strncmp(got, prefix, pl) != 0)
                fail_msg("aside name %s does not start with %s", got, prefix);
        for (size_t i = 0; i < 16; i++) {
                char c = got[pl + i], want = i == 8 ? 'T' : i == 15 ? 'Z' : '0';
                if (want == '0' ? !(c >= '0' && c <= '9') : c != want)
                        fail_msg("aside name %s: no UTC timestamp after %s", got, prefix);
        }
        /* then ".N", the order they were made */
        if (got[pl + 16] != '.' || !(got[pl + 17] >= '1' && got[pl + 17] <= '9') ||
            strspn(got + pl + 17, "0123456789") != strlen(got + pl + 17))
                fail_msg("aside name %s: no sequence number after the timestamp", got);
}

/* The N of an aside name "....Z.N". */
static unsigned long aside_seq(const char *name)
{
        const char *dot = strrchr(name, '.');

        assert_non_null(dot);
        return strtoul(dot + 1, NULL, 10);
}

static void test_set_aside(void **state)
{
        struct tmpdir *d = *state;
        char a1[NAME_MAX + 1], a2[NAME_MAX + 1], a3[NAME_MAX + 1], names[1024], want[1024];
        struct stat s1, s2;

        /* moved: the name is free for a fresh file, the bytes are kept, mode and all */
        assert_int_equal(statefile_write_atomic(d->fd, "state", "bad one", 7), 0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "corrupt", 0, a1, sizeof a1), 0);
        assert_aside_name(a1, "corrupt");
        assert_content(d->fd, a1, "bad one");
        assert_int_equal(fstatat(d->fd, a1, &s1, 0), 0);
        assert_int_equal(s1.st_mode & 07777, 0600);
        list_dir(d->fd, names, sizeof names);
        assert_string_equal(names, a1);

        /* a second one never replaces the first, and comes after it (within the same second
         * too) */
        assert_int_equal(statefile_write_atomic(d->fd, "state", "bad two", 7), 0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "corrupt", 0, a2, sizeof a2), 0);
        assert_aside_name(a2, "corrupt");
        assert_string_not_equal(a1, a2);
        assert_int_equal(aside_seq(a1), 1);
        assert_int_equal(aside_seq(a2), 2);
        assert_content(d->fd, a1, "bad one");
        assert_content(d->fd, a2, "bad two");

        /* kept: the name stays in place, the aside name is the same file (a hard link) */
        assert_int_equal(statefile_write_atomic(d->fd, "state", "partly bad", 10), 0);
        assert_int_equal(
            statefile_set_aside(d->fd, "state", "partial", STATEFILE_ASIDE_KEEP, a3, sizeof a3), 0);
        assert_aside_name(a3, "partial");
        assert_content(d->fd, "state", "partly bad");
        assert_content(d->fd, a3, "partly bad");
        assert_int_equal(fstatat(d->fd, "state", &s1, 0), 0);
        assert_int_equal(fstatat(d->fd, a3, &s2, 0), 0);
        assert_int_equal(s1.st_ino, s2.st_ino);
        /* the next atomic write replaces the name only: the kept bytes stay */
        assert_int_equal(statefile_write_atomic(d->fd, "state", "good", 4), 0);
        assert_content(d->fd, "state", "good");
        assert_content(d->fd, a3, "partly bad");
        snprintf(want, sizeof want, "state %s %s %s", a1, a2, a3);
        list_dir(d->fd, names, sizeof names);
        assert_string_equal(names, want);
        assert_int_equal(unlinkat(d->fd, a1, 0), 0);
        assert_int_equal(unlinkat(d->fd, a2, 0), 0);
        assert_int_equal(unlinkat(d->fd, a3, 0), 0);

        /* whatever sits under the name goes aside: a directory, a symlink (not its target) */
        assert_int_equal(unlinkat(d->fd, "state", 0), 0);
        assert_int_equal(mkdirat(d->fd, "state", 0755), 0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "corrupt", 0, a1, sizeof a1), 0);
        assert_int_equal(fstatat(d->fd, a1, &s1, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(s1.st_mode));
        assert_int_equal(unlinkat(d->fd, a1, AT_REMOVEDIR), 0);
        assert_int_equal(statefile_write_atomic(d->fd, "target", "t", 1), 0);
        assert_int_equal(symlinkat("target", d->fd, "state"), 0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "corrupt", 0, a1, sizeof a1), 0);
        assert_int_equal(fstatat(d->fd, a1, &s1, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(s1.st_mode));
        assert_content(d->fd, "target", "t");
        assert_int_equal(unlinkat(d->fd, a1, 0), 0);
        assert_int_equal(unlinkat(d->fd, "target", 0), 0);

        /* refused */
        assert_int_equal(statefile_set_aside(d->fd, "state", "corrupt", 0, a1, sizeof a1), -ENOENT);
        assert_int_equal(
            statefile_set_aside(d->fd, "state", "corrupt", STATEFILE_ASIDE_KEEP, a1, sizeof a1),
            -ENOENT);
        assert_int_equal(statefile_write_atomic(d->fd, "state", "x", 1), 0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "", 0, NULL, 0), -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, "state", "Bad", 0, NULL, 0), -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, "state", "bad-tag", 0, NULL, 0), -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, "state", "abcdefghijklmnopq", 0, NULL, 0),
                         -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, "../state", "corrupt", 0, NULL, 0), -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, NULL, "corrupt", 0, NULL, 0), -EINVAL);
        assert_int_equal(statefile_set_aside(d->fd, "state", NULL, 0, NULL, 0), -EINVAL);
        list_dir(d->fd, names, sizeof names);
        assert_string_equal(names, "state");
        /* without a buffer for the name */
        assert_int_equal(statefile_set_aside(d->fd, "state", "abcdefghijklmnop", 0, NULL, 0), 0);
        list_dir(d->fd, names, sizeof names);
        assert_true(strncmp(names, "state.abcdefghijklmnop-", 23) == 0 && !strchr(names, ' '));
        assert_int_equal(unlinkat(d->fd, names, 0), 0);
}

static void test_write_through_other_fds(void **state)
{
        struct tmpdir *d = *state;
        char cwd[512];
        int rd;

        /* a plain directory fd and AT_FDCWD work as well as O_PATH */
        rd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(rd >= 0);
        assert_int_equal(statefile_write_atomic(rd, "s1", "x", 1), 0);
        close(rd);
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(d->path), 0);
        assert_int_equal(statefile_write_atomic(AT_FDCWD, "s2", "y", 1), 0);
        assert_int_equal(chdir(cwd), 0);
        assert_content(d->fd, "s1", "x");
        assert_content(d->fd, "s2", "y");
        /* a file is no directory */
        rd = openat(d->fd, "s1", O_RDONLY | O_CLOEXEC);
        assert_true(rd >= 0);
        assert_int_equal(statefile_write_atomic(rd, "s3", "z", 1), -ENOTDIR);
        close(rd);
        assert_int_equal(unlinkat(d->fd, "s1", 0), 0);
        assert_int_equal(unlinkat(d->fd, "s2", 0), 0);
}

static void test_bad_arguments(void **state)
{
        struct tmpdir *d = *state;
        char name[STATEFILE_NAME_MAX + 2], names[512];
        char *buf = (char *)"untouched";
        size_t len = 7;

        assert_int_equal(statefile_write_atomic(d->fd, "", "x", 1), -EINVAL);
        assert_int_equal(statefile_write_atomic(d->fd, ".", "x", 1), -EINVAL);
        assert_int_equal(statefile_write_atomic(d->fd, "..", "x", 1), -EINVAL);
        assert_int_equal(statefile_write_atomic(d->fd, "a/b", "x", 1), -EINVAL);
        assert_int_equal(statefile_write_atomic(d->fd, NULL, "x", 1), -EINVAL);
        assert_int_equal(statefile_write_atomic(d->fd, "x", NULL, 1), -EINVAL);
        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = 0;
        assert_int_equal(statefile_write_atomic(d->fd, name, "x", 1), -EINVAL);
        name[STATEFILE_NAME_MAX] = 0; /* the longest name */
        assert_int_equal(statefile_write_atomic(d->fd, name, "x", 1), 0);
        assert_int_equal(statefile_write_atomic_flags(d->fd, name, "x", 1, STATEFILE_NO_TMPFILE),
                         0);
        assert_int_equal(unlinkat(d->fd, name, 0), 0);
        /* the size limit is checked before anything is written */
        assert_int_equal(statefile_write_atomic(d->fd, "x", "", (size_t)STATEFILE_MAX_SIZE + 1),
                         -EFBIG);
        assert_int_equal(statefile_read(d->fd, "../x", 10, &buf, &len), -EINVAL);
        assert_int_equal(statefile_write_atomic(-1, "x", "x", 1), -EBADF);
        assert_string_equal(buf, "untouched");
        assert_int_equal(len, 7);
        list_dir(d->fd, names, sizeof names);
        assert_string_equal(names, "");
}

static void test_rename_failure_keeps_old(void **state)
{
        static const unsigned flag_sets[] = {0, STATEFILE_NO_TMPFILE};
        struct tmpdir *d = *state;
        char names[512];

        /* the target is a non-empty directory: rename fails after the temp file was written */
        assert_int_equal(mkdirat(d->fd, "taken", 0755), 0);
        assert_int_equal(statefile_write_atomic(d->fd, "taken/inner", "old", 3), -EINVAL);
        int dfd = openat(d->fd, "taken", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(statefile_write_atomic(dfd, "inner", "old", 3), 0);
        close(dfd);
        for (size_t k = 0; k < ARRAY_SIZE(flag_sets); k++) {
                int r = statefile_write_atomic_flags(d->fd, "taken", "new", 3, flag_sets[k]);
                assert_true(r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST);
                list_dir(d->fd, names, sizeof names);
                assert_string_equal(names, "taken");
        }
        dfd = openat(d->fd, "taken", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_content(dfd, "inner", "old");
        close(dfd);
        assert_int_equal(unlinkat(d->fd, "taken/inner", 0), 0);
        assert_int_equal(unlinkat(d->fd, "taken", AT_REMOVEDIR), 0);
}

static void test_read_limits(void **state)
{
        struct tmpdir *d = *state;
        char *buf = NULL;
        size_t len = 0;

        assert_int_equal(statefile_read(d->fd, "absent", 100, &buf, &len), -ENOENT);
        assert_int_equal(statefile_write_atomic(d->fd, "f", "0123456789", 10), 0);
        assert_int_equal(statefile_read(d->fd, "f", 9, &buf, &len), -EFBIG);
        assert_null(buf);
        assert_int_equal(statefile_read(d->fd, "f", 10, &buf, &len), 0);
        assert_int_equal(len, 10);
        assert_string_equal(buf, "0123456789");
        free(buf);
        buf = NULL;
        assert_int_equal(statefile_read(d->fd, "f", SIZE_MAX, &buf, &len), 0);
        free(buf);
        buf = NULL;
        /* empty file: a valid empty string */
        assert_int_equal(statefile_write_atomic(d->fd, "e", "", 0), 0);
        assert_int_equal(statefile_read(d->fd, "e", 0, &buf, &len), 0);
        assert_int_equal(len, 0);
        assert_string_equal(buf, "");
        free(buf);
        buf = NULL;
        /* not a regular file, or a symlink: refused (a FIFO without hanging) */
        assert_int_equal(mkdirat(d->fd, "dir", 0755), 0);
        assert_int_equal(statefile_read(d->fd, "dir", 100, &buf, &len), -EINVAL);
        assert_int_equal(mkfifoat(d->fd, "fifo", 0600), 0);
        assert_int_equal(statefile_read(d->fd, "fifo", 100, &buf, &len), -EINVAL);
        assert_int_equal(symlinkat("f", d->fd, "link"), 0);
        assert_int_equal(statefile_read(d->fd, "link", 100, &buf, &len), -ELOOP);
        assert_null(buf);
        /* /proc files report size 0 but have content: read to the end, within the limit */
        int proc = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc >= 0) {
                assert_int_equal(statefile_read(proc, "status", 1 << 20, &buf, &len), 0);
                assert_true(len > 0 && strstr(buf, "Name:"));
                free(buf);
                buf = NULL;
                assert_int_equal(statefile_read(proc, "status", 10, &buf, &len), -EFBIG);
                close(proc);
        }
        unlinkat(d->fd, "f", 0);
        unlinkat(d->fd, "e", 0);
        unlinkat(d->fd, "dir", AT_REMOVEDIR);
        unlinkat(d->fd, "fifo", 0);
        unlinkat(d->fd, "link", 0);
}

static void test_remove_stale(void **state)
{
        static const char *const files[] = {".state.tmp-0123456789abcdef",
                                            ".state.tmp-short",
                                            ".state.tmp-0123456789abcdef0",
                                            ".other.tmp-0123456789abcdef",
                                            "state",
                                            ".state.tmp-fedcba9876543210"};
        struct tmpdir *d = *state;
        char names[512];

        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                int fd = openat(d->fd, files[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
                close(fd);
        }
        assert_int_equal(statefile_remove_stale(d->fd, "state"), 2);
        list_dir(d->fd, names, sizeof names);
        assert_string_equal(names, ".other.tmp-0123456789abcdef .state.tmp-0123456789abcdef0 "
                                   ".state.tmp-short state");
        assert_int_equal(statefile_remove_stale(d->fd, "state"), 0);
        assert_int_equal(statefile_remove_stale(d->fd, "a/b"), -EINVAL);
        for (size_t i = 0; i < ARRAY_SIZE(files); i++)
                unlinkat(d->fd, files[i], 0);
}

/* A tmpfs of 64 KiB in a private mount namespace (it vanishes with this process). Returns
 * false and prints why when that is impossible. */
static bool mount_tiny_tmpfs(const char *dir, const char *why_prefix)
{
        static bool unshared;

        if (geteuid() != 0) {
                print_message("%s: skipped, needs root to mount a tmpfs\n", why_prefix);
                return false;
        }
        if (!unshared) {
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
                        print_message("%s: skipped, no private mount namespace: %s\n", why_prefix,
                                      strerror(errno));
                        return false;
                }
                unshared = true;
        }
        if (mount("diskpulse-test", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")) {
                print_message("%s: skipped, cannot mount a tmpfs: %s\n", why_prefix,
                              strerror(errno));
                return false;
        }
        return true;
}

static void test_failed_write_keeps_old(void **state)
{
        static const unsigned flag_sets[] = {0, STATEFILE_NO_TMPFILE};
        struct tmpdir *d = *state;
        char mnt[300], names[512];
        size_t big = 32 * 1024;
        char *data;
        int fd, filler;

        snprintf(mnt, sizeof mnt, "%s/mnt", d->path);
        assert_int_equal(mkdir(mnt, 0755), 0);
        if (!mount_tiny_tmpfs(mnt, "full and read-only filesystem")) {
                /* at least the permission error, where it applies */
                if (geteuid() != 0) {
                        fd = root_open(mnt);
                        assert_true(fd >= 0);
                        assert_int_equal(statefile_write_atomic(fd, "state", "old", 3), 0);
                        assert_int_equal(chmod(mnt, 0555), 0);
                        assert_int_equal(statefile_write_atomic(fd, "state", "new", 3), -EACCES);
                        assert_content(fd, "state", "old");
                        assert_int_equal(chmod(mnt, 0755), 0);
                        unlinkat(fd, "state", 0);
                        close(fd);
                }
                rmdir(mnt);
                skip();
        }
        fd = root_open(mnt);
        assert_true(fd >= 0);
        assert_int_equal(statefile_write_atomic(fd, "state", "old content\n", 12), 0);

        /* fill the filesystem */
        data = malloc(big);
        assert_non_null(data);
        memset(data, 'x', big);
        filler = openat(fd, "filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(filler >= 0);
        while (write(filler, data, 4096) == 4096)
                ;
        close(filler);

        for (size_t k = 0; k < ARRAY_SIZE(flag_sets); k++) {
                int r = statefile_write_atomic_flags(fd, "state", data, big, flag_sets[k]);
                if (r != -ENOSPC)
                        fail_msg("write to a full tmpfs (flags %u): %d, want -ENOSPC", flag_sets[k],
                                 r);
                assert_content(fd, "state", "old content\n");
                list_dir(fd, names, sizeof names);
                assert_string_equal(names, "filler state");
        }

        /* read-only */
        assert_int_equal(unlinkat(fd, "filler", 0), 0);
        assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
        for (size_t k = 0; k < ARRAY_SIZE(flag_sets); k++) {
                assert_int_equal(statefile_write_atomic_flags(fd, "state", "new", 3, flag_sets[k]),
                                 -EROFS);
                assert_content(fd, "state", "old content\n");
        }
        list_dir(fd, names, sizeof names);
        assert_string_equal(names, "state");
        assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT, NULL), 0);
        /* and writable again: the new content arrives */
        assert_int_equal(statefile_write_atomic(fd, "state", data, big), 0);
        free(data);
        close(fd);
        assert_int_equal(umount2(mnt, MNT_DETACH), 0);
        assert_int_equal(rmdir(mnt), 0);
}

/* The flush requests of the block device behind fd's filesystem, from its sysfs stat file
 * (Documentation/block/stat.rst: field 16, "flush requests completed"), or -1. */
static long long flushes_of(int fd, char *why, size_t size)
{
        struct stat st;
        char path[128], line[512];
        unsigned long long v[17];
        FILE *f;
        int n;

        if (fstat(fd, &st) < 0 || major(st.st_dev) == 0) {
                snprintf(why, size, "the filesystem has no block device");
                return -1;
        }
        snprintf(path, sizeof path, "/sys/dev/block/%u:%u/stat", major(st.st_dev),
                 minor(st.st_dev));
        f = fopen(path, "re");
        if (!f) {
                snprintf(why, size, "%s: %s", path, strerror(errno));
                return -1;
        }
        if (!fgets(line, sizeof line, f))
                line[0] = 0;
        fclose(f);
        n = sscanf(line,
                   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
                   "%llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
                   &v[11], &v[12], &v[13], &v[14], &v[15], &v[16]);
        if (n < 16) {
                snprintf(why, size, "%s has no flush counter (kernel < 5.5)", path);
                return -1;
        }
        return (long long)v[15];
}

static void test_fsync_reaches_the_disk(void **state)
{
        struct tmpdir *d = *state;
        char why[300] = "", wc[32] = "";
        long long before;
        struct stat st;
        char path[128];
        int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        assert_true(fd >= 0);
        before = flushes_of(fd, why, sizeof why);
        if (before < 0) {
                print_message("flush count: skipped, %s\n", why);
                close(fd);
                skip();
        }
        assert_int_equal(fstat(fd, &st), 0);
        snprintf(path, sizeof path, "/sys/dev/block/%u:%u/queue/write_cache", major(st.st_dev),
                 minor(st.st_dev));
        if (read_attr_at(AT_FDCWD, path, wc, sizeof wc) < 0) {
                snprintf(path, sizeof path, "/sys/dev/block/%u:%u/../queue/write_cache",
                         major(st.st_dev), minor(st.st_dev));
                (void)read_attr_at(AT_FDCWD, path, wc, sizeof wc);
        }
        if (strcmp(wc, "write back") != 0) {
                print_message("flush count: skipped, write cache is \"%s\": no flushes\n", wc);
                close(fd);
                skip();
        }
        /* with both ways; each one must make the kernel flush the disk's cache */
        for (unsigned fl = 0; fl <= STATEFILE_NO_TMPFILE; fl++) {
                long long after;

                before = flushes_of(fd, why, sizeof why);
                assert_int_equal(statefile_write_atomic_flags(d->fd, "durable", "x", 1, fl), 0);
                after = flushes_of(fd, why, sizeof why);
                if (!(after > before))
                        fail_msg("no flush reached the disk (flags %u): %lld -> %lld", fl, before,
                                 after);
        }
        unlinkat(d->fd, "durable", 0);
        close(fd);
}

/* Copies of all tags together are bounded: room is made before a copy, in the order they were
 * made, never the first of a kind while newer ones of it are there, never the new one; a kept
 * file already linked aside is not copied again, and the list is in the order made. */
static void test_aside_bounded(void **state)
{
        struct tmpdir *d = *state;
        char a[NAME_MAX + 1], b[NAME_MAX + 1], first[NAME_MAX + 1], **names = NULL;
        int n;

        /* an old copy of another tag, of the older form, and a stray look-alike */
        assert_int_equal(statefile_write_atomic(d->fd, "state.corrupt-20200101T000000Z", "o", 1),
                         0);
        assert_int_equal(statefile_write_atomic(d->fd, "state.corrupt-2020", "x", 1), 0);
        assert_int_equal(statefile_write_atomic(d->fd, "state", "v0", 2), 0);
        assert_int_equal(
            statefile_set_aside(d->fd, "state", "reset", STATEFILE_ASIDE_KEEP, first, sizeof first),
            0);
        /* unchanged since: the same copy, nothing new */
        assert_int_equal(
            statefile_set_aside(d->fd, "state", "other", STATEFILE_ASIDE_KEEP, a, sizeof a), 0);
        assert_string_equal(a, first);
        for (int i = 1; i <= STATEFILE_ASIDE_MAX + 2; i++) {
                char v[16];
                snprintf(v, sizeof v, "v%d", i);
                assert_int_equal(statefile_write_atomic(d->fd, "state", v, strlen(v)), 0);
                assert_int_equal(
                    statefile_set_aside(d->fd, "state", "reset", STATEFILE_ASIDE_KEEP, b, sizeof b),
                    0);
                assert_content(d->fd, b, v); /* the new copy always survives */
                n = statefile_list_aside(d->fd, "state", &names);
                assert_true(n <= STATEFILE_ASIDE_MAX);
                for (int k = 0; k < n; k++)
                        free(names[k]);
                free(names);
        }
        n = statefile_list_aside(d->fd, "state", &names);
        assert_int_equal(n, STATEFILE_ASIDE_MAX);
        /* the 2020 copy (alone of its kind) went first, then the second to fourth resets' copies:
         * the first (the file before any reset) stays, the newest is last */
        assert_string_equal(names[0], first);
        assert_content(d->fd, names[0], "v0");
        assert_string_equal(names[n - 1], b);
        for (int i = 1; i < n; i++) {
                char v[16];
                snprintf(v, sizeof v, "v%d", i + 3);
                assert_content(d->fd, names[i], v);
                assert_true(strncmp(names[i], "state.reset-", 12) == 0);
        }
        for (int i = 0; i < n; i++)
                free(names[i]);
        free(names);
        assert_content(d->fd, "state.corrupt-2020", "x"); /* not an aside name: left alone */
        assert_int_equal(faccessat(d->fd, "state.corrupt-20200101T000000Z", F_OK, 0), -1);
        assert_int_equal(statefile_list_aside(d->fd, "../x", &names), -EINVAL);
}

/* Copies are pruned in the order they were made, not by the time in their names: nine copies
 * named in the year 2099 (a clock that was far ahead, or planted) never make a new reset remove
 * the previous real copy; the file from before the first reset stays while later resets come,
 * and the bound holds after every copy. */
static void test_aside_made_order(void **state)
{
        struct tmpdir *d = *state;
        char first[NAME_MAX + 1], b[NAME_MAX + 1], name[NAME_MAX + 1], **names = NULL;
        int n;

        for (int i = 1; i <= 9; i++) {
                if (i == 1)
                        snprintf(name, sizeof name, "state.clock-20990101T000000Z");
                else
                        snprintf(name, sizeof name, "state.clock-20990101T000000Z-%d", i);
                assert_int_equal(statefile_write_atomic(d->fd, name, "fake", 4), 0);
        }
        assert_int_equal(statefile_write_atomic(d->fd, "state", "real0", 5), 0);
        assert_int_equal(
            statefile_set_aside(d->fd, "state", "reset", STATEFILE_ASIDE_KEEP, first, sizeof first),
            0);
        for (int i = 1; i <= 13; i++) {
                char v[16];

                snprintf(v, sizeof v, "real%d", i);
                assert_int_equal(statefile_write_atomic(d->fd, "state", v, strlen(v)), 0);
                assert_int_equal(
                    statefile_set_aside(d->fd, "state", "reset", STATEFILE_ASIDE_KEEP, b, sizeof b),
                    0);
                assert_content(d->fd, b, v);
                /* the previous real copy and the first one are still there */
                if (faccessat(d->fd, first, F_OK, 0) != 0)
                        fail_msg("reset %d removed the copy from before the first reset, %s", i,
                                 first);
                assert_content(d->fd, first, "real0");
                n = statefile_list_aside(d->fd, "state", &names);
                if (n > STATEFILE_ASIDE_MAX)
                        fail_msg("%d copies after reset %d", n, i);
                assert_string_equal(names[n - 1], b);
                if (i > 1) {
                        snprintf(v, sizeof v, "real%d", i - 1);
                        assert_content(d->fd, names[n - 2], v);
                }
                for (int k = 0; k < n; k++)
                        free(names[k]);
                free(names);
        }
        /* the fakes are gone: the first real copy and the 9 newest are left */
        n = statefile_list_aside(d->fd, "state", &names);
        assert_int_equal(n, STATEFILE_ASIDE_MAX);
        assert_string_equal(names[0], first);
        for (int i = 1; i < n; i++) {
                char v[16];
                snprintf(v, sizeof v, "real%d", i + 4);
                assert_content(d->fd, names[i], v);
        }
        for (int i = 0; i < n; i++) {
                assert_int_equal(unlinkat(d->fd, names[i], 0), 0);
                free(names[i]);
        }
        free(names);

        /* the order is the number, not the time: a copy numbered 1 under a clock in 2099 is older
         * than one numbered 2 in 2020, and the next one is numbered 3 */
        assert_int_equal(statefile_write_atomic(d->fd, "state.clock-20990101T000000Z.1", "a", 1),
                         0);
        assert_int_equal(statefile_write_atomic(d->fd, "state.reset-20200101T000000Z.2", "b", 1),
                         0);
        assert_int_equal(statefile_set_aside(d->fd, "state", "reset", 0, b, sizeof b), 0);
        assert_int_equal(aside_seq(b), 3);
        n = statefile_list_aside(d->fd, "state", &names);
        assert_int_equal(n, 3);
        assert_string_equal(names[0], "state.clock-20990101T000000Z.1");
        assert_string_equal(names[1], "state.reset-20200101T000000Z.2");
        assert_string_equal(names[2], b);
        for (int i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

/* The lock: one open file description at a time, its holder found in /proc/locks, released
 * when its descriptor is closed. */
static void test_lock(void **state)
{
        struct tmpdir *d = *state;
        int a = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int b = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        assert_true(a >= 0 && b >= 0);
        assert_int_equal(statefile_lock_holder(b), 0);
        assert_int_equal(statefile_lock(a), 0);
        assert_int_equal(statefile_lock(a), 0); /* the same description: already its own */
        assert_int_equal(statefile_lock(b), -EBUSY);
        if (access("/proc/locks", R_OK) == 0)
                assert_int_equal(statefile_lock_holder(b), getpid());
        close(a);
        assert_int_equal(statefile_lock(b), 0);
        /* released through one descriptor while a duplicate stays open (a thread's) */
        a = fcntl(b, F_DUPFD_CLOEXEC, 3);
        assert_true(a >= 0);
        assert_int_equal(statefile_unlock(b), 0);
        close(b);
        b = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(statefile_lock(b), 0);
        assert_int_equal(statefile_lock(a), -EBUSY);
        close(a);
        close(b);
        assert_int_equal(statefile_lock(-1), -EBADF);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_write_and_replace, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_mode_regardless_of_umask, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_restrict_mode, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_set_aside, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_aside_bounded, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_aside_made_order, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_lock, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_write_through_other_fds, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_bad_arguments, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_rename_failure_keeps_old, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_read_limits, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_remove_stale, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_failed_write_keeps_old, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_fsync_reaches_the_disk, setup_dir, teardown_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
