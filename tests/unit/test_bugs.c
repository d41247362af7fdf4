/* Known bugs in the code under test, one failing test each (BUG-n); they pass once fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices.h"
#include "diskstats_parse.h"
#include "fsroot.h"
#include "metrics.h"
#include "options.h"

/* BUG-1 lib/metrics.c:240-247 mfamily_add_raw(): an extra pair whose value is NULL is skipped
 * by mset_labels() (as documented for every label API), but the ',' before it is still written,
 * leaving `device="sda",` with a trailing comma. */
static void test_bug1_add_raw_null_extra_value_leaves_trailing_comma(void **state)
{
        struct mset *s = mset_new();
        struct mfamily *f = mset_family(s, "m", "h", MT_GAUGE);
        (void)state;

        mfamily_add_raw(s, f, "", "device=\"sda\"", "quantile", NULL, false, 0, 1.0);
        /* expected: device="sda"   actual: device="sda", */
        assert_string_equal(f->samples[0].labels, "device=\"sda\"");
        mset_free(s);
}

/* BUG-2 collectors/devices.c:72-79 udev_decode(): the trim runs over all o bytes written, but
 * the C string ends at the first NUL (a raw NUL or a decoded \x00), so spaces before that NUL
 * are kept. Found by fuzz_udev (corpus/udev/crash_nul_before_trailing_tab). */
static void test_bug2_udev_decode_nul_defeats_trim(void **state)
{
        char out[DEV_STR_MAX];
        (void)state;

        udev_decode("Model\\x20\\x20\\x00\\x20", 21, out, sizeof out);
        /* expected: "Model"   actual: "Model  " */
        assert_string_equal(out, "Model");
}

/* BUG-3 collectors/devices.c:141-153 (struct prop_list, collect_prop): the file source keeps only
 * the first 64 properties of a udev record and silently drops the rest, so a device whose record
 * has more (dm/LVM/multipath disks carry dozens of DM_* and ID_FS_* properties) loses its serial,
 * WWN or model. This source is the one `diskpulse --once` uses on a live host (main.c:229-234). */
static void test_bug3_udev_record_with_many_properties(void **state)
{
        char root[] = "/tmp/diskpulse-test-bugs-XXXXXX", path[128], cmd[160];
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
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);

        assert_int_equal(r, 0);
        /* expected: "serial-after-70-properties"   actual: "" */
        assert_string_equal(info.serial, "serial-after-70-properties");
}

/* BUG-4 daemon/options.c:103-114 options_regex(): the bracket tracking ends the bracket
 * expression at the ']' of a POSIX class such as [:alpha:], so a later \d in the same bracket
 * is translated to "[0-9]" instead of "0-9": `^[[:alpha:]\d]+$` becomes
 * `^[[:alpha:][0-9]]+$` (a class followed by a literal ']'), which no longer matches "sda1". */
static void test_bug4_regex_digit_after_posix_class(void **state)
{
        regex_t re;
        char err[128];
        (void)state;

        assert_int_equal(options_regex("^[[:alpha:]\\d]+$", &re, err, sizeof err), 0);
        /* expected: match   actual: no match */
        int m = regexec(&re, "sda1", 0, NULL, 0);
        regfree(&re);
        assert_int_equal(m, 0);
}

/* BUG-5 collectors/diskstats_parse.c:7,58 ds_parse_line(): the header promises that lines with
 * more counters than 17 "are accepted and ignored", but MAX_TOKENS allows only 8 more: a line
 * with 26 counters (a future kernel) is rejected as malformed and the device disappears. */
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
        assert_int_equal(ds_parse_line(line, o, &e), 0);
        assert_int_equal(e.v[DS_FLUSH_MS], 17);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bug1_add_raw_null_extra_value_leaves_trailing_comma),
            cmocka_unit_test(test_bug2_udev_decode_nul_defeats_trim),
            cmocka_unit_test(test_bug3_udev_record_with_many_properties),
            cmocka_unit_test(test_bug4_regex_digit_after_posix_class),
            cmocka_unit_test(test_bug5_diskstats_more_than_25_counters),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
