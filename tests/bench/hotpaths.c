/* bench_hotpaths: the sampling and rendering paths of the daemon without the daemon around them,
 * for instruction counts under valgrind --tool=callgrind (tests/bench/profile.py reads the
 * inclusive counts of the stage_* functions, which stay the same whatever changes inside).
 *
 * Usage: bench_hotpaths ROOT ROUNDS [churn]
 * ROOT is a tree made by tests/bench/fixture.py. Each round advances a simulated monotonic clock
 * by one second (the default --diskstats.interval, with the default 10 s window), samples
 * ROOT/proc/diskstats, exports the metric set, publishes it as a snapshot and renders the text
 * page, its gzip form and the OpenMetrics page, as the first scrape of each snapshot does.
 * With "churn" every counter of the file advances between rounds (a busy host); without it the
 * file stays the same (an idle host). Twelve rounds fill the window before the measured ones.
 * Prints the page sizes of the last round. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "diskstats.h"
#include "diskstats_parse.h"
#include "fsroot.h"
#include "metrics.h"
#include "snapshot.h"
#include "util.h"

#define WARMUP_ROUNDS 12
#define EXCLUDE       "^(z?ram|loop|fd|(h|s|v|xv)d[a-z]+|nvme[0-9]+n[0-9]+p)[0-9]+$"

struct churn {
        char *path;
        struct ds_entry *e;
        size_t n, cap;
};

static int keep_entry(const struct ds_entry *e, void *ud)
{
        struct churn *c = ud;

        GROW(c->e, c->cap, c->n + 1);
        c->e[c->n++] = *e;
        return 0;
}

/* Rewrites the diskstats file with every counter advanced (not measured). */
static void churn_step(struct churn *c, unsigned round)
{
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof tmp, "%s.new", c->path);
        f = fopen(tmp, "w");
        if (!f) {
                perror(tmp);
                exit(1);
        }
        for (size_t i = 0; i < c->n; i++) {
                const struct ds_entry *e = &c->e[i];
                fprintf(f, "%4u %7u %s", e->major, e->minor, e->name);
                for (size_t k = 0; k < DS_NFIELDS; k++)
                        fprintf(f, " %" PRIu64,
                                e->v[k] + (k == DS_IO_NOW ? 0 : (uint64_t)round * (k + 1 + i % 7)));
                fputc('\n', f);
        }
        if (fclose(f) != 0 || rename(tmp, c->path) != 0) {
                perror(c->path);
                exit(1);
        }
}

static int count_entry(const struct ds_entry *e, void *ud)
{
        (void)e;
        ++*(size_t *)ud;
        return 0;
}

/* The stages, kept out of line so that callgrind counts each on its own. */
__attribute__((noinline)) static size_t stage_parse(const char *buf, size_t len)
{
        size_t n = 0;
        unsigned bad = 0;

        (void)diskstats_parse(buf, len, count_entry, &n, &bad);
        return n;
}

__attribute__((noinline)) static void stage_sample(struct diskstats *d, usec_t now)
{
        if (diskstats_sample(d, now) < 0) {
                fprintf(stderr, "cannot read diskstats\n");
                exit(1);
        }
}

__attribute__((noinline)) static struct snapshot *stage_export(struct diskstats *d)
{
        struct mset *set = mset_new();

        diskstats_export(d, set);
        return snapshot_new(&set, 1, 0);
}

__attribute__((noinline)) static size_t stage_page(struct snapshot *s, enum expo_format fmt,
                                                   bool gzip)
{
        const void *buf;
        size_t len = 0;

        if (snapshot_page(s, fmt, gzip, &buf, &len) < 0) {
                fprintf(stderr, "rendering failed\n");
                exit(1);
        }
        return len;
}

/* One wrapper per form, so that each has its own count. */
__attribute__((noinline)) static size_t stage_text(struct snapshot *s)
{
        return stage_page(s, EXPO_FORMAT_TEXT, false);
}

__attribute__((noinline)) static size_t stage_text_gzip(struct snapshot *s)
{
        return stage_page(s, EXPO_FORMAT_TEXT, true);
}

__attribute__((noinline)) static size_t stage_openmetrics(struct snapshot *s)
{
        return stage_page(s, EXPO_FORMAT_OPENMETRICS, false);
}

__attribute__((noinline)) static size_t stage_openmetrics_gzip(struct snapshot *s)
{
        return stage_page(s, EXPO_FORMAT_OPENMETRICS, true);
}

__attribute__((noinline)) static void stage_free(struct snapshot *s)
{
        snapshot_unref(s);
}

__attribute__((noinline)) static void stage_identity(struct diskstats *d, usec_t now)
{
        diskstats_invalidate(d, NULL);
        if (diskstats_sample(d, now) < 0)
                exit(1);
}

/* A whole round outside the measured stages: fills the window first. */
static void warm_round(struct diskstats *d, usec_t now)
{
        struct mset *set = mset_new();
        struct snapshot *s;

        if (diskstats_sample(d, now) < 0)
                exit(1);
        diskstats_export(d, set);
        s = snapshot_new(&set, 1, 0);
        snapshot_unref(s);
}

int main(int argc, char **argv)
{
        char path[4096];
        int procfs, sysfs, udev;
        unsigned rounds;
        bool churn;
        struct namefilter *exclude = NULL;
        struct devsrc *src;
        struct diskstats *d;
        struct churn c = {0};
        _cleanup_free_ char *buf = NULL;
        size_t len, text = 0, gz = 0, om = 0, omgz = 0, parsed = 0;
        usec_t now = 1000 * USEC_PER_SEC;

        if (argc < 3) {
                fprintf(stderr, "usage: %s ROOT ROUNDS [churn]\n", argv[0]);
                return 2;
        }
        rounds = (unsigned)strtoul(argv[2], NULL, 10);
        churn = argc > 3 && strcmp(argv[3], "churn") == 0;
        snprintf(path, sizeof path, "%s/proc", argv[1]);
        procfs = root_open(path);
        snprintf(path, sizeof path, "%s/sys", argv[1]);
        sysfs = root_open(path);
        snprintf(path, sizeof path, "%s/udev", argv[1]);
        udev = root_open(path);
        if (procfs < 0 || sysfs < 0 || udev < 0) {
                fprintf(stderr, "%s: not a fixture tree\n", argv[1]);
                return 1;
        }
        if (namefilter_new(NULL, EXCLUDE, &exclude, NULL, 0) < 0)
                return 1;
        snprintf(path, sizeof path, "%s/proc/diskstats", argv[1]);
        c.path = path;
        if (read_file_at(procfs, "diskstats", 64u << 20, &buf, &len) < 0) {
                fprintf(stderr, "cannot read %s\n", path);
                return 1;
        }
        (void)diskstats_parse(buf, len, keep_entry, &c, NULL);

        src = devsrc_files_new(sysfs, udev);
        d = diskstats_new(&(struct diskstats_config){.procfs_fd = procfs,
                                                     .devsrc = src,
                                                     .filter = exclude,
                                                     .interval = USEC_PER_SEC,
                                                     .window = 10 * USEC_PER_SEC,
                                                     .identity_refresh = 60 * USEC_PER_SEC});
        for (unsigned r = 0; r < WARMUP_ROUNDS; r++) {
                if (churn)
                        churn_step(&c, r + 1);
                warm_round(d, now += USEC_PER_SEC);
        }
        for (unsigned r = 0; r < rounds; r++) {
                struct snapshot *s;

                if (churn)
                        churn_step(&c, WARMUP_ROUNDS + r + 1);
                parsed = stage_parse(buf, len);
                stage_sample(d, now += USEC_PER_SEC);
                s = stage_export(d);
                text = stage_text(s);
                gz = stage_text_gzip(s);
                om = stage_openmetrics(s);
                omgz = stage_openmetrics_gzip(s);
                stage_free(s);
        }
        stage_identity(d, now += USEC_PER_SEC);
        printf("lines %zu devices %zu text %zu gzip %zu openmetrics %zu openmetrics+gzip %zu\n",
               parsed, diskstats_device_count(d), text, gz, om, omgz);
        diskstats_free(d);
        devsrc_free(src);
        namefilter_free(exclude);
        free(c.e);
        close(procfs);
        close(sysfs);
        close(udev);
        return 0;
}
