/* Regression tests: one per bug found by testing and fuzzing (BUG-n); each failed before its fix
 * and fails again if the bug comes back. Each names the function and the behaviour it guards, not
 * lines (they move); "expected / actual" says what the test saw while the bug was there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "devices.h"
#include "diskstats_parse.h"
#include "fsroot.h"
#include "metrics.h"
#include "options.h"

/* BUG-1 mfamily_add_sample() (lib/metrics.c; mfamily_add_raw() then), the extra label pair after
 * the pre-rendered labels: a pair whose value is NULL is skipped (as documented for every label
 * API), but the ',' that joins it to the pre-rendered labels was still written, leaving
 * `device="sda",` with a trailing comma. */
static void test_bug1_add_raw_null_extra_value_leaves_trailing_comma(void **state)
{
        struct mset *s = mset_new();
        struct mfamily *f = mset_family(s, "m", "h", MT_GAUGE);
        (void)state;

        char got[64];

        mfamily_add_sample(s, f,
                           &(struct msample_args){.labels = "device=\"sda\"",
                                                  .extra_name = "quantile",
                                                  .extra_value = NULL,
                                                  .d = 1.0});
        snprintf(got, sizeof got, "%s", f->samples[0].labels);
        mset_free(s);
        /* expected: device="sda"   actual: device="sda", */
        assert_string_equal(got, "device=\"sda\"");
}

/* BUG-2 device_udev_decode() (collectors/devices/devices.c; then udev_decode()), the trim of trailing blanks: it ran back
 * from the end of all the bytes written, but the C string ends at the first NUL (a raw NUL or a
 * decoded \x00), so blanks before that NUL were kept. Found by fuzz_udev
 * (corpus/udev/crash_nul_before_trailing_tab). */
static void test_bug2_udev_decode_nul_defeats_trim(void **state)
{
        char out[DEV_STR_MAX];
        (void)state;

        device_udev_decode("Model\\x20\\x20\\x00\\x20", 21, out, sizeof out);
        /* expected: "Model"   actual: "Model  " */
        assert_string_equal(out, "Model");
}

/* BUG-3 the udev file source's lookup (devsrc_files_new() in collectors/devices/devices.c, its
 * property list filled by collect_prop()): it kept only the first 64 properties of a udev record
 * and silently dropped the rest, so a device whose record has more (dm/LVM/multipath disks carry
 * dozens of DM_* and ID_FS_* properties) lost its serial, WWN or model. This source is the one
 * `diskpulse --once` (and any run with a --path.sysfs or --path.udev.data of its own) uses, and
 * the one the canary's disk identity is read from. */
static void test_bug3_udev_record_with_many_properties(void **state)
{
        char root[] = "/tmp/diskpulse-test-bugs-XXXXXX", path[128];
        struct device_info info;
        struct devsrc *src;
        int r, sysfs_fd, udev_fd;
        FILE *f;
        (void)state;

        assert_non_null(mkdtemp(root));
        snprintf(path, sizeof path, "%s/sys", root);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/udev", root);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/udev/b253:0", root);
        f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < 70; i++)
                fprintf(f, "E:DM_PROPERTY_%d=value\n", i);
        fprintf(f, "E:ID_SERIAL=serial-after-70-properties\n");
        fclose(f);

        snprintf(path, sizeof path, "%s/sys", root);
        sysfs_fd = root_open(path);
        snprintf(path, sizeof path, "%s/udev", root);
        udev_fd = root_open(path);
        assert_true(sysfs_fd >= 0 && udev_fd >= 0);
        src = devsrc_files_new(sysfs_fd, udev_fd);
        r = src->ops->lookup(src, "dm-0", 253, 0, &info);
        devsrc_free(src);
        close(sysfs_fd);
        close(udev_fd);
        assert_int_equal(test_remove_tree(root), 0);

        assert_int_equal(r, 0);
        /* expected: "serial-after-70-properties"   actual: "" */
        assert_string_equal(info.serial, "serial-after-70-properties");
}

/* BUG-4 options_regex() (daemon/options.c, since replaced by lib/namefilter.c), a \d inside a bracket expression after a POSIX
 * class: the translation to POSIX syntax ended the bracket expression at the ']' of [:alpha:], so
 * the later \d became "[0-9]" instead of "0-9": `^[[:alpha:]\d]+$` turned into
 * `^[[:alpha:][0-9]]+$` (a class followed by a literal ']'), which no longer matches "sda1".
 * Whatever compiles the pattern, it must match. */
static void test_bug4_regex_digit_after_posix_class(void **state)
{
        struct namefilter *f = NULL;
        char err[256];
        (void)state;

        assert_int_equal(namefilter_new("^[[:alpha:]\\d]+$", NULL, &f, err, sizeof err), 0);
        /* expected: match   actual: no match */
        bool m = namefilter_match(f, "sda1");
        namefilter_free(f);
        assert_true(m);
}

/* BUG-5 diskstats_parse_line() (then ds_parse_line()) (collectors/diskstats/diskstats_parse.c), a line with more counters than
 * the parser knows: its header promises that they "are accepted and ignored", but the token limit
 * allowed only 8 more than 17: a line with 26 counters (a future kernel) was rejected as malformed
 * and the device disappeared. */
static void test_bug5_diskstats_more_than_25_counters(void **state)
{
        char line[512];
        size_t o;
        struct ds_entry e;
        (void)state;

        o = (size_t)snprintf(line, sizeof line, "8 0 sda");
        for (int k = 1; k <= 26; k++)
                o += (size_t)snprintf(line + o, sizeof line - o, " %d", k);
        /* expected: 0 (17 counters read, the rest ignored)   actual: -EINVAL */
        assert_int_equal(diskstats_parse_line(line, o, &e), 0);
        assert_int_equal(e.v[DS_FLUSH_MS], 17);
}

/* BUG-6 options_regex() (daemon/options.c), the cost of compiling a pattern: operator patterns
 * went to glibc's regcomp() without any bound, and regcomp() duplicates the tree for every
 * stacked repetition, so memory doubled with each extra '+': "^sd" followed by 18 '+' took
 * ~170 MB, 25 took ~20 GB and the daemon (or --check-config, or a SIGHUP reload with a typo) was
 * OOM-killed instead of rejecting the value (libFuzzer's fuzz_config found it: out-of-memory in regcomp.c duplicate_tree).
 * Go's RE2, whose syntax the flag follows, rejects "++" as an invalid nested repetition.
 * Measured in a child process: the peak RSS growth of one options_regex() call. */
static void test_bug6_regex_memory_unbounded(void **state)
{
        char pattern[64] = "^sd";
        int pfd[2];
        long grown_kb = -1;
        int status;
        pid_t pid;
        (void)state;

        memset(pattern + 3, '+', 18);
        pattern[21] = 0;
        assert_int_equal(pipe(pfd), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct rusage before, after;
                char err[256];
                long kb;

                getrusage(RUSAGE_SELF, &before);
                (void)namefilter_check(pattern, err, sizeof err);
                getrusage(RUSAGE_SELF, &after);
                kb = after.ru_maxrss - before.ru_maxrss;
                if (write(pfd[1], &kb, sizeof kb) != sizeof kb)
                        _exit(1);
                _exit(0);
        }
        close(pfd[1]);
        assert_int_equal(read(pfd[0], &grown_kb, sizeof grown_kb), sizeof grown_kb);
        close(pfd[0]);
        /* a child killed on the way (out of memory) has written nothing: the read above fails */
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        print_message("namefilter_check(\"%s\") grew the peak RSS by %ld MB\n", pattern,
                      grown_kb / 1024);
        /* expected: a 21-byte pattern costs well under 64 MB   actual: ~170 MB (x2 per '+') */
        assert_true(grown_kb < 64 * 1024);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bug1_add_raw_null_extra_value_leaves_trailing_comma),
            cmocka_unit_test(test_bug2_udev_decode_nul_defeats_trim),
            cmocka_unit_test(test_bug3_udev_record_with_many_properties),
            cmocka_unit_test(test_bug4_regex_digit_after_posix_class),
            cmocka_unit_test(test_bug5_diskstats_more_than_25_counters),
            cmocka_unit_test(test_bug6_regex_memory_unbounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
