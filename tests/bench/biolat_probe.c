/* biolat_probe: loads the biolatency BPF program the way the privileged helper does
 * (biolatency_load() in a child process that passes the descriptors over a socket and exits),
 * maps its two maps read-only as the daemon will, waits while the caller does I/O, and prints
 * what the program counted in that time: per device, per operation and kind, the count, the mean
 * and p50/p99 read from the buckets, and the untracked completions. A development tool: run as
 * root (CAP_SYS_ADMIN), e.g. beside fio.
 *
 *   biolat_probe [SECONDS [MAX_DEVICES]]      (default 10 s, 64 slots)
 *   biolat_probe --floor [SECONDS]             the kernel's floor: two programs that return at
 *                                              once, on the same tracepoints, for SECONDS
 *
 * --floor measures what any program on these two tracepoints costs (the tracepoint's call into
 * BPF, and with kernel.bpf_stats_enabled the statistics' own clock reads): it prints both
 * programs' runs and run time in that time (BPF_ENABLE_STATS, held while it waits). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "biolatency_load.h"
#include "biolatency.h"
#include "biolatency_shared.h"

static struct biolat_grid grid; /* the default buckets' grid, as the loader makes it */
static const char *const op_names[BIOLAT_OPS] = {"read", "write", "flush", "discard"};
static const char *const kind_names[BIOLAT_KINDS] = {"queue", "device"};

static void *map_ro(int fd, size_t size)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *p = mmap(NULL, (size + page - 1) / page * page, PROT_READ, MAP_SHARED, fd, 0);

        return p == MAP_FAILED ? NULL : p;
}

/* The q-quantile in ns, interpolated within its bucket as Prometheus' histogram_quantile. */
static double quantile(const uint64_t *b, double q)
{
        return biolatency_quantile(&grid, b, q) * 1e9;
}

static int load_in_child(const struct biolat_params *p, int fds[], size_t *nfds, char *err,
                         size_t errsz)
{
        int sv[2], status;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int mine[BIOLAT_NFDS];
                size_t n = 0;
                char cbuf[CMSG_SPACE(sizeof(mine))] = {0}, msg[512] = "";
                int r = biolatency_load(p, sizeof(*p), mine, &n, msg, sizeof(msg));
                struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
                struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

                if (r == 0) {
                        mh.msg_control = cbuf;
                        mh.msg_controllen = sizeof(cbuf);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(mine));
                        memcpy(CMSG_DATA(c), mine, sizeof(mine));
                }
                _exit(sendmsg(sv[1], &mh, 0) < 0 ? 2 : r < 0 ? 1 : 0);
        }
        close(sv[1]);
        char cbuf[CMSG_SPACE(sizeof(int) * BIOLAT_NFDS)] = {0};
        struct iovec iov = {.iov_base = err, .iov_len = errsz};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        ssize_t got = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC);
        close(sv[0]);
        waitpid(pid, &status, 0);
        struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
        if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int) * BIOLAT_NFDS))
                return -EIO;
        memcpy(fds, CMSG_DATA(c), sizeof(int) * BIOLAT_NFDS);
        *nfds = BIOLAT_NFDS;
        return 0;
}

/* A program that returns 0 at once (r0 = 0; exit), as a BTF tracepoint program of TP
 * (tp_btf), attached; its descriptor in *ret_prog. The link's descriptor, or -errno. */
static int floor_attach(const struct btf *vmlinux, const char *tp, int *ret_prog)
{
        const struct bpf_insn insns[] = {
            {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
            {.code = BPF_JMP | BPF_EXIT},
        };
        char typedef_name[128];
        int id, prog, link;

        snprintf(typedef_name, sizeof(typedef_name), "btf_trace_%s", tp);
        id = btf__find_by_name_kind(vmlinux, typedef_name, BTF_KIND_TYPEDEF);
        if (id < 0)
                return id;
        LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_RAW_TP,
                    .attach_btf_id = (uint32_t)id);
        prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, "floor", "Dual MIT/GPL", insns, 2, &opts);
        if (prog < 0)
                return prog;
        link = bpf_raw_tracepoint_open(NULL, prog);
        if (link < 0) {
                close(prog);
                return link;
        }
        *ret_prog = prog;
        return link;
}

static int floor_main(unsigned secs)
{
        static const char *const tps[2] = {"block_rq_issue", "block_rq_complete"};
        struct bpf_prog_info before[2] = {0}, after[2] = {0};
        int prog[2] = {-1, -1}, link[2] = {-1, -1}, stats;
        struct btf *vmlinux = btf__load_vmlinux_btf();

        if (!vmlinux) {
                fprintf(stderr, "biolat_probe: no kernel BTF: %s\n", strerror(errno));
                return 1;
        }
        for (int i = 0; i < 2; i++) {
                link[i] = floor_attach(vmlinux, tps[i], &prog[i]);
                if (link[i] < 0) {
                        fprintf(stderr, "biolat_probe: %s: %s\n", tps[i], strerror(-link[i]));
                        return 1;
                }
        }
        btf__free(vmlinux);
        stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
        if (stats < 0) {
                fprintf(stderr, "biolat_probe: BPF_ENABLE_STATS: %s\n", strerror(-stats));
                return 1;
        }
        printf("floor: two programs that return at once attached; counting for %u s\n", secs);
        fflush(stdout);
        for (int i = 0; i < 2; i++) {
                uint32_t len = sizeof(before[i]);
                bpf_obj_get_info_by_fd(prog[i], &before[i], &len);
        }
        sleep(secs);
        for (int i = 0; i < 2; i++) {
                uint32_t len = sizeof(after[i]);
                uint64_t runs, ns;

                bpf_obj_get_info_by_fd(prog[i], &after[i], &len);
                runs = after[i].run_cnt - before[i].run_cnt;
                ns = after[i].run_time_ns - before[i].run_time_ns;
                printf("  %-17s runs %10llu  run time %12llu ns  %.1f ns a run\n", tps[i],
                       (unsigned long long)runs, (unsigned long long)ns,
                       runs ? (double)ns / (double)runs : 0.0);
        }
        close(stats);
        for (int i = 0; i < 2; i++) {
                close(link[i]);
                close(prog[i]);
        }
        return 0;
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "--floor") == 0)
                return floor_main(argc > 2 ? (unsigned)atoi(argv[2]) : 10);

        unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
        struct biolat_params p = {.max_devices = argc > 2 ? (uint32_t)atoi(argv[2]) : 64,
                                  .ncpu = (uint32_t)libbpf_num_possible_cpus()};
        struct biolat_config cfg;
        int fds[BIOLAT_NFDS];
        size_t nfds = 0, nrows;
        char err[512] = "";
        int r;

        biolatency_config_default(&cfg, p.max_devices, p.ncpu);
        p.nclassic = (uint32_t)cfg.nclassic;
        memcpy(p.classic_ns, cfg.classic_ns, cfg.nclassic * sizeof(cfg.classic_ns[0]));
        (void)biolatency_grid(cfg.classic_ns, cfg.nclassic, &grid);
        r = load_in_child(&p, fds, &nfds, err, sizeof(err));

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
                        size_t i = (size_t)s * p.ncpu + c;
                        untracked += rows[i].untracked - before[i].untracked;
                }
                for (int op = 0; op < BIOLAT_OPS; op++) {
                        for (int k = 0; k < BIOLAT_KINDS; k++) {
                                uint64_t b[BIOLAT_NBUCKETS] = {0}, n = 0, sum = 0;

                                for (uint32_t c = 0; c < p.ncpu; c++) {
                                        size_t i = (size_t)s * p.ncpu + c;
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
                                       (double)sum / (double)n / 1e3, quantile(b, 0.5) / 1e3,
                                       quantile(b, 0.99) / 1e3);
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
