/* The canary's memory stays flat over reopens of its work file. The soak (tests/soak) found the
 * daemon's RSS growing by about the fill buffer's size (64 KiB) at reopens of a work file after
 * faults: the buffer that fills a new file was malloc'd in the prober thread's arena, where it
 * stayed (below the trim threshold) and, around the live 4 KiB probe buffer, fragmented it. So:
 * preparing a file leaves no fill buffer in the arenas, and a target whose directory goes and
 * comes back hundreds of times (each time the file is closed and prepared anew, as after any
 * error) keeps them flat. Real files in a temp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "canary.h"

#define REOPENS 1000
#define WARM    20
/* What the arenas may grow by over the last REOPENS - WARM reopens: 0 measured with the fill
 * buffer mapped; 408 KiB here with it malloc'd, and about 68 KiB per fault in the daemon. */
#define GROWTH_MAX (128 * 1024)

static size_t arenas(void)
{
        struct mallinfo2 m = mallinfo2();

        return m.arena + m.hblkhd;
}

/* The prober's clock and sleep, fake so that hours pass at once; every PROBES_PER_CYCLE sleeps
 * the target directory is removed and, one sleep later, made again: the file is closed at the
 * next check and prepared anew once the directory is back, as after any fault. */
#define PROBES_PER_CYCLE 50

static struct {
        usec_t now;
        unsigned sleeps, reopens;
        char dir[300];
        bool removed;
} fk;

static usec_t f_now(void *ud)
{
        (void)ud;
        return __atomic_load_n(&fk.now, __ATOMIC_SEQ_CST);
}

static void f_sleep(void *ud, usec_t usec)
{
        (void)ud;
        __atomic_add_fetch(&fk.now, usec, __ATOMIC_SEQ_CST);
        fk.sleeps++;
        if (fk.removed) {
                assert_int_equal(mkdir(fk.dir, 0755), 0);
                fk.removed = false;
                fk.reopens++;
        } else if (fk.sleeps % PROBES_PER_CYCLE == 0 && fk.reopens < REOPENS) {
                assert_int_equal(rmdir(fk.dir), 0);
                fk.removed = true;
        }
}

static int f_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        (void)ud;
        return canary_dir_check(f, dir);
}

/* Runs the reopen cycles on the real file functions in dir's filesystem; returns the arenas
 * after WARM reopens and at the end. */
static void run_cycles(const char *base, size_t *ret_warm, size_t *ret_end)
{
        struct canary_ops ops = {.now = f_now, .sleep = f_sleep, .check_dir = f_check_dir};
        struct canary_target_config t;
        struct canary_config cfg;
        struct canary *c;
        bool warm_taken = false;

        memset(&fk, 0, sizeof fk);
        snprintf(fk.dir, sizeof fk.dir, "%s/target", base);
        assert_int_equal(mkdir(fk.dir, 0755), 0);
        t = (struct canary_target_config){.path = fk.dir, .mode = CANARY_MODE_FDATASYNC};
        cfg = (struct canary_config){.targets = &t,
                                     .n_targets = 1,
                                     .interval = 200 * USEC_PER_MSEC,
                                     .size = 4096,
                                     .timeout = 30 * USEC_PER_SEC,
                                     .state_dir_fd = -1,
                                     .sysfs_fd = -1,
                                     .ops = &ops};
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        for (int i = 0; i < 60000; i++) {
                unsigned r = __atomic_load_n(&fk.reopens, __ATOMIC_SEQ_CST);
                if (!warm_taken && r >= WARM) {
                        *ret_warm = arenas();
                        warm_taken = true;
                }
                if (r >= REOPENS && !fk.removed)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = 500 * 1000}, NULL);
        }
        *ret_end = arenas();
        assert_true(warm_taken && fk.reopens >= REOPENS);
        canary_free(c);
        for (int i = 0; i < 5000 && canary_threads_running() > 0; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        assert_int_equal(canary_threads_running(), 0);
        (void)rmdir(fk.dir);
}

static void test_reopens_keep_memory_flat(void **state)
{
        char base[] = "/dev/shm/test_canary_reopen.XXXXXX";
        size_t warm = 0, end = 0;

        (void)state;
        if (!mkdtemp(base)) {
                strcpy(base, "/tmp/test_canary_reopen.XXXXXX");
                assert_non_null(mkdtemp(base));
        }
        run_cycles(base, &warm, &end);
        print_message("malloc arenas after %d reopens: %zu KiB, after %d: %zu KiB\n", WARM,
                      warm / 1024, REOPENS, end / 1024);
        if (end > warm + GROWTH_MAX)
                fail_msg("the arenas grew by %zu KiB over %d reopens", (end - warm) / 1024,
                         REOPENS - WARM);
        assert_int_equal(rmdir(base), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reopens_keep_memory_flat),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
