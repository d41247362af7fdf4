/* Loads and attaches the biolatency BPF program through its skeleton (bpf.cmake generates
 * biolatency.skel.h), in the privileged helper's worker; see biolatency_load.h. */
#include "biolatency_load.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "biolatency_shared.h"

bool biolatency_memlock_hint(const char *release, uint64_t limit_bytes, char *buf, size_t n)
{
        unsigned major, minor;

        if (n)
                buf[0] = 0;
        if (limit_bytes == UINT64_MAX || sscanf(release, "%u.%u", &major, &minor) != 2 ||
            major > 5 || (major == 5 && minor >= 11))
                return false;
        /* short enough for the collector's 200-byte message with the step's words before it */
        snprintf(buf, n,
                 "kernel %s (before 5.11) charges BPF memory to RLIMIT_MEMLOCK, %llu KiB here: "
                 "raise it (LimitMEMLOCK=infinity)",
                 release, (unsigned long long)(limit_bytes / 1024));
        return true;
}

#ifndef DISKPULSE_HAVE_BPF

int biolatency_load(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)arg;
        (void)len;
        (void)fds;
        (void)nfds;
        snprintf(err, errsz,
                 "built without BPF support (clang, bpftool or libbpf missing when it was built)");
        return -EOPNOTSUPP;
}

#else

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "biolatency_hist.h"

/* Generated in the build directory (bpf.cmake), not a file of the tree. */
#include <biolatency.skel.h>

/* The kernel's BTF, which the program's CO-RE relocations and tp_btf attachment need. */
#define BIOLAT_VMLINUX_BTF             "/sys/kernel/btf/vmlinux"
/* QUEUE_FLAG_STATS where it is a #define, not in BTF (include/linux/blkdev.h, 6.1). */
#define BIOLAT_QUEUE_FLAG_STATS_DEFINE 20u
/* In-flight sets (4 requests each): ample for the requests in flight on a host at once. */
#define BIOLAT_INFLIGHT_SETS           8192u

/* What libbpf said last, for the message: its last warning line of its own ("libbpf: ...", not
 * the skeleton's summary) and the verifier's reason for a rejection (the log's last line before
 * its statistics). libbpf's output goes nowhere else: the worker's stderr is the daemon's log. */
static char biolat_libbpf_last[256], biolat_verifier_last[256];

static void biolat_keep(char *dst, size_t dstsz, const char *line, size_t n)
{
        if (n >= dstsz)
                n = dstsz - 1;
        memcpy(dst, line, n);
        dst[n] = '\0';
}

__attribute__((format(printf, 2, 0))) static int biolat_libbpf_print(enum libbpf_print_level level,
                                                                     const char *fmt, va_list ap)
{
        char *text; /* one message: libbpf passes the verifier's log whole (megabytes, maybe) */
        const char *log, *end, *line, *next;
        va_list again;
        int len;

        if (level != LIBBPF_WARN)
                return 0;
        va_copy(again, ap);
        len = vsnprintf(NULL, 0, fmt, ap);
        text = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (text)
                vsnprintf(text, (size_t)len + 1, fmt, again);
        va_end(again);
        if (!text)
                return 0;
        log = strstr(text, "-- BEGIN PROG LOAD LOG --\n");
        if (!log) {
                if (strncmp(text, "libbpf: ", 8) == 0 &&
                    !strstr(text, "failed to load BPF skeleton"))
                        biolat_keep(biolat_libbpf_last, sizeof(biolat_libbpf_last), text,
                                    strcspn(text, "\n"));
                free(text);
                return 0;
        }
        log += strlen("-- BEGIN PROG LOAD LOG --\n");
        end = strstr(log, "-- END PROG LOAD LOG --");
        if (!end)
                end = log + strlen(log);
        /* The reason is the last line before the statistics ("processed N insns ..."). */
        for (line = log; line < end && *line != '\0'; line = next) {
                size_t n = strcspn(line, "\n");

                next = line[n] != '\0' ? line + n + 1 : line + n;
                if (strncmp(line, "processed ", 10) == 0)
                        break;
                if (n != 0)
                        biolat_keep(biolat_verifier_last, sizeof(biolat_verifier_last), line, n);
        }
        free(text);
        return 0;
}

/* The value of the enumerator NAME in the kernel's BTF (any enum, named or not); -ENOENT: none
 * (the constant is a #define there, as QUEUE_FLAG_STATS in 6.1). */
static int biolat_btf_enumerator(const struct btf *btf, const char *name, uint32_t *ret_value)
{
        uint32_t n = btf__type_cnt(btf);

        for (uint32_t id = 1; id < n; id++) {
                const struct btf_type *t = btf__type_by_id(btf, id);

                if (!t || !btf_is_enum(t))
                        continue;
                const struct btf_enum *e = btf_enum(t);

                for (uint16_t i = 0; i < btf_vlen(t); i++) {
                        const char *s = btf__name_by_offset(btf, e[i].name_off);

                        if (s && strcmp(s, name) == 0) {
                                *ret_value = (uint32_t)e[i].val;
                                return 0;
                        }
                }
        }
        return -ENOENT;
}

static void biolat_close_fds(int fds[], size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* biolatency_memlock_hint() for this kernel and this process's limit. */
static bool biolat_memlock_limited(char *buf, size_t n)
{
        struct utsname u;
        struct rlimit rl;

        if (uname(&u) < 0 || getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
                return false;
        return biolatency_memlock_hint(
            u.release, rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur, buf, n);
}

/* The message and -errno of a failed step, from libbpf's r (-errno) and what it said. */
static int biolat_fail(int r, const char *step, char *err, size_t errsz)
{
        char hint[192];

        if (r >= 0)
                r = -EIO;
        if (r == -EPERM && biolat_memlock_limited(hint, sizeof hint)) {
                snprintf(err, errsz, "%s: %s: %s", step, strerror(-r), hint);
        } else if (r == -EPERM) {
                snprintf(err, errsz,
                         "%s: needs CAP_BPF/CAP_SYS_ADMIN (or CAP_PERFMON) to load and attach a "
                         "BPF program: %s",
                         step, strerror(-r));
        } else if (r == -ESRCH || r == -ENOENT) {
                /* libbpf: "failed to find kernel BTF type ID of 'block_rq_issue': -3" */
                snprintf(err, errsz,
                         "%s: the kernel has no block_rq_issue/block_rq_complete BTF tracepoints "
                         "(%s)",
                         step, biolat_libbpf_last[0] ? biolat_libbpf_last : strerror(-r));
                r = -ENOENT;
        } else if (biolat_verifier_last[0]) {
                snprintf(err, errsz, "%s: the kernel's verifier refused it (%s): %s", step,
                         strerror(-r), biolat_verifier_last);
        } else {
                snprintf(err, errsz, "%s: %s (%s)", step, strerror(-r),
                         biolat_libbpf_last[0] ? biolat_libbpf_last : "libbpf said nothing more");
        }
        return r;
}

int biolatency_load(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        struct biolat_params p;
        struct biolat_grid grid;
        struct biolatency_bpf *skel = NULL;
        struct bpf_link *issue = NULL, *done = NULL;
        libbpf_print_fn_t prev;
        int out[BIOLAT_NFDS] = {-1, -1, -1, -1};
        int r, possible;

        if (len != sizeof(p)) {
                snprintf(err, errsz, "parameters of %zu bytes, not %zu", len, sizeof(p));
                return -EINVAL;
        }
        memcpy(&p, arg, sizeof(p));
        if (p.max_devices < 1 || p.max_devices > BIOLAT_MAX_DEVICES) {
                snprintf(err, errsz, "max_devices %u is not within 1..%d", p.max_devices,
                         BIOLAT_MAX_DEVICES);
                return -EINVAL;
        }
        if (p.pad != 0 || biolatency_grid(p.classic_ns, p.nclassic, &grid) < 0) {
                snprintf(err, errsz, "%u classic bounds that are not 1 to %d increasing ones",
                         p.nclassic, BIOLAT_MAX_CLASSIC);
                return -EINVAL;
        }
        possible = libbpf_num_possible_cpus();
        if (possible <= 0 || p.ncpu != (uint32_t)possible) {
                snprintf(err, errsz, "ncpu %u, but the kernel has %d possible CPUs", p.ncpu,
                         possible);
                return -EINVAL;
        }
        if (access(BIOLAT_VMLINUX_BTF, R_OK) != 0) {
                snprintf(err, errsz,
                         "kernel has no BTF (%s: %s; needs CONFIG_DEBUG_INFO_BTF, kernel 5.5+)",
                         BIOLAT_VMLINUX_BTF, strerror(errno));
                return -EOPNOTSUPP;
        }

        biolat_libbpf_last[0] = biolat_verifier_last[0] = '\0';
        prev = libbpf_set_print(biolat_libbpf_print);
        /* Readable is not enough: an empty or damaged file would be reported by the load as
         * missing tracepoints. Parsed once more here (tens of ms, once a start) to say so. */
        struct btf *vmlinux = btf__load_vmlinux_btf();
        if (!vmlinux) {
                r = -errno;
                snprintf(err, errsz, "kernel BTF cannot be read (%s: %s)", BIOLAT_VMLINUX_BTF,
                         biolat_libbpf_last[0] ? biolat_libbpf_last : strerror(-r));
                r = -EOPNOTSUPP;
                goto out;
        }
        /* The bit of QUEUE_FLAG_STATS, for the kernel's own issue stamps (biolatency.bpf.c): an
         * enumerator in the kernel's BTF where the flags are an enum (newer kernels: 7 in 6.18),
         * else the #define of include/linux/blkdev.h, 20 in the kernels that had one (6.1
         * included); not a bit of a 64-bit word: the program keeps every issue itself. */
        uint32_t stats_bit = BIOLAT_QUEUE_FLAG_STATS_DEFINE;

        if (biolat_btf_enumerator(vmlinux, "QUEUE_FLAG_STATS", &stats_bit) == 0 && stats_bit >= 64)
                stats_bit = 64;
        btf__free(vmlinux);
        skel = biolatency_bpf__open();
        if (!skel) {
                r = biolat_fail(-errno, "opening the BPF program", err, errsz);
                goto out;
        }
        skel->rodata->ncpu = p.ncpu;
        skel->rodata->max_devices = p.max_devices;
        skel->rodata->inflight_mask = BIOLAT_INFLIGHT_SETS - 1;
        skel->rodata->stats_bit = stats_bit;
        skel->rodata->nbounds = (uint32_t)grid.n;
        memcpy((void *)skel->rodata->bounds_ns, grid.ns, grid.n * sizeof(grid.ns[0]));
        /* devs keeps its one element of BIOLAT_MAX_DEVICES slots (biolatency.bpf.c). */
        r = bpf_map__set_max_entries(skel->maps.rows, p.ncpu * (p.max_devices + 1));
        if (r == 0)
                r = bpf_map__set_max_entries(skel->maps.inflight, BIOLAT_INFLIGHT_SETS);
        if (r < 0) {
                r = biolat_fail(r, "sizing the BPF maps", err, errsz);
                goto out;
        }
        r = biolatency_bpf__load(skel);
        if (r < 0) {
                r = biolat_fail(r, "loading the BPF program", err, errsz);
                goto out;
        }
        /* The completion first: a request issued in between would hold its in-flight way until
         * its structure is issued again. */
        done = bpf_program__attach(skel->progs.biolat_done);
        if (!done) {
                r = biolat_fail(-errno, "attaching to block_rq_complete", err, errsz);
                goto out;
        }
        issue = bpf_program__attach(skel->progs.biolat_issue);
        if (!issue) {
                r = biolat_fail(-errno, "attaching to block_rq_issue", err, errsz);
                goto out;
        }
        const int mine[BIOLAT_NFDS] = {
            [BIOLAT_FD_DEVS] = bpf_map__fd(skel->maps.devs),
            [BIOLAT_FD_ROWS] = bpf_map__fd(skel->maps.rows),
            [BIOLAT_FD_LINK_ISSUE] = bpf_link__fd(issue),
            [BIOLAT_FD_LINK_DONE] = bpf_link__fd(done),
        };
        for (size_t i = 0; i < BIOLAT_NFDS; i++) {
                out[i] = fcntl(mine[i], F_DUPFD_CLOEXEC, 3);
                if (out[i] < 0) {
                        r = -errno;
                        snprintf(err, errsz, "duplicating the BPF descriptors: %s",
                                 strerror(errno));
                        goto out;
                }
        }
        memcpy(fds, out, sizeof(out));
        *nfds = BIOLAT_NFDS;
        for (size_t i = 0; i < BIOLAT_NFDS; i++)
                out[i] = -1;
        r = 0;
out:
        biolat_close_fds(out, BIOLAT_NFDS);
        /* Closes the skeleton's own descriptors; the program stays attached through fds. */
        bpf_link__destroy(issue);
        bpf_link__destroy(done);
        biolatency_bpf__destroy(skel);
        libbpf_set_print(prev);
        return r;
}

#endif
