/* The canary's baseline state file under bad input and a bad filesystem: a file with bad lines
 * keeps its good records (and a copy aside), a corrupt or unsupported one is set aside and
 * learning restarts, an unreadable one or one that cannot be set aside is never overwritten, a
 * full filesystem keeps the old file and counts diskpulse_state_write_errors_total, and every
 * file written is 0600. Fake probes and a fake clock, a real state directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "canary.h"
#include "fake_clock.h"
#include "canary_records.h"
#include "canary_reset.h"
#include "canary_stats.h"
#include "expo.h"
#include "metrics.h"
#include "promtool.h"
#include "render.h"
#include "statefile.h"

/* ---- fakes: 1 ms probes, a clock advanced by each sleep, the disk "sda" with id fk.id ---- */

static struct {
        struct fake_clock clk; /* the canary_ops' ud */
        const char *id;
        usec_t real; /* the wall clock the canary sees; 0: the real one */
} fk;

static usec_t f_realtime(void *ud)
{
        (void)ud;
        return fk.real ? fk.real : now_realtime();
}

static void fake_reset(const char *id, unsigned limit)
{
        fake_clock_init(&fk.clk, limit);
        fk.id = id;
}

static int f_open(void *ud, const char *dir, enum canary_mode mode, size_t size,
                  struct canary_file *ret)
{
        (void)ud, (void)dir, (void)size;
        *ret = (struct canary_file){.fd = 100, .mode = mode};
        return 0;
}

static int f_probe(void *ud, struct canary_file *f, usec_t *ret)
{
        (void)ud, (void)f;
        *ret = 1000;
        return 0;
}

static void f_close(void *ud, struct canary_file *f)
{
        (void)ud;
        f->fd = -1;
}

static int f_flushes(void *ud, int sysfs_fd, const struct canary_backing *b, uint64_t *ret)
{
        (void)ud, (void)sysfs_fd, (void)b;
        *ret = 0;
        return 0;
}

static int f_resolve(void *ud, int sysfs_fd, const char *dir, struct canary_backing *ret)
{
        (void)ud, (void)sysfs_fd, (void)dir;
        memset(ret, 0, sizeof(*ret));
        strcpy(ret->device, "sda");
        ret->n_disks = 1;
        strcpy(ret->disks[0].name, "sda");
        return 0;
}

static int f_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        (void)ud, (void)dir, (void)f;
        return 0;
}

static int f_disk_id(void *ud, const char *device, char *buf, size_t size)
{
        (void)ud, (void)device;
        if (!fk.id)
                return -ENOENT;
        snprintf(buf, size, "%s", fk.id);
        return 0;
}

static const struct canary_ops fake_ops = {
    .open = f_open,
    .probe = f_probe,
    .close = f_close,
    .now = fake_clock_now,
    .realtime = f_realtime,
    .sleep = fake_clock_sleep,
    .flushes = f_flushes,
    .resolve = f_resolve,
    .check_dir = f_check_dir,
    .ud = &fk.clk,
};

static const struct canary_target_config data_target[] = {{"/data", CANARY_MODE_FDATASYNC}};

static struct canary *start(int state_fd, const char *id, unsigned probes)
{
        struct canary_config cfg = {.targets = data_target,
                                    .n_targets = 1,
                                    .interval = 600 * USEC_PER_SEC,
                                    .size = 4096,
                                    .timeout = 30 * USEC_PER_SEC,
                                    .state_dir_fd = state_fd,
                                    .sysfs_fd = 0,
                                    .ops = &fake_ops,
                                    .disk_id = f_disk_id};
        struct canary *c;
        struct timespec ts;
        bool ok;

        fake_reset(id, probes);
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 20;
        pthread_mutex_lock(&fk.clk.lock);
        while (fk.clk.sleeps < probes)
                if (pthread_cond_timedwait(&fk.clk.cond, &fk.clk.lock, &ts) == ETIMEDOUT)
                        break;
        ok = fk.clk.sleeps >= probes;
        pthread_mutex_unlock(&fk.clk.lock);
        assert_true(ok);
        return c;
}

/* Stops the prober (its final save included) but keeps c for a last look at its metrics. */
static void stop(struct canary *c)
{
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.stopping = true;
        pthread_cond_broadcast(&fk.clk.cond);
        pthread_mutex_unlock(&fk.clk.lock);
        canary_stop(c);
}

static void finish(struct canary *c)
{
        stop(c);
        canary_free(c);
        for (int i = 0; i < 5000 && canary_threads_running() > 0; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        assert_int_equal(canary_threads_running(), 0);
}

static char *render(struct canary *c)
{
        struct mset *set = mset_new();

        canary_export(c, set);
        return test_render_set(set);
}

static void assert_has(const char *text, const char *s, bool want)
{
        if ((strstr(text, s) != NULL) != want) {
                fprintf(stderr, "%s: %s\nin:\n%s\n", want ? "missing" : "unexpected", s, text);
                fail();
        }
}

/* The value of diskpulse_state_write_errors_total, or -1 when absent. */
static long write_errors(struct canary *c)
{
        static const char key[] =
            "\ndiskpulse_state_write_errors_total{file=\"canary-baselines\"} ";
        char *t = render(c), *p = strstr(t, key);
        long v = p ? strtol(p + strlen(key), NULL, 10) : -1;

        free(t);
        return v;
}

#define L              "path=\"/data\",device=\"sda\",mode=\"fdatasync\""
#define BASELINE_4MS   "\ndiskpulse_sync_baseline_seconds{" L ",regime=\"idle\"} 0.004\n"
#define WRITE_ERRORS_0 "\ndiskpulse_state_write_errors_total{file=\"canary-baselines\"} 0\n"

/* ---- the state directory ---- */

struct sdir {
        char path[256];
        int fd;
};

static void sdir_new(struct sdir *d, const char *base)
{
        snprintf(d->path, sizeof d->path, "%s/test_canary_state.XXXXXX", base);
        assert_non_null(mkdtemp(d->path));
        d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(d->fd >= 0);
}

static void sdir_free(struct sdir *d)
{
        close(d->fd);
        assert_int_equal(test_remove_tree(d->path), 0);
}

static void put_file(int dfd, const char *name, const char *text, mode_t mode)
{
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static char *get_file(int dfd, const char *name)
{
        char *buf = NULL;
        size_t len;
        int r = statefile_read(dfd, name, 1 << 20, &buf, &len);

        if (r < 0)
                fail_msg("cannot read %s: %s", name, strerror(-r));
        return buf;
}

/* The aside copies of the state file in fd: how many, and the name of the one tagged tag. */
static int asides(int fd, const char *tag, char *ret, size_t size)
{
        char **names = NULL, prefix[64];
        int n = statefile_list_aside(fd, CANARY_STATE_FILE, &names);

        assert_true(n >= 0);
        snprintf(prefix, sizeof prefix, "%s.%s-", CANARY_STATE_FILE, tag);
        if (ret)
                ret[0] = 0;
        for (int i = 0; i < n; i++) {
                if (ret && strncmp(names[i], prefix, strlen(prefix)) == 0)
                        snprintf(ret, size, "%s", names[i]);
                free(names[i]);
        }
        free(names);
        return n;
}

/* The one name in the directory that starts with prefix (fails unless exactly one), or NULL
 * for none when none is allowed. */
static char *aside_file(int dfd, const char *prefix, bool must)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = fdopendir(fd);
        char *found = NULL;
        struct dirent *e;

        assert_non_null(dir);
        while ((e = readdir(dir)))
                if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
                        assert_null(found);
                        found = strdup(e->d_name);
                }
        closedir(dir);
        if (must && !found)
                fail_msg("no file %s* in the state directory", prefix);
        return found;
}

static void assert_mode(int dfd, const char *name, mode_t want)
{
        struct stat st;

        assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        if ((st.st_mode & 07777) != want)
                fail_msg("%s: mode %03o, want %03o", name, st.st_mode & 07777, want);
}

/* A state file with records for /data on disk A (baseline 4 ms) and for /other on disk B,
 * written by the formatter the daemon uses, with extra text after the records. */
static char *state_text(const char *extra)
{
        struct canary_records recs = {0};
        struct canary_record a, b;
        char *buf, *out;
        size_t len;

        assert_int_equal(canary_record_init(&a, "wwn:0x5000aaaa", "fdatasync", "/data"), 0);
        a.st.value = 0.004;
        a.st.updates = 40;
        a.st.updated = 1700000000ull * USEC_PER_SEC;
        assert_int_equal(canary_record_init(&b, "serial:other-disk", "append", "/other"), 0);
        b.st.value = 0.0125;
        b.st.updates = 99;
        b.st.updated = 1700000000ull * USEC_PER_SEC;
        assert_int_equal(canary_records_put(&recs, &a), 0);
        assert_int_equal(canary_records_put(&recs, &b), 0);
        assert_int_equal(canary_records_format(&recs, &buf, &len), 0);
        canary_records_free(&recs);
        assert_int_equal(asprintf(&out, "%s%s", buf, extra), (int)(len + strlen(extra)));
        free(buf);
        return out;
}

/* The record line of disk B in text (from "disk=serial:other-disk" to the newline). */
static char *line_b(const char *text)
{
        const char *p = strstr(text, "disk=serial:other-disk ");
        const char *nl = p ? strchr(p, '\n') : NULL;

        assert_non_null(nl);
        return strndup(p, (size_t)(nl - p));
}

/* ---- tests ---- */

/* A good file: used as it is, and tightened to 0600 when an older version left it 0644. */
static void test_good_file_used_and_tightened(void **state)
{
        struct sdir d;
        struct canary *c;
        char *text = state_text(""), *t, *back, *b = line_b(text);

        (void)state;
        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, text, 0644);
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        assert_mode(d.fd, CANARY_STATE_FILE, 0600);
        t = render(c);
        assert_has(t, BASELINE_4MS, true);
        assert_has(t, WRITE_ERRORS_0, true);
        free(t);
        assert_null(aside_file(d.fd, CANARY_STATE_FILE ".", false));
        finish(c);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, b, true);
        assert_mode(d.fd, CANARY_STATE_FILE, 0600);
        free(back);
        free(b);
        free(text);
        sdir_free(&d);
}

/* A version 2 file (before the reference): its baseline becomes the reference, the file is
 * written back as version 3 and the old one kept aside for a downgrade. */
static void test_version2_migrated(void **state)
{
        static const char v2[] =
            "diskpulse-canary-baselines 2\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 updates=40 "
            "updated=1700000000000000 warmup=-\n";
        struct sdir d;
        struct canary *c;
        char *t, *name, *kept, *back;

        (void)state;
        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, v2, 0600);
        c = start(d.fd, "wwn:0x5000aaaa", 20); /* 200 minutes of 1 ms probes: 2 hours */
        t = render(c);
        assert_has(t, BASELINE_4MS, false); /* learning 1 ms */
        assert_has(t, "\ndiskpulse_sync_reference_seconds{" L ",regime=\"idle\"} 0.004\n", true);
        free(t);
        name = aside_file(d.fd, CANARY_STATE_FILE ".oldversion-", true);
        kept = get_file(d.fd, name);
        assert_string_equal(kept, v2);
        /* written as version 3 at once: a start before the first save makes no second copy */
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, "diskpulse-canary-baselines 3\n", true);
        free(back);
        finish(c);
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        finish(c);
        assert_int_equal(asides(d.fd, "oldversion", NULL, 0), 1);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, "diskpulse-canary-baselines 3\n", true);
        assert_has(back, " reference=0.004 refdays=final ", true);
        free(back);
        free(kept);
        free(name);
        sdir_free(&d);
}

/* One bad line: the other records stay in use and in the file, the whole file is kept aside. */
static void test_bad_line_keeps_good_records(void **state)
{
        struct sdir d;
        struct canary *c;
        char *text = state_text("disk=wwn:0x5000cccc mode=fdatasync path=/c baseline=banana\n");
        char *b = line_b(text), *t, *name, *kept, *back;

        (void)state;
        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        t = render(c);
        assert_has(t, BASELINE_4MS, true); /* disk A's record survived disk C's bad line */
        free(t);
        name = aside_file(d.fd, CANARY_STATE_FILE ".corrupt-", true);
        kept = get_file(d.fd, name);
        assert_string_equal(kept, text);
        finish(c);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, b, true);                      /* disk B untouched */
        assert_has(back, "disk=wwn:0x5000aaaa ", true); /* disk A saved */
        assert_has(back, "banana", false);              /* the bad line only aside */
        free(kept);
        kept = get_file(d.fd, name); /* the aside copy outlives the rewrite */
        assert_string_equal(kept, text);
        assert_mode(d.fd, name, 0600);
        free(kept);
        free(back);
        free(name);
        free(b);
        free(text);
        sdir_free(&d);
}

/* Bad as a whole: set aside by rename, learning starts afresh, the daemon carries on. */
static void test_corrupt_file_set_aside(void **state)
{
        static const struct {
                const char *text, *tag;
        } cases[] = {
            {"not a state file\n\001\002\003 garbage\n", "corrupt"},
            {"diskpulse-canary-baselines 4\ndisk=wwn:0x5000aaaa mode=fdatasync path=/data "
             "baseline=0.004 updates=40\n",
             "unsupported"},
            {"\n\n", NULL}, /* blank: no header, no records: an empty file */
        };

        (void)state;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
                struct sdir d;
                struct canary *c;
                char prefix[64], *t, *name, *kept, *back;

                sdir_new(&d, "/tmp");
                put_file(d.fd, CANARY_STATE_FILE, cases[k].text, 0644);
                c = start(d.fd, "wwn:0x5000aaaa", 1);
                t = render(c);
                assert_has(t, "diskpulse_sync_baseline_seconds{", false);
                assert_has(t, WRITE_ERRORS_0, true);
                free(t);
                if (cases[k].tag) {
                        snprintf(prefix, sizeof prefix, "%s.%s-", CANARY_STATE_FILE, cases[k].tag);
                        name = aside_file(d.fd, prefix, true);
                        kept = get_file(d.fd, name);
                        assert_string_equal(kept, cases[k].text);
                        free(kept);
                        /* renamed, not copied: gone, or already a new file (the prober records
                         * the disk, new to it, after its first probe) */
                        if (faccessat(d.fd, CANARY_STATE_FILE, F_OK, 0) == 0) {
                                kept = get_file(d.fd, CANARY_STATE_FILE);
                                assert_has(kept, cases[k].text, false);
                                free(kept);
                        }
                        free(name);
                } else {
                        assert_null(aside_file(d.fd, CANARY_STATE_FILE ".", false));
                }
                finish(c);
                back = get_file(d.fd, CANARY_STATE_FILE);
                assert_has(back, "diskpulse-canary-baselines 3\n", true);
                assert_has(back, "disk=wwn:0x5000aaaa mode=fdatasync path=/data ", true);
                assert_has(back, "baseline=0.004", false);
                assert_mode(d.fd, CANARY_STATE_FILE, 0600);
                free(back);
                sdir_free(&d);
        }

        /* not a file at all: a directory in its place goes aside too */
        struct sdir d;
        struct canary *c;
        char *name, *back;
        struct stat st;

        sdir_new(&d, "/tmp");
        assert_int_equal(mkdirat(d.fd, CANARY_STATE_FILE, 0755), 0);
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        name = aside_file(d.fd, CANARY_STATE_FILE ".corrupt-", true);
        assert_int_equal(fstatat(d.fd, name, &st, 0), 0);
        assert_true(S_ISDIR(st.st_mode));
        finish(c);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, "disk=wwn:0x5000aaaa ", true);
        free(back);
        free(name);
        sdir_free(&d);
}

/* A file this process cannot read (EACCES, as another user: fsuid 65534 in this thread) is not
 * corrupt: it is neither set aside nor ever replaced, and each save that it prevents counts. */
static void test_unreadable_file_never_replaced(void **state)
{
        struct sdir d;
        struct canary *c;
        char *text, *t, *back;

        (void)state;
        if (geteuid() != 0) {
                print_message("skipped: needs root to read a file as another user\n");
                skip();
        }
        text = state_text("");
        sdir_new(&d, "/tmp");
        assert_int_equal(fchmod(d.fd, 0777), 0);
        put_file(d.fd, CANARY_STATE_FILE, text, 0600); /* root's */
        setfsuid(65534);
        if (setfsuid((uid_t)-1) != 65534)
                fail_msg("setfsuid failed");
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        setfsuid(0);
        t = render(c);
        assert_has(t, "diskpulse_sync_baseline_seconds{", false);
        free(t);
        stop(c);
        assert_int_equal(write_errors(c), 1);
        finish(c);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_string_equal(back, text);
        assert_null(aside_file(d.fd, CANARY_STATE_FILE ".", false));
        free(back);
        free(text);
        sdir_free(&d);
}

/* A tmpfs of 64 KiB on dir in a private mount namespace. False (and the reason printed) where
 * that is impossible. */
static bool mount_tiny_tmpfs(const char *dir)
{
        static bool unshared;

        if (geteuid() != 0) {
                print_message("skipped: needs root to mount a tmpfs\n");
                return false;
        }
        if (!unshared) {
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
                        print_message("skipped: no private mount namespace: %s\n", strerror(errno));
                        return false;
                }
                unshared = true;
        }
        if (mount("diskpulse-test", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")) {
                print_message("skipped: cannot mount a tmpfs: %s\n", strerror(errno));
                return false;
        }
        return true;
}

static size_t count_entries(int dfd)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = fdopendir(fd);
        struct dirent *e;
        size_t n = 0;

        assert_non_null(dir);
        while ((e = readdir(dir)))
                n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
        closedir(dir);
        return n;
}

/* A full filesystem: saves while running and at stop fail with ENOSPC, each counted, the old
 * file intact and no temp file left; once there is room the next save works. A read-only one
 * (a corrupt file that cannot be set aside) leaves the file as it is and never writes it. */
static void test_full_and_readonly_filesystem(void **state)
{
        struct sdir d;
        struct canary *c;
        char mnt[300], *text = state_text(""), *b = line_b(text), *back;
        static char block[4096];
        int fd, filler;

        (void)state;
        sdir_new(&d, "/tmp");
        snprintf(mnt, sizeof mnt, "%s/mnt", d.path);
        assert_int_equal(mkdir(mnt, 0755), 0);
        if (!mount_tiny_tmpfs(mnt)) {
                free(b);
                free(text);
                sdir_free(&d);
                skip();
        }
        fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        put_file(fd, CANARY_STATE_FILE, text, 0600);
        filler = openat(fd, "filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(filler >= 0);
        memset(block, 'x', sizeof block);
        while (write(filler, block, sizeof block) == (ssize_t)sizeof block)
                ;
        close(filler);

        /* 20 probes 10 min apart: hourly observations move disk A's baseline, so the prober
         * saves (and fails) while running; then once more at stop */
        c = start(fd, "wwn:0x5000aaaa", 20);
        long running = write_errors(c);
        if (running < 1 || running > 4) /* one per hourly observation: 3 in 200 min */
                fail_msg("%ld write errors while running, want 1 to 4", running);
        stop(c);
        assert_int_equal(write_errors(c), running + 1);
        finish(c);
        back = get_file(fd, CANARY_STATE_FILE);
        assert_string_equal(back, text);
        free(back);
        assert_int_equal(count_entries(fd), 2); /* the file and the filler: no temp file */

        /* room again: saved, disk B kept */
        assert_int_equal(unlinkat(fd, "filler", 0), 0);
        c = start(fd, "wwn:0x5000aaaa", 20);
        stop(c);
        assert_int_equal(write_errors(c), 0);
        finish(c);
        back = get_file(fd, CANARY_STATE_FILE);
        assert_has(back, "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.00",
                   true);
        assert_has(back,
                   "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 ",
                   false);
        assert_has(back, b, true);
        assert_mode(fd, CANARY_STATE_FILE, 0600);
        free(back);

        /* read-only, with a corrupt file: it cannot go aside, so it stays and is never written */
        put_file(fd, CANARY_STATE_FILE, "garbage\n", 0600);
        assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
        c = start(fd, "wwn:0x5000aaaa", 1);
        /* the prober's save of the disk (new: the records are empty) is the one prevented; the
         * stop does not try again a file it must leave alone */
        assert_int_equal(write_errors(c), 1);
        stop(c);
        assert_int_equal(write_errors(c), 1);
        finish(c);
        assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT, NULL), 0);
        back = get_file(fd, CANARY_STATE_FILE);
        assert_string_equal(back, "garbage\n");
        assert_int_equal(count_entries(fd), 1);
        free(back);

        close(fd);
        assert_int_equal(umount2(mnt, MNT_DETACH), 0);
        free(b);
        free(text);
        sdir_free(&d);
}

/* --canary.reset-reference=PATH: every record of PATH reset, the others untouched, the previous
 * file kept beside it, refused while another process holds the directory, "PATH/" is PATH, an
 * unknown path changes nothing and lists the known ones. */
static void test_reset_reference(void **state)
{
        static const char text[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 updates=900 "
            "updated=5 warmup=- reference=0.002 refdays=final dayobs=0.004 "
            "days=1717000000:0.0039,1717086400:0.004\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=busy baseline=0.001 updates=900 "
            "updated=5 warmup=- reference=0.0005 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000bbbb mode=fdatasync path=/logs regime=idle baseline=0.003 "
            "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n";
        char err[1024], *out = NULL, *back, aside[NAME_MAX + 1];
        size_t outlen = 0;
        struct sdir d;
        FILE *f;
        int lockfd;
        (void)state;

        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);

        /* another process's lock (a running daemon's): refused, the file unchanged, no copy */
        lockfd = open(d.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(lockfd >= 0);
        assert_int_equal(statefile_lock(lockfd), 0);
        assert_int_equal(canary_reset_reference(d.fd, "/data", stdout, err, sizeof err), -EBUSY);
        assert_non_null(strstr(err, "systemctl stop diskpulse.socket diskpulse"));
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_string_equal(back, text);
        free(back);
        assert_int_equal(asides(d.fd, "reset", NULL, 0), 0);
        close(lockfd);

        /* an unknown path: 0, nothing written, the known paths listed */
        assert_int_equal(canary_reset_reference(d.fd, "/nowhere", stdout, err, sizeof err), 0);
        assert_non_null(strstr(err, "no record of the path /nowhere"));
        assert_non_null(strstr(err, "the paths it knows: /data, /logs"));
        assert_int_equal(asides(d.fd, "reset", NULL, 0), 0);

        f = open_memstream(&out, &outlen);
        assert_non_null(f);
        /* "/data/" is "/data" */
        assert_int_equal(canary_reset_reference(d.fd, "/data//", f, err, sizeof err), 2);
        fclose(f);
        assert_non_null(strstr(out, "reset: disk=wwn:0x5000aaaa mode=fdatasync path=/data "
                                    "regime=idle (reference was 0.002s;"));
        /* the previous file, days and all, kept beside it */
        assert_int_equal(asides(d.fd, "reset", aside, sizeof aside), 1);
        assert_non_null(strstr(out, aside));
        free(out);
        back = get_file(d.fd, aside);
        assert_string_equal(back, text);
        free(back);
        back = get_file(d.fd, CANARY_STATE_FILE);
        /* the baseline is the provisional reference, days forgotten, 7 new days to come */
        assert_non_null(strstr(back, "path=/data regime=idle baseline=0.004 updates=900 updated=5 "
                                     "reference=0.004 refdays=- dayobs=- days=-\n"));
        assert_non_null(strstr(back, "path=/data regime=busy baseline=0.001 updates=900 updated=5 "
                                     "reference=0.001 refdays=- dayobs=- days=-\n"));
        assert_non_null(strstr(back, "path=/logs regime=idle baseline=0.003 updates=900 updated=5 "
                                     "reference=0.001 refdays=final dayobs=- days=-\n"));
        free(back);

        /* resets without end keep at most STATEFILE_ASIDE_MAX copies: the first and the
         * newest */
        for (int i = 0; i < STATEFILE_ASIDE_MAX + 3; i++)
                assert_int_equal(canary_reset_reference(d.fd, "/logs", stdout, err, sizeof err), 1);
        assert_int_equal(asides(d.fd, "reset", NULL, 0), STATEFILE_ASIDE_MAX);
        /* the first copy (the only one with the days of /data, the file before any reset)
         * stays */
        back = get_file(d.fd, aside);
        assert_string_equal(back, text);
        free(back);

        /* a file with a bad line is not edited (the line would be lost) */
        put_file(d.fd, CANARY_STATE_FILE, "diskpulse-canary-baselines 3\nnonsense\n", 0600);
        assert_int_equal(canary_reset_reference(d.fd, "/data", stdout, err, sizeof err), -EBADMSG);

        /* no state file */
        assert_int_equal(unlinkat(d.fd, CANARY_STATE_FILE, 0), 0);
        assert_int_equal(canary_reset_reference(d.fd, "/data", stdout, err, sizeof err), -ENOENT);
        sdir_free(&d);
}

/* A file written under a clock a year ahead (a bad hardware clock at boot, corrected since):
 * its future days are not used (the trend rests on the others), the reference is, the whole
 * file is kept aside, and the next write leaves the future days out. */
static void test_clock_ahead(void **state)
{
        /* now: 2025-12-05; two days a year ahead, updated in the year 5138 */
        static const char text[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 updates=900 "
            "updated=100000000000000000 warmup=- reference=0.002 refdays=final dayobs=- "
            "days=1764500000:0.0039,1764586400:0.004,1764672800:0.0041,1764759200:0.0042,"
            "1796500000:0.009,1796586400:0.0095\n";
        char *t, *name, *kept, *back, *lint;
        struct sdir d;
        struct canary *c;
        (void)state;

        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        fk.real = 1764900000 * USEC_PER_SEC;
        c = start(d.fd, "wwn:0x5000aaaa", 1);
        t = render(c);
        assert_has(t, "\ndiskpulse_sync_reference_seconds{" L ",regime=\"idle\"} 0.002\n", true);
        assert_has(t, "\ndiskpulse_sync_trend_daily_medians{" L ",regime=\"idle\"} 4\n", true);
        /* The families only days of probing bring (reference, trend) pass promtool's lint. */
        lint = promtool_lint(t);
        if (!lint)
                print_message("promtool check metrics: skipped, no promtool on PATH\n");
        else if (*lint)
                fail_msg("promtool check metrics objects:\n%s\nto:\n%s", lint, t);
        free(lint);
        free(t);
        name = aside_file(d.fd, CANARY_STATE_FILE ".clock-", true);
        kept = get_file(d.fd, name);
        assert_string_equal(kept, text);
        finish(c);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, "1796500000", false);
        assert_has(back, "updated=100000000000000000", false);
        assert_has(back, "1764759200:0.0042", true);
        assert_has(back, " reference=0.002 refdays=final ", true);
        free(kept);
        free(back);
        free(name);
        fk.real = 0;
        sdir_free(&d);
}

static bool only_aaaa(void *ud, const char *disk)
{
        (void)ud;
        return strcmp(disk, "wwn:0x5000aaaa") == 0;
}

static const struct canary_import_host aaaa_host = {.present = only_aaaa};

/* One disk's records exported from one state directory and imported into another: the disk
 * checked, the path moved, the other records kept, the previous file kept beside it. */
static void test_export_import(void **state)
{
        static const char text[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 updates=900 "
            "updated=5 warmup=- reference=0.002 refdays=final dayobs=0.004 "
            "days=1717000000:0.0039,1717086400:0.004\n"
            "disk=wwn:0x5000bbbb mode=fdatasync path=/logs regime=idle baseline=0.003 "
            "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n";
        static const char there[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/srv/pg regime=idle baseline=0 "
            "updates=3 updated=7 warmup=0.009,0.009,0.009 reference=0 refdays=- dayobs=- "
            "days=-\n"
            "disk=wwn:0x5000cccc mode=fdatasync path=/srv/wal regime=idle baseline=0.003 "
            "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n";
        char err[1024], *out = NULL, *back, aside[NAME_MAX + 1];
        size_t outlen = 0;
        struct sdir a, b;
        FILE *f;
        (void)state;

        sdir_new(&a, "/tmp");
        sdir_new(&b, "/tmp");
        put_file(a.fd, CANARY_STATE_FILE, text, 0600);
        put_file(b.fd, CANARY_STATE_FILE, there, 0600);

        assert_int_equal(canary_export_records(a.fd, "wwn:0x5000ffff", stdout, err, sizeof err), 0);
        assert_non_null(strstr(err, "the disks it knows: wwn:0x5000aaaa, wwn:0x5000bbbb"));
        f = open_memstream(&out, &outlen);
        assert_int_equal(canary_export_records(a.fd, "wwn:0x5000aaaa", f, err, sizeof err), 1);
        fclose(f);
        assert_non_null(strstr(out, "diskpulse-canary-baselines 3\n"));
        assert_non_null(strstr(out, "days=1717000000:0.0039,1717086400:0.004"));
        assert_null(strstr(out, "0x5000bbbb"));

        /* a disk this host does not have: refused, nothing written */
        assert_int_equal(canary_import_records(b.fd, text, strlen(text), NULL, &aaaa_host, stdout,
                                               err, sizeof err),
                         -EINVAL); /* two disks */
        assert_int_equal(
            canary_import_records(b.fd, out, outlen, NULL, NULL, stdout, err, sizeof err), 1);
        back = get_file(b.fd, CANARY_STATE_FILE);
        assert_non_null(strstr(back, "path=/data regime=idle baseline=0.004"));
        free(back);
        assert_int_equal(asides(b.fd, "import", aside, sizeof aside), 1);
        back = get_file(b.fd, aside);
        assert_string_equal(back, there);
        free(back);
        put_file(b.fd, CANARY_STATE_FILE, there, 0600);
        assert_int_equal(canary_import_records(b.fd, out, outlen, "/srv/pg/", &aaaa_host, stdout,
                                               err, sizeof err),
                         1);
        back = get_file(b.fd, CANARY_STATE_FILE);
        /* this host's fresh warm-up of the disk is replaced by its history, the other disk
         * kept */
        assert_non_null(strstr(back, "path=/srv/pg regime=idle baseline=0.004 updates=900"));
        assert_non_null(strstr(back, "days=1717000000:0.0039,1717086400:0.004"));
        assert_null(strstr(back, "0.009")); /* the warm-up's hours, gone with its record */
        assert_non_null(strstr(back, "disk=wwn:0x5000cccc"));
        free(back);
        free(out);

        /* identity checked */
        out = NULL;
        f = open_memstream(&out, &outlen);
        assert_int_equal(canary_export_records(a.fd, "wwn:0x5000bbbb", f, err, sizeof err), 1);
        fclose(f);
        assert_int_equal(
            canary_import_records(b.fd, out, outlen, NULL, &aaaa_host, stdout, err, sizeof err),
            -ENODEV);
        assert_non_null(strstr(err, "no disk with the identity wwn:0x5000bbbb on this host"));
        assert_int_equal(
            canary_import_records(b.fd, "junk\n", 5, NULL, NULL, stdout, err, sizeof err),
            -EBADMSG);
        free(out);
        sdir_free(&a);
        sdir_free(&b);
}

/* A record line of disk at path, updated at updated (microseconds). */
static void rec_line(char *buf, size_t size, const char *disk, const char *path, const char *regime,
                     unsigned long long updated)
{
        snprintf(buf, size,
                 "disk=%s mode=fdatasync path=%s regime=%s baseline=0.004 updates=900 "
                 "updated=%llu warmup=- reference=0.002 refdays=final dayobs=- days=-\n",
                 disk, path, regime, updated);
}

/* A state file of n records of the disk disk (each its own, disk and 4 hex digits of its index,
 * when numbered) at path and its index, updated at 1000 + index, then extra. */
static char *many_records(const char *disk, bool numbered, const char *path, int n,
                          const char *extra)
{
        size_t size = 64 + (size_t)n * 300 + strlen(extra), used;
        char *text = malloc(size);

        assert_non_null(text);
        used = (size_t)snprintf(text, size, "diskpulse-canary-baselines 3\n");
        for (int i = 0; i < n; i++) {
                char d[64], p[64];

                if (numbered)
                        snprintf(d, sizeof d, "%s%04x", disk, (unsigned)i);
                else
                        snprintf(d, sizeof d, "%s", disk);
                snprintf(p, sizeof p, "%s%d", path, i);
                rec_line(text + used, size - used, d, p, "idle", 1000ull + (unsigned)i);
                used += strlen(text + used);
        }
        snprintf(text + used, size - used, "%s", extra);
        return text;
}

/* The fake host of an import: disks wwn:0x5000aaaa and wwn:0x5000bbbb are here, /srv/pg and
 * /srv/wal lie on aaaa, /srv/logs on bbbb, /tmp on a tmpfs; nothing else exists. */
static bool here_ab(void *ud, const char *disk)
{
        (void)ud;
        return strcmp(disk, "wwn:0x5000aaaa") == 0 || strcmp(disk, "wwn:0x5000bbbb") == 0;
}

static int fake_path_disk(void *ud, const char *path, char *disk, size_t disksz, char *dev,
                          size_t devsz, char *why, size_t whysz)
{
        (void)ud;
        if (strcmp(path, "/srv/pg") == 0 || strcmp(path, "/srv/wal") == 0) {
                snprintf(disk, disksz, "wwn:0x5000aaaa");
                snprintf(dev, devsz, "sda");
                return 0;
        }
        if (strcmp(path, "/srv/logs") == 0) {
                snprintf(disk, disksz, "wwn:0x5000bbbb");
                snprintf(dev, devsz, "sdb");
                return 0;
        }
        if (strcmp(path, "/tmp") == 0) {
                snprintf(why, whysz, "its filesystem has no block device of its own");
                return -ENODEV;
        }
        snprintf(why, whysz, "it does not exist here");
        return -ENOENT;
}

static const struct canary_import_host here_host = {.present = here_ab,
                                                    .path_disk = fake_path_disk};

/* canary_import_records() with out in a memory buffer: returns its result, *ret_out the text
 * (the caller frees it). */
static int import_to(int fd, const char *text, const char *path, char **ret_out, char *err,
                     size_t errsz)
{
        size_t len = 0;
        FILE *f = open_memstream(ret_out, &len);
        int r;

        assert_non_null(f);
        r = canary_import_records(fd, text, strlen(text), path, &here_host, f, err, errsz);
        fclose(f);
        return r;
}

/* The import's checks: a path normalised, or refused when it is not a directory on the records'
 * disk here, too long or relative; two records on one key refused; nothing printed and nothing
 * written when refused; a temp file of a killed save removed. */
static void test_import_checks(void **state)
{
        static const char two[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old/a regime=idle baseline=0.004 "
            "updates=900 updated=5 warmup=- reference=0.002 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old/b regime=idle baseline=0.003 "
            "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000aaaa mode=append path=/old/b regime=idle baseline=0.009 "
            "updates=900 updated=5 warmup=- reference=0.008 refdays=final dayobs=- days=-\n";
        char err[2048], *out = NULL, *back, longp[1200];
        struct sdir d;
        (void)state;

        sdir_new(&d, "/tmp");
        /* two fdatasync targets, one import path: refused (with a recipe), nothing written */
        assert_int_equal(import_to(d.fd, two, "/srv/pg", &out, err, sizeof err), -EINVAL);
        assert_string_equal(out, "");
        free(out);
        assert_non_null(strstr(err, "hold two targets of mode fdatasync, /old/a and /old/b"));
        assert_non_null(strstr(err, "grep -F -e 'diskpulse-canary-baselines' -e ' path=/old/a "
                                    "' FILE | diskpulse --canary.import-records=- "
                                    "--canary.import-path=DIR"));
        assert_int_equal(faccessat(d.fd, CANARY_STATE_FILE, F_OK, 0), -1);
        /* their own paths do not exist here */
        assert_int_equal(import_to(d.fd, two, NULL, &out, err, sizeof err), -ENOENT);
        free(out);
        assert_non_null(strstr(err, "the records of /old/a cannot be used at /old/a: it does not "
                                    "exist here"));
        /* a tmpfs, another disk, a relative path, a path over 1 KiB */
        static const char one[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old/a regime=idle baseline=0.004 "
            "updates=900 updated=5 warmup=- reference=0.002 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old/a regime=busy baseline=0.001 "
            "updates=900 updated=5 warmup=- reference=0.0005 refdays=final dayobs=- days=-\n";
        assert_int_equal(import_to(d.fd, one, "/tmp/", &out, err, sizeof err), -ENODEV);
        free(out);
        assert_non_null(strstr(err, "cannot be used at /tmp: its filesystem has no block device"));
        assert_int_equal(import_to(d.fd, one, "/srv/logs", &out, err, sizeof err), -EXDEV);
        free(out);
        assert_non_null(strstr(err, "/srv/logs is on sdb (wwn:0x5000bbbb) here, not on the disk "
                                    "of the records (wwn:0x5000aaaa)"));
        assert_int_equal(import_to(d.fd, one, "srv/pg", &out, err, sizeof err), -EINVAL);
        free(out);
        assert_non_null(strstr(err, "must be absolute"));
        longp[0] = '/';
        memset(longp + 1, 'x', sizeof longp - 2);
        longp[sizeof longp - 1] = 0;
        assert_int_equal(import_to(d.fd, one, longp, &out, err, sizeof err), -ENAMETOOLONG);
        free(out);
        assert_non_null(
            strstr(err, "is 1199 bytes long; the state file keeps paths of up to 1023"));
        assert_int_equal(faccessat(d.fd, CANARY_STATE_FILE, F_OK, 0), -1);
        /* no header: what a records file begins with */
        assert_int_equal(import_to(d.fd, strchr(one, '\n') + 1, "/srv/pg", &out, err, sizeof err),
                         -EBADMSG);
        free(out);
        assert_non_null(strstr(err, "it does not begin with the line \"diskpulse-canary-baselines "
                                    "3\""));

        /* "/srv/x/../pg/." is /srv/pg; a temp file a killed save left is removed */
        put_file(d.fd, ".canary-baselines.tmp-0123456789abcdef", "half", 0600);
        assert_int_equal(import_to(d.fd, one, "/srv//x/../pg/.", &out, err, sizeof err), 2);
        assert_non_null(strstr(out, "removed: 1 temporary file of an interrupted save"));
        assert_non_null(strstr(out, "imported: disk=wwn:0x5000aaaa mode=fdatasync path=/srv/pg "
                                    "regime=idle\n"));
        free(out);
        assert_int_equal(faccessat(d.fd, ".canary-baselines.tmp-0123456789abcdef", F_OK, 0), -1);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_non_null(strstr(back, "path=/srv/pg regime=idle baseline=0.004"));
        assert_non_null(strstr(back, "path=/srv/pg regime=busy baseline=0.001"));
        free(back);
        sdir_free(&d);
}

/* An import into a file at its limit: the least recently updated records of disks not on this
 * host make room (never the records just imported, which are older still), each printed with
 * the copy that keeps it; refused when only this host's disks' records could go. */
static void test_import_at_limit(void **state)
{
        static const char in[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old regime=idle baseline=0.004 "
            "updates=900 updated=5 warmup=- reference=0.002 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/old regime=busy baseline=0.001 "
            "updates=900 updated=5 warmup=- reference=0.0005 refdays=final dayobs=- days=-\n";
        char err[1024], *out = NULL, *back, *text, aside[NAME_MAX + 1], want[512], line[512];
        struct canary_records recs = {0};
        struct sdir d;
        (void)state;

        sdir_new(&d, "/tmp");
        /* 1023 records of gone disks (the first three the least recently updated) and one of
         * bbbb, a disk here, older than all */
        rec_line(line, sizeof line, "wwn:0x5000bbbb", "/srv/logs", "idle", 1);
        text = many_records("wwn:0x5000f", true, "/gone", CANARY_RECORDS_MAX - 1, line);
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        assert_int_equal(import_to(d.fd, in, "/srv/pg", &out, err, sizeof err), 2);
        assert_int_equal(asides(d.fd, "import", aside, sizeof aside), 1);
        back = get_file(d.fd, aside);
        assert_string_equal(back, text);
        free(back);
        snprintf(want, sizeof want,
                 "dropped: disk=wwn:0x5000f0000 mode=fdatasync path=/gone0 regime=idle (the state "
                 "file's limit is 1024 records: the least recently updated of a disk not on this "
                 "host, last updated 1970-01-01T00:00:00Z; %s still has it)\n",
                 aside);
        assert_non_null(strstr(out, want));
        assert_non_null(strstr(out, "dropped: disk=wwn:0x5000f0001 "));
        assert_null(strstr(out, "dropped: disk=wwn:0x5000f0002 "));
        assert_null(strstr(out, "dropped: disk=wwn:0x5000bbbb"));
        free(out);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_int_equal(canary_records_parse(back, strlen(back), &recs), 0);
        assert_int_equal(recs.bad, 0);
        assert_int_equal(recs.n, CANARY_RECORDS_MAX);
        assert_non_null(canary_records_find(&recs, "wwn:0x5000aaaa", "fdatasync", "/srv/pg",
                                            CANARY_REGIME_IDLE));
        assert_non_null(canary_records_find(&recs, "wwn:0x5000aaaa", "fdatasync", "/srv/pg",
                                            CANARY_REGIME_BUSY));
        assert_non_null(canary_records_find(&recs, "wwn:0x5000bbbb", "fdatasync", "/srv/logs",
                                            CANARY_REGIME_IDLE));
        assert_null(canary_records_find(&recs, "wwn:0x5000f0000", "fdatasync", "/gone0",
                                        CANARY_REGIME_IDLE));
        assert_non_null(canary_records_find(&recs, "wwn:0x5000f0002", "fdatasync", "/gone2",
                                            CANARY_REGIME_IDLE));
        canary_records_free(&recs);
        free(back);
        /* again: the imported records are replaced, no room needed, nothing dropped */
        assert_int_equal(import_to(d.fd, in, "/srv/pg", &out, err, sizeof err), 2);
        assert_null(strstr(out, "dropped:"));
        assert_non_null(strstr(out, "(replaces the record this host had)"));
        free(out);
        free(text);

        /* full of this host's disks: nothing may go, refused, nothing written or copied */
        text = many_records("wwn:0x5000bbbb", false, "/p", CANARY_RECORDS_MAX, "");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        int copies = asides(d.fd, "import", NULL, 0);
        assert_int_equal(import_to(d.fd, in, "/srv/pg", &out, err, sizeof err), -ENOSPC);
        assert_string_equal(out, "");
        free(out);
        assert_non_null(strstr(err, "the state file holds 1024 records, its limit is 1024, and "
                                    "the import adds 2 new ones; only 0 records of disks that are "
                                    "not on this host could make room"));
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_string_equal(back, text);
        free(back);
        assert_int_equal(asides(d.fd, "import", NULL, 0), copies);
        free(text);
        sdir_free(&d);
}

/* A reset that cannot be written (a read-only directory) says nothing on its output. */
static void test_reset_readonly(void **state)
{
        static const char text[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle baseline=0.004 updates=900 "
            "updated=5 warmup=- reference=0.002 refdays=final dayobs=- days=-\n";
        char mnt[300], err[1024], *out = NULL, *back;
        size_t len = 0;
        struct sdir d;
        FILE *f;
        int fd;
        (void)state;

        sdir_new(&d, "/tmp");
        snprintf(mnt, sizeof mnt, "%s/mnt", d.path);
        assert_int_equal(mkdir(mnt, 0755), 0);
        if (!mount_tiny_tmpfs(mnt)) {
                sdir_free(&d);
                skip();
        }
        fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        put_file(fd, CANARY_STATE_FILE, text, 0600);
        assert_int_equal(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
        f = open_memstream(&out, &len);
        assert_int_equal(canary_reset_reference(fd, "/data", f, err, sizeof err), -EROFS);
        fclose(f);
        assert_string_equal(out, "");
        assert_non_null(strstr(err, "so it is not changed"));
        free(out);
        back = get_file(fd, CANARY_STATE_FILE);
        assert_string_equal(back, text);
        free(back);
        close(fd);
        assert_int_equal(umount2(mnt, MNT_DETACH), 0);
        sdir_free(&d);
}

/* The daemon learning a new target in a full file: the least recently updated record makes
 * room, and the file as it was is kept aside first (with that record). */
static void test_records_limit_evict(void **state)
{
        char *text, *back, aside[NAME_MAX + 1];
        struct canary *c;
        struct sdir d;
        (void)state;

        sdir_new(&d, "/tmp");
        text = many_records("wwn:0x5000f", true, "/gone", CANARY_RECORDS_MAX, "");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        c = start(d.fd, "wwn:0x5000aaaa", 2);
        finish(c);
        assert_int_equal(asides(d.fd, "evict", aside, sizeof aside), 1);
        back = get_file(d.fd, aside);
        assert_string_equal(back, text);
        free(back);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_has(back, "disk=wwn:0x5000aaaa mode=fdatasync path=/data regime=idle", true);
        assert_has(back, "path=/gone0 ", false);
        assert_has(back, "path=/gone1 ", true);
        free(back);
        free(text);
        sdir_free(&d);
}

/* A reset takes a path in its normal form, and as given for a record an older diskpulse keyed
 * by a path with "." in it. */
static void test_reset_paths(void **state)
{
        static const char text[] =
            "diskpulse-canary-baselines 3\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/srv/./old regime=idle baseline=0.004 "
            "updates=900 updated=5 warmup=- reference=0.002 refdays=final dayobs=- days=-\n"
            "disk=wwn:0x5000aaaa mode=fdatasync path=/srv/pg regime=idle baseline=0.003 "
            "updates=900 updated=5 warmup=- reference=0.001 refdays=final dayobs=- days=-\n";
        char err[1024], *out = NULL, *back;
        size_t len = 0;
        struct sdir d;
        FILE *f;
        (void)state;

        sdir_new(&d, "/tmp");
        put_file(d.fd, CANARY_STATE_FILE, text, 0600);
        f = open_memstream(&out, &len);
        assert_int_equal(canary_reset_reference(d.fd, "/srv/x/../pg/.", f, err, sizeof err), 1);
        assert_int_equal(canary_reset_reference(d.fd, "/srv/./old/", f, err, sizeof err), 1);
        fclose(f);
        assert_non_null(strstr(out, "reset: disk=wwn:0x5000aaaa mode=fdatasync path=/srv/pg "));
        assert_non_null(strstr(out, "reset: disk=wwn:0x5000aaaa mode=fdatasync path=/srv/./old "));
        free(out);
        back = get_file(d.fd, CANARY_STATE_FILE);
        assert_non_null(strstr(back, "path=/srv/pg regime=idle baseline=0.003 updates=900 "
                                     "updated=5 reference=0.003 refdays=-"));
        assert_non_null(strstr(back, "path=/srv/./old regime=idle baseline=0.004 updates=900 "
                                     "updated=5 reference=0.004 refdays=-"));
        free(back);
        sdir_free(&d);
}

/* The records' normal form of a path. */
static void test_path_normalize(void **state)
{
        static const struct {
                const char *in, *out;
                int r;
        } cases[] = {
            {"/", "/", 0},
            {"/srv/pg", "/srv/pg", 0},
            {"/srv/pg/", "/srv/pg", 0},
            {"//srv///pg//", "/srv/pg", 0},
            {"/srv/./pg/.", "/srv/pg", 0},
            {"/a/../b", "/b", 0},
            {"/a/b/../../c/..", "/", 0},
            {"/../..", "/", 0},
            {"/..a/b..", "/..a/b..", 0},
            {"/.hidden/...", "/.hidden/...", 0},
            {"", NULL, -EINVAL},
            {"srv/pg", NULL, -EINVAL},
            {"./srv", NULL, -EINVAL},
        };
        char buf[CANARY_PATH_MAX], big[CANARY_PATH_MAX + 10];
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                int r = canary_path_normalize(cases[i].in, buf, sizeof buf);
                if (r != cases[i].r || (r == 0 && strcmp(buf, cases[i].out) != 0))
                        fail_msg("\"%s\": %d \"%s\", want %d \"%s\"", cases[i].in, r,
                                 r == 0 ? buf : "", cases[i].r, cases[i].out ? cases[i].out : "");
        }
        /* 1023 bytes fit, 1024 do not; a longer path that shrinks to fit is fine */
        big[0] = '/';
        memset(big + 1, 'x', CANARY_PATH_MAX - 2);
        big[CANARY_PATH_MAX - 1] = 0;
        assert_int_equal(canary_path_normalize(big, buf, sizeof buf), 0);
        assert_int_equal(strlen(buf), CANARY_PATH_MAX - 1);
        big[CANARY_PATH_MAX - 1] = 'x';
        big[CANARY_PATH_MAX] = 0;
        assert_int_equal(canary_path_normalize(big, buf, sizeof buf), -ENAMETOOLONG);
        memcpy(big + CANARY_PATH_MAX - 3, "/..", 4);
        assert_int_equal(canary_path_normalize(big, buf, sizeof buf), 0);
        assert_string_equal(buf, "/");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_good_file_used_and_tightened),
            cmocka_unit_test(test_version2_migrated),
            cmocka_unit_test(test_bad_line_keeps_good_records),
            cmocka_unit_test(test_corrupt_file_set_aside),
            cmocka_unit_test(test_unreadable_file_never_replaced),
            cmocka_unit_test(test_full_and_readonly_filesystem),
            cmocka_unit_test(test_reset_reference),
            cmocka_unit_test(test_export_import),
            cmocka_unit_test(test_clock_ahead),
            cmocka_unit_test(test_import_checks),
            cmocka_unit_test(test_import_at_limit),
            cmocka_unit_test(test_reset_readonly),
            cmocka_unit_test(test_records_limit_evict),
            cmocka_unit_test(test_reset_paths),
            cmocka_unit_test(test_path_normalize),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
