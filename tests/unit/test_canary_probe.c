/* Unit tests of collectors/canary/canary_probe.c: every mode on a temp dir (plausible latencies,
 * bounded file, nothing left in the directory, the named fallback, poisoning), ioprio; as root on a
 * loop-mounted ext4: flushes per probe, read-only remount, shutdown (EIO), full filesystem,
 * recovery, and the median latency per mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "canary_probe.h"
#include "canary_target.h"
#include "fsroot.h"
#include "util.h"

static const enum canary_mode all_modes[] = {CANARY_MODE_FDATASYNC, CANARY_MODE_APPEND,
                                             CANARY_MODE_DSYNC, CANARY_MODE_DIRECT};

static char dir[256];
static int dirfd_ = -1;

static int count_entries(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static int make_tmpdir(void **state)
{
        const char *base = getenv("TMPDIR");

        (void)state;
        /* /var/tmp: a disk-backed filesystem here (ext4 on vda), unlike a tmpfs /tmp. */
        snprintf(dir, sizeof dir, "%s/test_canary_probe.XXXXXX", base ? base : "/var/tmp");
        if (!mkdtemp(dir))
                return -1;
        dirfd_ = root_open(dir);
        return dirfd_ < 0 ? -1 : 0;
}

static int remove_tmpdir(void **state)
{
        (void)state;
        close(dirfd_);
        return rmdir(dir) == 0 ? 0 : -1;
}

static void test_mode_names(void **state)
{
        enum canary_mode m;

        (void)state;
        for (unsigned i = 0; i < _CANARY_MODE_MAX; i++) {
                assert_int_equal(canary_mode_from_string(canary_mode_to_string(i), &m), 0);
                assert_int_equal(m, i);
        }
        assert_string_equal(canary_mode_to_string(CANARY_MODE_FDATASYNC), "fdatasync");
        assert_null(canary_mode_to_string(_CANARY_MODE_MAX));
        assert_int_equal(canary_mode_from_string("fsync", &m), -EINVAL);
        assert_int_equal(canary_mode_from_string(NULL, &m), -EINVAL);
}

static void test_bad_args(void **state)
{
        struct canary_file f = {.fd = -7};
        char sub[300];
        int fd, r;

        (void)state;
        assert_int_equal(canary_file_open(dirfd_, _CANARY_MODE_MAX, 4096, &f), -EINVAL);
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_FDATASYNC, 0, &f), -EINVAL);
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_FDATASYNC, CANARY_SIZE_MAX + 1, &f),
                         -EINVAL);
        assert_int_equal(canary_file_open_flags(dirfd_, CANARY_MODE_FDATASYNC, 4096, 0x80, &f),
                         -EINVAL);
        /* A directory removed under us: ENOENT from both ways of creating the file. */
        snprintf(sub, sizeof sub, "%s/gone", dir);
        assert_int_equal(mkdir(sub, 0700), 0);
        fd = root_open(sub);
        assert_true(fd >= 0);
        assert_int_equal(rmdir(sub), 0);
        /* O_TMPFILE in a deleted directory: ext4 says EPERM (6.18 here), tmpfs succeeds. */
        r = canary_file_open(fd, CANARY_MODE_FDATASYNC, 4096, &f);
        printf("O_TMPFILE in a removed directory: %d (%s)\n", r, r ? strerror(-r) : "ok");
        if (r == 0)
                canary_file_close(&f);
        else
                assert_true(r == -ENOENT || r == -EPERM);
        f.fd = -7;
        assert_int_equal(
            canary_file_open_flags(fd, CANARY_MODE_APPEND, 4096, CANARY_OPEN_NO_TMPFILE, &f),
            -ENOENT);
        close(fd);
        assert_int_equal(f.fd, -7); /* untouched */
        assert_int_equal(canary_file_close(NULL), 0);
}

/* probes probes in mode on dirfd; checks latencies and the file size bound; returns the median. */
static usec_t run_mode(int dfd, enum canary_mode mode, size_t size, unsigned flags, int probes,
                       bool print)
{
        struct canary_file f;
        usec_t lat[256];
        struct stat st;

        assert_true(probes <= (int)ARRAY_SIZE(lat));
        assert_int_equal(canary_file_open_flags(dfd, mode, size, flags, &f), 0);
        assert_int_equal(f.named, !!(flags & CANARY_OPEN_NO_TMPFILE));
        assert_int_equal(fcntl(f.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        for (int i = 0; i < probes; i++) {
                /* the latency is the call's own time: within the time around it, whatever the
                 * load (a fixed bound failed beside other tests' I/O) */
                usec_t t0 = now_monotonic(), t1;
                assert_int_equal(canary_probe_once(&f, &lat[i]), 0);
                t1 = now_monotonic();
                assert_true(lat[i] > 0);
                assert_true(lat[i] <= (t1 - t0 > 0 ? t1 - t0 : 1)); /* 1: the floor */
                assert_int_equal(fstat(f.fd, &st), 0);
                if (mode == CANARY_MODE_APPEND)
                        assert_true((size_t)st.st_size <= f.wrap_bytes);
                else
                        assert_int_equal((size_t)st.st_size, f.file_bytes);
                assert_int_equal(st.st_nlink, 0);
        }
        for (int i = 1; i < probes; i++) /* insertion sort */
                for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
                        usec_t t = lat[j];
                        lat[j] = lat[j - 1];
                        lat[j - 1] = t;
                }
        if (print)
                printf("  %-9s size %zu: median %llu us, min %llu, max %llu over %d probes\n",
                       canary_mode_to_string(mode), f.size, (unsigned long long)lat[probes / 2],
                       (unsigned long long)lat[0], (unsigned long long)lat[probes - 1], probes);
        assert_int_equal(canary_file_close(&f), 0);
        assert_int_equal(f.fd, -1);
        assert_int_equal(canary_file_close(&f), 0); /* twice is fine */
        return lat[probes / 2];
}

static void test_every_mode(void **state)
{
        (void)state;
        printf("on %s:\n", dir);
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                run_mode(dirfd_, all_modes[i], 4096, 0, 20, true);
                run_mode(dirfd_, all_modes[i], 4096, CANARY_OPEN_NO_TMPFILE, 5, false);
        }
        /* Odd size: direct rounds up to 4096, the others keep it. */
        run_mode(dirfd_, CANARY_MODE_DIRECT, 1000, 0, 3, false);
        run_mode(dirfd_, CANARY_MODE_FDATASYNC, 1000, 0, 3, false);
        /* Append wraps: 64 KiB records, wrap at 1 MiB, 40 probes wrap twice. */
        run_mode(dirfd_, CANARY_MODE_APPEND, 65536, 0, 40, false);
        assert_int_equal(count_entries(dir), 0);
}

static void test_direct_rounding_and_wrap(void **state)
{
        struct canary_file f;
        usec_t l;

        (void)state;
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_DIRECT, 1000, &f), 0);
        assert_int_equal(f.size, 4096);
        assert_int_equal(f.file_bytes, CANARY_SLOTS * 4096);
        assert_true(fcntl(f.fd, F_GETFL) & O_DIRECT);
        assert_true(fcntl(f.fd, F_GETFL) & O_DSYNC);
        canary_file_close(&f);

        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_APPEND, 65536, &f), 0);
        assert_int_equal(f.wrap_bytes, CANARY_APPEND_WRAP_MIN);
        for (int i = 0; i < 15; i++)
                assert_int_equal(canary_probe_once(&f, &l), 0);
        assert_int_equal(f.offset, CANARY_APPEND_WRAP_MIN); /* exactly full */
        assert_int_equal(canary_probe_once(&f, &l), 0);
        assert_int_equal(f.offset, 65536); /* truncated, then one record */
        canary_file_close(&f);
}

static void test_no_directory_entry(void **state)
{
        struct canary_file a, b;
        int before;

        (void)state;
        before = count_entries(dir);
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_FDATASYNC, 4096, &a), 0);
        assert_false(a.named); /* ext4 has O_TMPFILE */
        assert_int_equal(
            canary_file_open_flags(dirfd_, CANARY_MODE_FDATASYNC, 4096, CANARY_OPEN_NO_TMPFILE, &b),
            0);
        assert_true(b.named);
        /* Both are open, neither has a name. */
        assert_int_equal(count_entries(dir), before);
        canary_file_close(&a);
        canary_file_close(&b);
        assert_int_equal(count_entries(dir), before);
}

static void test_poisoned_refused(void **state)
{
        struct canary_file f;
        usec_t l = 12345;
        int ro;

        (void)state;
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_FDATASYNC, 4096, &f), 0);
        assert_int_equal(canary_probe_once(&f, &l), 0);
        /* A real write error: the descriptor becomes a read-only one. */
        ro = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(ro >= 0);
        assert_int_equal(dup3(ro, f.fd, O_CLOEXEC), f.fd);
        close(ro);
        l = 12345;
        assert_int_equal(canary_probe_once(&f, &l), -EBADF);
        assert_int_equal(l, 12345);
        assert_true(f.poisoned);
        /* Refused until reopened, whatever the descriptor would do now. */
        assert_int_equal(canary_probe_once(&f, &l), -EBADFD);
        assert_int_equal(canary_file_close(&f), 0);
        assert_int_equal(canary_probe_once(&f, &l), -EBADFD); /* closed */
        assert_int_equal(canary_probe_once(NULL, &l), -EBADFD);
        assert_int_equal(canary_file_open(dirfd_, CANARY_MODE_FDATASYNC, 4096, &f), 0);
        assert_int_equal(canary_probe_once(&f, &l), 0);
        canary_file_close(&f);
}

static void test_ioprio(void **state)
{
        long prio;

        (void)state;
        assert_int_equal(canary_set_ioprio(), 0);
        prio = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
        assert_int_equal(prio, (2 << 13) | 7); /* best effort, level 7 */
}

/* ---- As root: a loop-mounted ext4. ---- */

struct loopfs {
        char img[256], mnt[256], dev[64], name[32];
        char wc_before[32];
        int sysfd, mntfd;
        struct canary_backing b;
};

static struct loopfs lf = {.sysfd = -1, .mntfd = -1};
static bool have_loop;

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...)
{
        char cmd[1024];
        va_list ap;
        int r;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        r = system(cmd);
        return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static int loop_teardown(void **state)
{
        (void)state;
        if (lf.mntfd >= 0)
                close(lf.mntfd);
        if (lf.sysfd >= 0)
                close(lf.sysfd);
        lf.mntfd = lf.sysfd = -1;
        if (lf.mnt[0]) {
                if (sh("umount '%s' 2>/dev/null", lf.mnt) != 0)
                        sh("umount -l '%s' 2>/dev/null", lf.mnt);
                rmdir(lf.mnt);
        }
        if (lf.dev[0])
                sh("losetup -d %s", lf.dev);
        if (lf.img[0])
                unlink(lf.img);
        lf.mnt[0] = lf.dev[0] = lf.img[0] = 0;
        return 0;
}

/* why the loop ext4 tests skip, printed by each of them */
static char no_loop_why[160] = "not set up";

#define NO_LOOP(...)                                                                               \
        do {                                                                                       \
                snprintf(no_loop_why, sizeof no_loop_why, __VA_ARGS__);                            \
                printf("skip loop ext4 tests: %s\n", no_loop_why);                                 \
        } while (0)

/* Attaches the image to a free loop device: lf.dev and lf.name. 0 or -1. */
static int loop_attach(void)
{
        char cmd[600], out[64] = "";
        FILE *p;

        snprintf(cmd, sizeof cmd, "losetup -f --show '%s'", lf.img);
        p = popen(cmd, "r");
        if (!p || !fgets(out, sizeof out, p)) {
                if (p)
                        pclose(p);
                return -1;
        }
        pclose(p);
        out[strcspn(out, "\n")] = 0;
        if (!strrchr(out, '/'))
                return -1;
        strscpy(lf.dev, out, sizeof lf.dev);
        strscpy(lf.name, strrchr(lf.dev, '/') + 1, sizeof lf.name);
        return 0;
}

static int loop_setup(void **state)
{
        char path[512], out[64] = "";
        struct stat st;
        FILE *p;
        int fd;

        (void)state;
        have_loop = false;
        if (geteuid() != 0) {
                NO_LOOP("not root");
                return 0;
        }
        if (sh("command -v losetup mkfs.ext4 mount >/dev/null") != 0) {
                NO_LOOP("losetup/mkfs.ext4/mount missing");
                return 0;
        }
        snprintf(lf.img, sizeof lf.img, "/var/tmp/test_canary_probe.XXXXXX");
        fd = mkstemp(lf.img);
        if (fd < 0 || ftruncate(fd, 64 << 20) < 0) {
                NO_LOOP("image: %s", strerror(errno));
                lf.img[0] = 0;
                return 0;
        }
        close(fd);
        p = popen("losetup -f --show /dev/null 2>/dev/null", "r");
        pclose(p);
        if (loop_attach() < 0) {
                NO_LOOP("losetup failed (no loop devices?)");
                loop_teardown(state);
                return 0;
        }

        /* The loop device's write cache: flushes are only issued (and counted) in write back. */
        snprintf(path, sizeof path, "/sys/block/%s/queue/write_cache", lf.name);
        read_attr_at(AT_FDCWD, path, lf.wc_before, sizeof lf.wc_before);
        if (strcmp(lf.wc_before, "write back") != 0)
                sh("echo 'write back' > %s", path);
        read_attr_at(AT_FDCWD, path, out, sizeof out);
        printf("%s: write_cache was \"%s\", now \"%s\"\n", lf.dev, lf.wc_before, out);

        snprintf(lf.mnt, sizeof lf.mnt, "/tmp/test_canary_probe_mnt.XXXXXX");
        if (!mkdtemp(lf.mnt) || sh("mkfs.ext4 -q -F '%s' >/dev/null 2>&1", lf.dev) != 0 ||
            sh("mount -t ext4 %s '%s'", lf.dev, lf.mnt) != 0) {
                NO_LOOP("mkfs/mount failed");
                if (!lf.mnt[0] || access(lf.mnt, F_OK) < 0)
                        lf.mnt[0] = 0;
                loop_teardown(state);
                return 0;
        }
        lf.mntfd = root_open(lf.mnt);
        lf.sysfd = root_open("/sys");
        if (lf.mntfd < 0 || lf.sysfd < 0 || fstat(lf.mntfd, &st) < 0 ||
            canary_resolve(lf.sysfd, st.st_dev, &lf.b) < 0) {
                NO_LOOP("cannot resolve the mount");
                loop_teardown(state);
                return 0;
        }
        have_loop = true;
        return 0;
}

#define NEED_LOOP()                                                                                \
        do {                                                                                       \
                if (!have_loop) {                                                                  \
                        printf("skipped: %s\n", no_loop_why);                                      \
                        skip();                                                                    \
                }                                                                                  \
        } while (0)

static uint64_t flushes(void)
{
        uint64_t v = 0;

        assert_int_equal(canary_flushes(lf.sysfd, &lf.b, &v), 0);
        return v;
}

static void test_loop_every_mode(void **state)
{
        (void)state;
        NEED_LOOP();
        assert_string_equal(lf.b.device, lf.name);
        assert_int_equal(lf.b.n_disks, 1);
        printf("loop ext4 on %s (image on /var/tmp), 4 KiB, 50 probes:\n", lf.dev);
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                struct canary_file f;
                uint64_t before, after;
                usec_t l;
                const int n = 50;

                /* Flushes per probe (the same loop, measured around the probes only). */
                assert_int_equal(canary_file_open(lf.mntfd, all_modes[i], 4096, &f), 0);
                assert_false(f.named);
                before = flushes();
                for (int k = 0; k < n; k++)
                        assert_int_equal(canary_probe_once(&f, &l), 0);
                after = flushes();
                canary_file_close(&f);
                printf("  %-9s flushes on %s: %llu for %d probes\n",
                       canary_mode_to_string(all_modes[i]), lf.name,
                       (unsigned long long)(after - before), n);
                if (all_modes[i] == CANARY_MODE_FDATASYNC || all_modes[i] == CANARY_MODE_APPEND)
                        assert_true(after - before >= (uint64_t)n);
                run_mode(lf.mntfd, all_modes[i], 4096, 0, n, true);
        }
        assert_int_equal(count_entries(lf.mnt), 1); /* lost+found */
}

static void test_loop_readonly(void **state)
{
        struct canary_file f, g;
        usec_t l;
        int r;

        (void)state;
        NEED_LOOP();
        assert_int_equal(canary_file_open(lf.mntfd, CANARY_MODE_FDATASYNC, 4096, &f), 0);
        /* An open unlinked file (O_TMPFILE or not) is an orphan inode: the kernel refuses
         * to remount read-only while it exists (fs/super.c: sb_prepare_remount_readonly()). */
        r = sh("mount -o remount,ro '%s' 2>&1", lf.mnt);
        printf("remount,ro with a canary file open: %s\n", r == 0 ? "succeeded" : "refused");
        if (r == 0) {
                r = canary_probe_once(&f, &l);
                printf("probe on the file opened before: %d (%s)\n", r, strerror(-r));
                assert_true(r < 0);
                assert_int_equal(sh("mount -o remount,rw '%s'", lf.mnt), 0);
        } else
                assert_int_equal(canary_probe_once(&f, &l), 0);
        canary_file_close(&f);

        assert_int_equal(sh("mount -o remount,ro '%s'", lf.mnt), 0);
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                assert_int_equal(canary_file_open(lf.mntfd, all_modes[i], 4096, &g), -EROFS);
                assert_int_equal(canary_file_open_flags(lf.mntfd, all_modes[i], 4096,
                                                        CANARY_OPEN_NO_TMPFILE, &g),
                                 -EROFS);
        }
        assert_int_equal(sh("mount -o remount,rw '%s'", lf.mnt), 0);
        assert_int_equal(canary_file_open(lf.mntfd, CANARY_MODE_FDATASYNC, 4096, &g), 0);
        assert_int_equal(canary_probe_once(&g, &l), 0);
        canary_file_close(&g);
}

/* ext4's shutdown ioctl (EXT4_IOC_SHUTDOWN, the xfs_io "shutdown" command), without flushing the
 * log: from then on every write and sync fails, like a disk that went away. */
#define EXT4_IOC_SHUTDOWN_          _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

static void test_loop_shutdown(void **state)
{
        struct canary_file f[ARRAY_SIZE(all_modes)], g;
        uint32_t how = EXT4_GOING_FLAGS_NOLOGFLUSH;
        char old_dev[sizeof lf.dev];
        struct stat st;
        int dfd, r;
        usec_t l;

        (void)state;
        NEED_LOOP();
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                assert_int_equal(canary_file_open(lf.mntfd, all_modes[i], 4096, &f[i]), 0);
                assert_int_equal(canary_probe_once(&f[i], &l), 0);
        }
        dfd = open(lf.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(ioctl(dfd, EXT4_IOC_SHUTDOWN_, &how), 0);
        close(dfd);
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                r = canary_probe_once(&f[i], &l);
                printf("after shutdown: %s probe %d (%s), then %d\n",
                       canary_mode_to_string(all_modes[i]), r, strerror(-r),
                       canary_probe_once(&f[i], &l));
                assert_true(r < 0);
                assert_int_equal(canary_probe_once(&f[i], &l), -EBADFD);
                canary_file_close(&f[i]);
        }
        r = canary_file_open(lf.mntfd, CANARY_MODE_FDATASYNC, 4096, &g);
        printf("after shutdown: open %d (%s)\n", r, strerror(-r));
        assert_int_equal(r, -EIO);

        /* Recovery: a fresh mount, on a new loop device over the same image. The same device
         * mounted again may get the shut-down superblock back: another test's private mount
         * namespace (test_canary_state, test_statefile), made while this filesystem was
         * mounted, holds a copy of the mount, and with it the superblock, until that test ends
         * (seen as EIO here when the two ran side by side). */
        close(lf.mntfd);
        assert_int_equal(sh("umount '%s'", lf.mnt), 0);
        snprintf(old_dev, sizeof old_dev, "%s", lf.dev);
        assert_int_equal(loop_attach(), 0);
        (void)sh("losetup -d %s 2>/dev/null", old_dev); /* busy while the copy lives: then later */
        assert_int_equal(sh("mount -t ext4 %s '%s'", lf.dev, lf.mnt), 0);
        lf.mntfd = root_open(lf.mnt);
        assert_true(lf.mntfd >= 0);
        assert_int_equal(fstat(lf.mntfd, &st), 0);
        assert_int_equal(canary_resolve(lf.sysfd, st.st_dev, &lf.b), 0); /* the new device */
        assert_int_equal(canary_file_open(lf.mntfd, CANARY_MODE_FDATASYNC, 4096, &g), 0);
        assert_int_equal(canary_probe_once(&g, &l), 0);
        canary_file_close(&g);
}

static void test_loop_full(void **state)
{
        static char chunk[1 << 20];
        struct canary_file f_over, f_app, g;
        int fd, r;
        usec_t l;

        (void)state;
        NEED_LOOP();
        /* Files opened before the filesystem fills. */
        assert_int_equal(canary_file_open(lf.mntfd, CANARY_MODE_FDATASYNC, 4096, &f_over), 0);
        assert_int_equal(canary_file_open(lf.mntfd, CANARY_MODE_APPEND, 4096, &f_app), 0);

        memset(chunk, 0xa5, sizeof chunk);
        fd = openat(lf.mntfd, "fill", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        for (size_t n = sizeof chunk; n >= 512;) {
                if (write(fd, chunk, n) < 0) {
                        assert_int_equal(errno, ENOSPC);
                        n /= 2;
                }
        }
        fsync(fd);
        close(fd);

        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                r = canary_file_open(lf.mntfd, all_modes[i], 4096, &g);
                printf("full: open %s: %d (%s)\n", canary_mode_to_string(all_modes[i]), r,
                       strerror(-r));
                assert_int_equal(r, -ENOSPC);
        }
        /* Overwriting allocated blocks needs no space: the fdatasync probe carries on. */
        r = canary_probe_once(&f_over, &l);
        printf("full: fdatasync probe on a file opened before: %d\n", r);
        assert_int_equal(r, 0);
        /* Appending needs blocks: fails at the latest when the first record past the
         * preallocated block would need a new one. */
        r = 0;
        for (int k = 0; k < 4 && r == 0; k++)
                r = canary_probe_once(&f_app, &l);
        printf("full: append probe on a file opened before: %d (%s)\n", r, strerror(-r));
        assert_int_equal(r, -ENOSPC);
        assert_int_equal(canary_probe_once(&f_app, &l), -EBADFD);
        canary_file_close(&f_app);
        canary_file_close(&f_over);

        /* Recovery. */
        assert_int_equal(unlinkat(lf.mntfd, "fill", 0), 0);
        sync();
        for (size_t i = 0; i < ARRAY_SIZE(all_modes); i++) {
                assert_int_equal(canary_file_open(lf.mntfd, all_modes[i], 4096, &g), 0);
                assert_int_equal(canary_probe_once(&g, &l), 0);
                canary_file_close(&g);
        }
}

int main(void)
{
        const struct CMUnitTest tmp_tests[] = {
            cmocka_unit_test(test_mode_names),
            cmocka_unit_test(test_bad_args),
            cmocka_unit_test(test_every_mode),
            cmocka_unit_test(test_direct_rounding_and_wrap),
            cmocka_unit_test(test_no_directory_entry),
            cmocka_unit_test(test_poisoned_refused),
            cmocka_unit_test(test_ioprio),
        };
        const struct CMUnitTest loop_tests[] = {
            cmocka_unit_test(test_loop_every_mode),
            cmocka_unit_test(test_loop_readonly),
            cmocka_unit_test(test_loop_full),
            cmocka_unit_test(test_loop_shutdown),
        };
        int r;

        r = cmocka_run_group_tests(tmp_tests, make_tmpdir, remove_tmpdir);
        r += cmocka_run_group_tests(loop_tests, loop_setup, loop_teardown);
        return r;
}
