/* The biolatency collector's privileged part: loads and attaches its BPF program
 * (biolatency.bpf.c) and hands the daemon the maps to read and the links that keep it attached. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A collector_def.privileged function (lib/collector.h): arg is a struct biolat_params
 * (biolatency_shared.h) of len bytes. Loads the program sized by it (max_devices slots, ncpu
 * CPUs, which must be libbpf's count of possible CPUs), attaches it to the block_rq_issue and
 * block_rq_complete tracepoints, and puts in fds, in the order of BIOLAT_FD_*, close-on-exec
 * duplicates of the devs map, the rows map, the issue link and the completion link (*nfds =
 * BIOLAT_NFDS); the caller owns them, and the program stays attached until both links are closed
 * in every process holding them. fds has room for BIOLAT_NFDS. Returns 0, or -errno with a
 * one-line message for an operator in err (nothing left open): -EINVAL bad parameters,
 * -EOPNOTSUPP built without BPF or a kernel without BTF, -EPERM no CAP_BPF/CAP_SYS_ADMIN (or,
 * before 5.11, too low an RLIMIT_MEMLOCK: the message says which), -ENOENT
 * tracepoints missing, or the kernel's error (the verifier's -EACCES/-EINVAL). Needs
 * CAP_SYS_ADMIN (or CAP_BPF with CAP_PERFMON); meant for the privileged helper's short-lived
 * worker. Sets libbpf's print function for the time of the call: not thread-safe. */
int biolatency_load(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz);

/* Why -EPERM may not mean missing capabilities: kernels before 5.11 charge BPF programs and maps
 * to RLIMIT_MEMLOCK (from 5.11 on, to the memory cgroup), whose default is 64 KiB. For a kernel
 * release as uname(2) gives it ("5.10.0-32-amd64") before 5.11 and a limit of limit_bytes
 * (UINT64_MAX: unlimited), writes into buf (n bytes) a clause naming the limit and the fix, and
 * returns true; otherwise returns false (buf empty). A release it cannot read is not "before". */
bool biolatency_memlock_hint(const char *release, uint64_t limit_bytes, char *buf, size_t n);
