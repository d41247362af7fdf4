/* Unit tests of the biolatency loader's checks that need no privilege: the parameters it refuses
 * before touching the kernel, and the build without BPF. Loading itself needs root and a kernel
 * with BTF: tests/bench/biolat_probe.c does that by hand. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "biolatency_load.h"
#include "biolatency_shared.h"

static uint32_t possible_cpus(void)
{
        long n = sysconf(_SC_NPROCESSORS_CONF);

        return n > 0 ? (uint32_t)n : 1;
}

/* Returns what biolatency_load returned; fds and nfds must be left alone on failure. */
static int load(const void *arg, size_t len, char *err, size_t errsz)
{
        int fds[BIOLAT_NFDS] = {-7, -7, -7, -7};
        size_t nfds = 99;
        int r = biolatency_load(arg, len, fds, &nfds, err, errsz);

        assert_true(r < 0);
        assert_int_equal(nfds, 99);
        for (int i = 0; i < BIOLAT_NFDS; i++)
                assert_int_equal(fds[i], -7);
        assert_true(strlen(err) > 0);
        return r;
}

#ifdef DISKPULSE_HAVE_BPF

static void test_bad_params(void **state)
{
        (void)state;
        char err[256];
        struct biolat_params p = {
            .max_devices = 8, .ncpu = possible_cpus(), .nclassic = 2, .classic_ns = {1000, 2000}};

        assert_int_equal(load(&p, sizeof(p) - 1, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "parameters of"));
        p.max_devices = 0;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "max_devices 0"));
        p.max_devices = BIOLAT_MAX_DEVICES + 1;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "max_devices 4097"));
        p.max_devices = BIOLAT_MAX_DEVICES;
        p.ncpu = 0; /* never the possible CPUs' count, whichever way it is counted */
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "possible CPUs"));
        p.ncpu = UINT32_MAX;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        /* classic bounds: none, too many, not increasing */
        p.ncpu = possible_cpus();
        p.nclassic = 0;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "classic bounds"));
        p.nclassic = BIOLAT_MAX_CLASSIC + 1;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        p.nclassic = 2;
        p.classic_ns[1] = 1000;
        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "classic bounds"));
}

#else

static void test_bad_params(void **state)
{
        (void)state;
        char err[256];
        struct biolat_params p = {.max_devices = 8, .ncpu = possible_cpus()};

        assert_int_equal(load(&p, sizeof(p), err, sizeof(err)), -EOPNOTSUPP);
        assert_string_equal(err, "built without BPF support (clang, bpftool or libbpf missing "
                                 "when it was built)");
}

#endif

/* -EPERM on a kernel before 5.11 with a limited RLIMIT_MEMLOCK names the limit, not the
 * capabilities (5.10 refused the program so with its default 64 KiB, the daemon running as root). */
static void test_memlock_hint(void **state)
{
        (void)state;
        char buf[256];

        assert_true(biolatency_memlock_hint("5.10.0-32-amd64", 65536, buf, sizeof buf));
        assert_string_equal(buf, "kernel 5.10.0-32-amd64 (before 5.11) charges BPF memory to "
                                 "RLIMIT_MEMLOCK, 64 KiB here: raise it (LimitMEMLOCK=infinity)");
        /* with the loader's words before it, the whole message fits the collector's 200 bytes */
        assert_true(strlen("loading the BPF program: Operation not permitted: ") + strlen(buf) <
                    200);
        assert_true(biolatency_memlock_hint("4.19.0-27-amd64", 8 << 20, buf, sizeof buf));
        assert_non_null(strstr(buf, "8192 KiB here"));
        /* from 5.11 on, unlimited, or a release it cannot read: no hint, buf empty */
        assert_false(biolatency_memlock_hint("5.11.0", 65536, buf, sizeof buf));
        assert_string_equal(buf, "");
        assert_false(biolatency_memlock_hint("6.1.0-57-amd64", 65536, buf, sizeof buf));
        assert_false(biolatency_memlock_hint("5.10.0", UINT64_MAX, buf, sizeof buf));
        assert_false(biolatency_memlock_hint("weird", 65536, buf, sizeof buf));
        assert_string_equal(buf, "");
        /* a small buffer is cut, never overrun */
        assert_true(biolatency_memlock_hint("5.4.0", 65536, buf, 8));
        assert_int_equal(strlen(buf), 7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bad_params),
            cmocka_unit_test(test_memlock_hint),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
