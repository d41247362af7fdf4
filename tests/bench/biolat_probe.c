/* biolat_probe: loads the biolatency BPF program the way the privileged helper does
 * (biolatency_load()), maps its two maps read-only as the daemon will, waits while the caller
 * does I/O, and prints what the program counted in that time: per device, per operation and
 * kind, the count, the mean and p50/p99 read from the buckets, and the untracked completions.
 * A development tool: run as root (CAP_SYS_ADMIN), e.g. beside fio.
 *
 *   biolat_probe [SECONDS [MAX_DEVICES]]      (default 10 s, 64 slots) */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "biolatency_load.h"
#include "biolatency_shared.h"

static const uint64_t bounds[BIOLAT_NBOUNDS] = BIOLAT_BOUNDS_NS;
static const char *const op_names[BIOLAT_OPS] = {"read", "write", "flush", "discard"};
static const char *const kind_names[BIOLAT_KINDS] = {"queue", "device"};

static void *map_ro(int fd, size_t size)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *p = mmap(NULL, (size + page - 1) / page * page, PROT_READ, MAP_SHARED, fd, 0);

        return p == MAP_FAILED ? NULL : p;
}

/* The q-quantile in ns, interpolated within its bucket as Prometheus' histogram_quantile. */
static double quantile(const uint64_t *b, uint64_t total, double q)
{
        double rank = q * (double)total, cum = 0;

        for (int i = 0; i < BIOLAT_NBUCKETS; i++) {
                if (cum + (double)b[i] >= rank && b[i] > 0) {
                        if (i == BIOLAT_NBOUNDS)
                                return (double)bounds[BIOLAT_NBOUNDS - 1];
                        double lo = i ? (double)bounds[i - 1] : 0, hi = (double)bounds[i];
                        return lo + (hi - lo) * (rank - cum) / (double)b[i];
                }
                cum += (double)b[i];
        }
        return 0;
}

int main(int argc, char **argv)
{
        unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
        struct biolat_params p = {.max_devices = argc > 2 ? (uint32_t)atoi(argv[2]) : 64,
                                  .ncpu = (uint32_t)libbpf_num_possible_cpus()};
        int fds[BIOLAT_NFDS];
        size_t nfds = 0, nrows;
        char err[512];
        int r = biolatency_load(&p, sizeof(p), fds, &nfds, err, sizeof(err));

        if (r < 0) {
                fprintf(stderr, "biolat_probe: %s (%s)\n", err, strerror(-r));
                return 1;
        }
        nrows = (size_t)p.ncpu * (p.max_devices + 1);
        const uint32_t *devs = map_ro(fds[BIOLAT_FD_DEVS], p.max_devices * sizeof(uint32_t));
        const struct biolat_row *rows = map_ro(fds[BIOLAT_FD_ROWS], nrows * sizeof(*rows));
        struct biolat_row *before = calloc(nrows, sizeof(*rows));
        if (!devs || !rows || !before) {
                fprintf(stderr, "biolat_probe: mmap: %s\n", strerror(errno));
                return 1;
        }
        printf("attached (%u CPUs, %u slots, row %zu bytes); counting for %u s\n", p.ncpu,
               p.max_devices, sizeof(*rows), secs);
        fflush(stdout);
        memcpy(before, rows, nrows * sizeof(*rows));
        sleep(secs);

        for (uint32_t s = 0; s <= p.max_devices; s++) {
                uint32_t dev = s < p.max_devices ? devs[s] : 0;
                uint64_t untracked = 0;
                int printed = 0;

                if (s < p.max_devices && dev == 0)
                        continue;
                for (uint32_t c = 0; c < p.ncpu; c++) {
                        size_t i = (size_t)c * (p.max_devices + 1) + s;
                        untracked += rows[i].untracked - before[i].untracked;
                }
                for (int op = 0; op < BIOLAT_OPS; op++) {
                        for (int k = 0; k < BIOLAT_KINDS; k++) {
                                uint64_t b[BIOLAT_NBUCKETS] = {0}, n = 0, sum = 0;

                                for (uint32_t c = 0; c < p.ncpu; c++) {
                                        size_t i = (size_t)c * (p.max_devices + 1) + s;
                                        const struct biolat_cell *now = &rows[i].cell[op][k];
                                        const struct biolat_cell *was = &before[i].cell[op][k];

                                        for (int j = 0; j < BIOLAT_NBUCKETS; j++) {
                                                uint32_t d = now->buckets[j] - was->buckets[j];
                                                b[j] += d;
                                                n += d;
                                        }
                                        sum += now->sum_ns - was->sum_ns;
                                }
                                if (n == 0)
                                        continue;
                                if (!printed++)
                                        printf("%s %u:%u\n", s < p.max_devices ? "dev" : "overflow",
                                               dev >> 20, dev & 0xfffff);
                                printf("  %-7s %-6s count %10llu  mean %10.1f us  p50 %10.1f us  "
                                       "p99 %10.1f us\n",
                                       op_names[op], kind_names[k], (unsigned long long)n,
                                       (double)sum / (double)n / 1e3, quantile(b, n, 0.5) / 1e3,
                                       quantile(b, n, 0.99) / 1e3);
                        }
                }
                if (untracked) {
                        if (!printed++)
                                printf("%s %u:%u\n", s < p.max_devices ? "dev" : "overflow",
                                       dev >> 20, dev & 0xfffff);
                        printf("  untracked completions %llu\n", (unsigned long long)untracked);
                }
        }
        free(before);
        for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
        return 0;
}
