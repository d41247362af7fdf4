/* The canary's memory stays flat over reopens of its work file. The soak (tests/soak) found the
 * daemon's RSS growing by about the fill buffer's size (64 KiB) at reopens of a work file after
 * faults: the buffer that fills a new file was malloc'd in the prober thread's arena, where it
 * stayed (below the trim threshold) and, around the live 4 KiB probe buffer, fragmented it. So:
 * preparing a file leaves no fill buffer in the arenas (no allocation of its size on the prober
 * thread: alone on the machine the malloc'd buffer did not make the arenas grow here, so it is
 * looked for directly), and a target whose directory goes and comes back hundreds of times (each
 * time the file is closed and prepared anew, as after any error) keeps them flat. Real files in
 * a temp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "canary.h"
#include "fake_clock.h"

#define REOPENS 1000
#define WARM    20
/* What the arenas may grow by over the last REOPENS - WARM reopens: 0 measured with the fill
 * buffer mapped; 408 KiB here with it malloc'd, and about 68 KiB per fault in the daemon. */
#define GROWTH_MAX  (128 * 1024)
#define CANARY_SIZE 4096

static size_t arenas(void)
{
        struct mallinfo2 m = mallinfo2();

        return m.arena + m.hblkhd;
}

/* Every heap allocation of the linked code goes through these (the test is linked with
 * -Wl,--wrap for each, tests/CMakeLists.txt): the largest request made on a thread other than the
 * test's own is kept. The fill buffer is 64 KiB here; malloc'd, it is the bug this test guards. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);

static pthread_t test_thread;
static size_t largest_elsewhere; /* atomic */

static void note(size_t n)
{
        size_t seen = __atomic_load_n(&largest_elsewhere, __ATOMIC_RELAXED);

        if (pthread_equal(pthread_self(), test_thread))
                return;
        while (n > seen && !__atomic_compare_exchange_n(&largest_elsewhere, &seen, n, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
}

void *__wrap_malloc(size_t n)
{
        note(n);
        return __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
        note(k * n);
        return __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
        note(n);
        return __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
        note(n);
        return __real_posix_memalign(p, align, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
        note(n);
        return __real_aligned_alloc(align, n);
}

/* The prober's clock and sleep, fake so that hours pass at once; every PROBES_PER_CYCLE sleeps
 * the target directory is removed and, one sleep later, made again: the file is closed at the
 * next check and prepared anew once the directory is back, as after any fault.
 *
 * The fakes run on the prober thread, where a cmocka assertion must not be made (it longjmps
 * to the test's own thread: undefined, a crash instead of a report). So they only record what
 * they saw, under fk.clk.lock; the first thing that went wrong stops the cycles, and the test's
 * thread asserts on the record afterwards. */
#define PROBES_PER_CYCLE 50

static struct {
        struct fake_clock clk; /* its lock guards the rest too; its sleep is f_sleep's */
        unsigned reopens;
        char dir[300];
        bool removed;
        char failure[400]; /* the first failure seen on the prober thread, "" while none */
} fk = {.clk.lock = PTHREAD_MUTEX_INITIALIZER, .clk.cond = PTHREAD_COND_INITIALIZER};

/* Under fk.clk.lock: records what failed (the first failure only), which ends the cycles. */
static void record_failure(const char *what, int err)
{
        if (!fk.failure[0])
                snprintf(fk.failure, sizeof fk.failure,
                         "prober thread, sleep %u, after %u reopens: %s: %s", fk.clk.sleeps,
                         fk.reopens, what, strerror(err));
}

static void f_sleep(void *ud, usec_t usec)
{
        (void)ud;
        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now += usec;
        fk.clk.sleeps++;
        if (fk.failure[0]) {
                /* nothing more: the test's thread reports it */
        } else if (fk.removed) {
                if (mkdir(fk.dir, 0755) < 0)
                        record_failure("mkdir(target) to bring the directory back", errno);
                else {
                        fk.removed = false;
                        fk.reopens++;
                }
        } else if (fk.clk.sleeps % PROBES_PER_CYCLE == 0 && fk.reopens < REOPENS) {
                /* Fails (ENOTEMPTY) when the canary left a file behind in its directory. */
                if (rmdir(fk.dir) < 0)
                        record_failure("rmdir(target) to take the directory away", errno);
                else
                        fk.removed = true;
        }
        pthread_mutex_unlock(&fk.clk.lock);
}

static int f_check_dir(void *ud, const char *dir, const struct canary_file *f)
{
        (void)ud;
        return canary_dir_check(f, dir);
}

/* Removes dir and the files in it (a canary that failed may have left its work file). */
static void remove_dir(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;

        if (d) {
                while ((e = readdir(d)))
                        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                                (void)unlinkat(dirfd(d), e->d_name, 0);
                closedir(d);
        }
        (void)rmdir(dir);
}

/* Runs the reopen cycles on the real file functions in dir's filesystem; returns the arenas
 * after WARM reopens and at the end. */
static void run_cycles(const char *base, size_t *ret_warm, size_t *ret_end)
{
        struct canary_ops ops = {
            .now = fake_clock_now, .sleep = f_sleep, .check_dir = f_check_dir, .ud = &fk.clk};
        struct canary_target_config t;
        struct canary_config cfg;
        struct canary *c;
        bool warm_taken = false;
        char failure[sizeof fk.failure];
        unsigned reopens;

        pthread_mutex_lock(&fk.clk.lock);
        fk.clk.now = 0;
        fk.clk.sleeps = fk.reopens = 0;
        fk.removed = false;
        fk.failure[0] = 0;
        snprintf(fk.dir, sizeof fk.dir, "%s/target", base);
        pthread_mutex_unlock(&fk.clk.lock);
        assert_int_equal(mkdir(fk.dir, 0755), 0);
        t = (struct canary_target_config){.path = fk.dir, .mode = CANARY_MODE_FDATASYNC};
        cfg = (struct canary_config){.targets = &t,
                                     .n_targets = 1,
                                     .interval = 200 * USEC_PER_MSEC,
                                     .size = CANARY_SIZE,
                                     .timeout = 30 * USEC_PER_SEC,
                                     .state_dir_fd = -1,
                                     .sysfs_fd = -1,
                                     .ops = &ops};
        test_thread = pthread_self();
        __atomic_store_n(&largest_elsewhere, 0, __ATOMIC_RELAXED);
        c = canary_new(&cfg);
        assert_int_equal(canary_start(c), 0);
        for (int i = 0; i < 60000; i++) {
                unsigned r;
                bool done;

                pthread_mutex_lock(&fk.clk.lock);
                r = fk.reopens;
                done = fk.failure[0] || (r >= REOPENS && !fk.removed);
                pthread_mutex_unlock(&fk.clk.lock);
                if (!warm_taken && r >= WARM) {
                        *ret_warm = arenas();
                        warm_taken = true;
                }
                if (done)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = 500 * 1000}, NULL);
        }
        *ret_end = arenas();
        canary_free(c);
        for (int i = 0; i < 5000 && canary_threads_running() > 0; i++)
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        /* The prober thread is gone: what it recorded is read and judged here. */
        pthread_mutex_lock(&fk.clk.lock);
        snprintf(failure, sizeof failure, "%s", fk.failure);
        reopens = fk.reopens;
        pthread_mutex_unlock(&fk.clk.lock);
        remove_dir(fk.dir);
        if (failure[0] || !warm_taken || reopens < REOPENS)
                (void)rmdir(base);
        assert_int_equal(canary_threads_running(), 0);
        if (failure[0])
                fail_msg("%s", failure);
        if (!warm_taken || reopens < REOPENS)
                fail_msg("only %u of %d reopens within the time allowed", reopens, REOPENS);
}

static void test_reopens_keep_memory_flat(void **state)
{
        char base[] = "/dev/shm/test_canary_reopen.XXXXXX";
        size_t warm = 0, end = 0, largest;
        size_t fill = (size_t)CANARY_SLOTS * CANARY_SIZE; /* what fills the file at each open */

        (void)state;
        if (!mkdtemp(base)) {
                strcpy(base, "/tmp/test_canary_reopen.XXXXXX");
                assert_non_null(mkdtemp(base));
        }
        run_cycles(base, &warm, &end);
        assert_int_equal(rmdir(base), 0);
        largest = __atomic_load_n(&largest_elsewhere, __ATOMIC_RELAXED);
        print_message("largest heap allocation on the prober thread: %zu bytes (the fill buffer: "
                      "%zu)\n",
                      largest, fill);
        if (largest >= fill)
                fail_msg("the prober thread asked malloc for %zu bytes, the fill buffer's size "
                         "(%zu) or more: the buffer that fills a new file must not come from the "
                         "arenas",
                         largest, fill);
        print_message("malloc arenas after %d reopens: %zu KiB, after %d: %zu KiB\n", WARM,
                      warm / 1024, REOPENS, end / 1024);
        if (end > warm + GROWTH_MAX)
                fail_msg("the arenas grew by %zu KiB over %d reopens", (end - warm) / 1024,
                         REOPENS - WARM);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reopens_keep_memory_flat),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
