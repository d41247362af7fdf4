/* Unit tests of flags and the config file: defaults, forms, every rejected value, precedence. */
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "options.h"
#include "canary_collector.h"
#include "diskstats_collector.h"

/* The diskstats collector's options in o. */
static struct diskstats_options *ds_opts(const struct dp_options *o)
{
        return o->collector_opts[COLLECTOR_DISKSTATS];
}

/* The canary's options in o. */
static struct canary_options *canary_opts(const struct dp_options *o)
{
        return o->collector_opts[COLLECTOR_CANARY];
}

#define MAX_ARGS 32

/* Parses the NULL-terminated argument list (without argv[0]). */
static int parse_args(struct dp_options *o, char *err, size_t errsz, ...)
{
        char *argv[MAX_ARGS];
        int argc = 0;
        va_list ap;

        argv[argc++] = (char *)"diskpulse";
        va_start(ap, errsz);
        for (;;) {
                char *a = va_arg(ap, char *);
                if (!a)
                        break;
                assert_true(argc < MAX_ARGS - 1);
                argv[argc++] = a;
        }
        va_end(ap);
        argv[argc] = NULL;
        err[0] = 0;
        return options_parse(argc, argv, o, err, errsz);
}

#define PARSE(o, err, ...) parse_args((o), (err), sizeof(err), __VA_ARGS__, (char *)NULL)

/* Writes a config file; returns its path in buf (to unlink). */
static const char *write_config(char *buf, size_t size, const char *text)
{
        int fd;

        snprintf(buf, size, "/tmp/diskpulse-test-config-XXXXXX");
        fd = mkstemp(buf);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        return buf;
}

static int setup(void **state)
{
        (void)state;
        unsetenv("STATE_DIRECTORY");
        return 0;
}

static void test_defaults(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        assert_int_equal(parse_args(&o, err, sizeof err, (char *)NULL), 0);
        assert_int_equal(o.n_listen, 1);
        assert_string_equal(o.listen[0], ":9477");
        assert_false(o.systemd_socket);
        assert_int_equal(o.max_connections, 512);
        assert_int_equal(o.max_per_address, 16);
        assert_true(o.header_timeout == 5 * USEC_PER_SEC);
        assert_true(o.request_timeout == 30 * USEC_PER_SEC);
        assert_true(o.idle_timeout == 120 * USEC_PER_SEC);
        assert_int_equal(o.n_allow_from, 0);
        assert_null(o.config_file);
        assert_string_equal(o.procfs, "/proc");
        assert_string_equal(o.sysfs, "/sys");
        assert_string_equal(o.udev_data, "/run/udev/data");
        assert_string_equal(o.dev, "/dev");
        assert_null(o.device_include);
        assert_null(o.device_exclude);
        assert_true(o.round_interval == USEC_PER_SEC);
        assert_true(ds_opts(&o)->window == 10 * USEC_PER_SEC);
        assert_true(o.collector[COLLECTOR_DISKSTATS]);
        assert_string_equal(o.state_dir, "/var/lib/diskpulse");
        assert_int_equal(o.log_level, LOG_LEVEL_INFO);
        assert_int_equal(o.log_format, LOG_FORMAT_LOGFMT);
        assert_false(o.once);
        assert_false(o.check_config);
        assert_false(o.version);
        assert_false(o.help);
        options_free(&o);
}

static void test_state_directory_env(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        /* systemd's StateDirectory= with several entries: the first is ours */
        setenv("STATE_DIRECTORY", "/var/lib/diskpulse-x:/var/lib/other", 1);
        assert_int_equal(PARSE(&o, err, "--once"), 0);
        assert_string_equal(o.state_dir, "/var/lib/diskpulse-x");
        options_free(&o);

        /* not absolute: ignored */
        setenv("STATE_DIRECTORY", "relative/dir", 1);
        assert_int_equal(PARSE(&o, err, "--once"), 0);
        assert_string_equal(o.state_dir, "/var/lib/diskpulse");
        options_free(&o);

        /* the flag wins over the environment */
        setenv("STATE_DIRECTORY", "/var/lib/env", 1);
        assert_int_equal(PARSE(&o, err, "--state.directory=/srv/state"), 0);
        assert_string_equal(o.state_dir, "/srv/state");
        options_free(&o);
        unsetenv("STATE_DIRECTORY");
}

static void test_equals_and_separate_forms(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        assert_int_equal(PARSE(&o, err, "--diskstats.interval=500ms", "--diskstats.window", "5s",
                               "--web.max-connections=8", "--path.procfs", "/tmp/p",
                               "--path.sysfs=/tmp/s", "--path.udev.data", "/tmp/u",
                               "--path.dev=/tmp/d", "--log.level=debug", "--log.format", "json",
                               "--state.directory=/x", "--collector.diskstats.device-include=^sd",
                               "--collector.diskstats.device-exclude", "^loop",
                               "--web.systemd-socket", "--once", "--check-config"),
                         0);
        assert_true(o.round_interval == 500 * USEC_PER_MSEC);
        assert_true(ds_opts(&o)->window == 5 * USEC_PER_SEC);
        assert_int_equal(o.max_connections, 8);
        assert_string_equal(o.procfs, "/tmp/p");
        assert_string_equal(o.sysfs, "/tmp/s");
        assert_string_equal(o.udev_data, "/tmp/u");
        assert_string_equal(o.dev, "/tmp/d");
        assert_int_equal(o.log_level, LOG_LEVEL_DEBUG);
        assert_int_equal(o.log_format, LOG_FORMAT_JSON);
        assert_string_equal(o.state_dir, "/x");
        assert_string_equal(o.device_include, "^sd");
        assert_string_equal(o.device_exclude, "^loop");
        assert_true(o.systemd_socket);
        assert_true(o.once);
        assert_true(o.check_config);
        options_free(&o);

        /* a value may contain '=' and start with "--" when given separately */
        assert_int_equal(PARSE(&o, err, "--path.procfs", "--odd=dir", "--state.directory=a=b"), 0);
        assert_string_equal(o.procfs, "--odd=dir");
        assert_string_equal(o.state_dir, "a=b");
        options_free(&o);

        /* the last one wins for single-valued options */
        assert_int_equal(
            PARSE(&o, err, "--log.level=error", "--log.level=warn", "--web.max-connections=65535"),
            0);
        assert_int_equal(o.log_level, LOG_LEVEL_WARN);
        assert_int_equal(o.max_connections, 65535);
        options_free(&o);
}

static void test_booleans(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        assert_int_equal(PARSE(&o, err, "--no-collector.diskstats"), 0);
        assert_false(o.collector[COLLECTOR_DISKSTATS]);
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--collector.diskstats=false"), 0);
        assert_false(o.collector[COLLECTOR_DISKSTATS]);
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--no-collector.diskstats", "--collector.diskstats"), 0);
        assert_true(o.collector[COLLECTOR_DISKSTATS]);
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--collector.diskstats=off", "--collector.diskstats=yes"),
                         0);
        assert_true(o.collector[COLLECTOR_DISKSTATS]);
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--web.systemd-socket=true", "--once=0"), 0);
        assert_true(o.systemd_socket);
        assert_false(o.once);
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--web.systemd-socket", "--no-web.systemd-socket"), 0);
        assert_false(o.systemd_socket);
        options_free(&o);

        /* --no-NAME=BOOL as the config file's "no-NAME = BOOL": the value's opposite */
        assert_int_equal(PARSE(&o, err, "--no-collector.smart=true"), 0);
        assert_false(o.collector[COLLECTOR_SMART]);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, "--no-collector.smart=false"), 0);
        assert_true(o.collector[COLLECTOR_SMART]);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, "--no-collector.smart", "--no-collector.smart=off"), 0);
        assert_true(o.collector[COLLECTOR_SMART]);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, "--no-web.systemd-socket=no"), 0);
        assert_true(o.systemd_socket);
        options_free(&o);
}

static void test_listen_repeatable(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        assert_int_equal(PARSE(&o, err, "--web.listen-address=127.0.0.1:9100",
                               "--web.listen-address", "[::1]:9100", "--web.listen-address=:0"),
                         0);
        assert_int_equal(o.n_listen, 3);
        assert_string_equal(o.listen[0], "127.0.0.1:9100");
        assert_string_equal(o.listen[1], "[::1]:9100");
        assert_string_equal(o.listen[2], ":0");
        options_free(&o);

        assert_int_equal(PARSE(&o, err, "--web.listen-address=localhost:9477"), 0);
        assert_int_equal(o.n_listen, 1);
        assert_string_equal(o.listen[0], "localhost:9477");
        options_free(&o);
}

static void test_help_version(void **state)
{
        struct dp_options o;
        char err[256];
        (void)state;

        assert_int_equal(PARSE(&o, err, "-h"), 0);
        assert_true(o.help);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, "--help"), 0);
        assert_true(o.help);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, "--version"), 0);
        assert_true(o.version);
        options_free(&o);
}

/* Asserts that the arguments are rejected with a message naming every string in want[]. */
static void expect_bad(const char *const *args, size_t nargs, const char *const *want, size_t nwant)
{
        char *argv[MAX_ARGS];
        struct dp_options o;
        char err[512] = "";
        int r;

        assert_true(nargs + 2 <= MAX_ARGS);
        argv[0] = (char *)"diskpulse";
        for (size_t i = 0; i < nargs; i++)
                argv[i + 1] = (char *)args[i];
        argv[nargs + 1] = NULL;
        memset(&o, 0x5a, sizeof o);
        r = options_parse((int)nargs + 1, argv, &o, err, sizeof err);
        if (r != -EINVAL)
                fail_msg("%s: got %d, want -EINVAL", args[nargs ? nargs - 1 : 0], r);
        if (!err[0])
                fail_msg("%s: no message", args[0]);
        for (size_t i = 0; i < nwant; i++)
                if (!strstr(err, want[i]))
                        fail_msg("message \"%s\" does not contain \"%s\"", err, want[i]);
}

#define BAD(args, ...)                                                                             \
        do {                                                                                       \
                static const char *const a_[] = {args};                                            \
                static const char *const w_[] = {__VA_ARGS__};                                     \
                expect_bad(a_, ARRAY_SIZE(a_), w_, ARRAY_SIZE(w_));                                \
        } while (0)
#define A(...) __VA_ARGS__

static void test_bad_values(void **state)
{
        (void)state;

        BAD(A("--diskstats.interval=10x"), "diskstats.interval", "10x");
        BAD(A("--diskstats.interval", "10x"), "diskstats.interval", "10x");
        BAD(A("--diskstats.interval=0s"), "diskstats.interval", "0s");
        BAD(A("--diskstats.interval=10"), "diskstats.interval", "\"10\"");
        BAD(A("--diskstats.interval="), "diskstats.interval");
        BAD(A("--diskstats.interval=5ms"), "diskstats.interval", "5ms");
        BAD(A("--diskstats.interval=2h"), "diskstats.interval", "2h");
        BAD(A("--diskstats.window=1m1x"), "diskstats.window", "1m1x");
        BAD(A("--diskstats.window=500ms"), "diskstats.window", "500ms");
        BAD(A("--diskstats.interval=3s", "--diskstats.window=2s"), "diskstats.window", "2s",
            "diskstats.interval", "3s");
        BAD(A("--diskstats.interval=10ms", "--diskstats.window=1h"), "diskstats.window", "1h");
        BAD(A("--web.listen-address=nohost"), "web.listen-address", "nohost");
        BAD(A("--web.listen-address=[::1]9477"), "web.listen-address", "[::1]9477");
        BAD(A("--web.listen-address=:70000"), "web.listen-address", ":70000");
        BAD(A("--web.listen-address=::1:9477"), "web.listen-address", "::1:9477");
        BAD(A("--web.listen-address="), "web.listen-address");
        BAD(A("--web.listen-address=:9477", "--web.listen-address=host:"), "web.listen-address",
            "host:");
        BAD(A("--web.max-connections=0"), "web.max-connections", "\"0\"");
        BAD(A("--web.max-connections=65536"), "web.max-connections", "65536");
        BAD(A("--web.max-connections=-1"), "web.max-connections", "-1");
        BAD(A("--web.max-connections=ten"), "web.max-connections", "ten");
        BAD(A("--web.max-connections-per-address=0"), "web.max-connections-per-address", "\"0\"");
        BAD(A("--web.max-connections-per-address=x"), "web.max-connections-per-address", "x");
        BAD(A("--web.read-header-timeout=50ms"), "web.read-header-timeout", "50ms");
        BAD(A("--web.read-header-timeout=2h"), "web.read-header-timeout", "2h");
        BAD(A("--web.read-header-timeout=5"), "web.read-header-timeout", "\"5\"");
        BAD(A("--web.request-timeout=2s"), "web.request-timeout", "2s",
            "web.read-header-timeout 5s");
        BAD(A("--web.read-header-timeout=1m", "--web.request-timeout=30s"), "web.request-timeout",
            "30s", "1m");
        BAD(A("--web.request-timeout=61m"), "web.request-timeout", "61m");
        BAD(A("--web.idle-timeout=0s"), "web.idle-timeout", "0s");
        BAD(A("--web.idle-timeout=10ms"), "web.idle-timeout", "10ms");
        BAD(A("--web.idle-timeout=2h"), "web.idle-timeout", "2h");
        BAD(A("--web.allow-from=10.0.0.1/8"), "web.allow-from", "10.0.0.1/8", "host bits");
        BAD(A("--web.allow-from=10.0.0.0/33"), "web.allow-from", "10.0.0.0/33", "prefix");
        BAD(A("--web.allow-from=2001:db8::/129"), "web.allow-from", "2001:db8::/129");
        BAD(A("--web.allow-from=localhost"), "web.allow-from", "localhost", "not an IPv4");
        BAD(A("--web.allow-from=10.0.0.0/"), "web.allow-from", "10.0.0.0/");
        BAD(A("--web.allow-from=10.0/8"), "web.allow-from", "10.0/8");
        BAD(A("--web.allow-from="), "web.allow-from");
        BAD(A("--web.allow-from=127.0.0.1", "--web.allow-from=::ffff:10.0.0.0/95"),
            "web.allow-from", "::ffff:10.0.0.0/95", "/96");
        BAD(A("--log.level=verbose"), "log.level", "verbose");
        BAD(A("--log.level=INFO"), "log.level", "INFO");
        BAD(A("--log.format=xml"), "log.format", "xml");
        BAD(A("--bogus"), "bogus");
        BAD(A("--bogus=1"), "bogus");
        BAD(A("--web.listen"), "web.listen");
        BAD(A("--collector.diskstats.device-include=("), "collector.diskstats.device-include",
            "\"(\"");
        BAD(A("--collector.diskstats.device-exclude", "a[b"), "collector.diskstats.device-exclude",
            "a[b");
        BAD(A("--diskstats.interval"), "diskstats.interval");
        BAD(A("--web.listen-address"), "web.listen-address");
        BAD(A("--path.procfs="), "path.procfs");
        BAD(A("--once=maybe"), "once", "maybe");
        BAD(A("--canary.path=/srv/db:fsync"), "canary.path", "/srv/db:fsync", "fsync");
        BAD(A("--canary.path=/srv/db:"), "canary.path", "/srv/db:");
        BAD(A("--canary.path=relative/dir"), "canary.path", "relative/dir", "absolute");
        BAD(A("--canary.path=/srv/db", "--canary.path=/srv/db/:fdatasync"), "canary.path",
            "/srv/db/:fdatasync", "twice");
        BAD(A("--canary.path=/srv/db", "--canary.path=/srv/x/../db/."), "canary.path",
            "/srv/x/../db/.", "twice");
        BAD(A("--canary.path="), "canary.path");
        BAD(A("--canary.interval=0s"), "canary.interval", "0s");
        BAD(A("--canary.interval=50ms"), "canary.interval", "50ms");
        BAD(A("--canary.interval=25h"), "canary.interval", "25h");
        BAD(A("--canary.timeout=0s"), "canary.timeout", "0s");
        BAD(A("--canary.timeout=2h"), "canary.timeout", "2h");
        BAD(A("--canary.size=0"), "canary.size", "\"0\"");
        BAD(A("--canary.size=4q"), "canary.size", "4q");
        BAD(A("--canary.size=17M"), "canary.size", "17825792");
        BAD(A("--no-canary.size"), "canary.size");
        BAD(A("--canary.burst=101"), "canary.burst", "101", "0 to 100");
        BAD(A("--canary.burst=65536"), "canary.burst", "65536");
        BAD(A("--canary.burst=-1"), "canary.burst", "-1");
        BAD(A("--canary.burst=three"), "canary.burst", "three");
        BAD(A("--canary.burst="), "canary.burst");
        BAD(A("--collector.diskstats=maybe"), "collector.diskstats", "maybe");
        BAD(A("--no-collector.diskstats=maybe"), "no-collector.diskstats", "maybe");
        BAD(A("--no-collector.diskstats="), "no-collector.diskstats", "expected true or false");
        BAD(A("--no-diskstats.interval"), "diskstats.interval");
        BAD(A("--no-diskstats.interval=1s"), "--no-diskstats.interval", "only on/off");
        BAD(A("--no-once=1"), "once");
        /* the commands are no settings: they have no "no-" form */
        BAD(A("--no-once"), "--no-once", "only on/off flags", "command");
        BAD(A("--no-check-config"), "--no-check-config", "command");
        BAD(A("--no-help"), "--no-help", "command");
        BAD(A("--no-version=false"), "--no-version", "command");
        BAD(A("positional"), "positional");
        BAD(A("-v"), "-v");
        BAD(A("--"), "--");
        BAD(A("--once", "extra"), "extra");
}

static void test_config_file(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        write_config(path, sizeof path,
                     "# diskpulse.conf\n"
                     "\n"
                     "   # an indented comment\n"
                     "  web.max-connections = 12\n"
                     "diskstats.interval=2s\n"
                     "log.level = \"warn\"\n"
                     "path.sysfs = \"/srv/sys dir\"   \n"
                     "--diskstats.window = 20s\n"
                     "collector.diskstats = false\r\n"
                     "\tlog.format\t=\tjson\t\n"
                     "collector.diskstats.device-exclude = ^(loop|ram)\\d+$\n"
                     "state.directory = /srv/state");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_string_equal(o.config_file, path);
        assert_int_equal(o.max_connections, 12);
        assert_true(o.round_interval == 2 * USEC_PER_SEC);
        assert_true(ds_opts(&o)->window == 20 * USEC_PER_SEC);
        assert_int_equal(o.log_level, LOG_LEVEL_WARN);
        assert_int_equal(o.log_format, LOG_FORMAT_JSON);
        assert_string_equal(o.sysfs, "/srv/sys dir");
        assert_false(o.collector[COLLECTOR_DISKSTATS]);
        assert_string_equal(o.device_exclude, "^(loop|ram)\\d+$");
        assert_string_equal(o.state_dir, "/srv/state");
        /* untouched by the file */
        assert_int_equal(o.n_listen, 1);
        assert_string_equal(o.listen[0], ":9477");
        assert_string_equal(o.procfs, "/proc");
        options_free(&o);

        /* flags win over the file, wherever they are on the command line */
        assert_int_equal(PARSE(&o, err, "--diskstats.interval=3s", cli, "--log.level", "error",
                               "--collector.diskstats"),
                         0);
        assert_true(o.round_interval == 3 * USEC_PER_SEC);
        assert_int_equal(o.log_level, LOG_LEVEL_ERROR);
        assert_true(o.collector[COLLECTOR_DISKSTATS]);
        assert_int_equal(o.max_connections, 12);               /* from the file */
        assert_true(ds_opts(&o)->window == 20 * USEC_PER_SEC); /* from the file */
        options_free(&o);

        /* the separate form of --config.file */
        assert_int_equal(PARSE(&o, err, "--config.file", path), 0);
        assert_int_equal(o.max_connections, 12);
        options_free(&o);
        unlink(path);

        /* a name is a flag without its --: the no- form of an on/off flag too */
        write_config(path, sizeof path,
                     "no-collector.smart = true\nno-collector.canary = false\n"
                     "--no-collector.biolatency = yes\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_false(o.collector[COLLECTOR_SMART]);
        assert_true(o.collector[COLLECTOR_CANARY]);
        assert_false(o.collector[COLLECTOR_BIOLATENCY]);
        options_free(&o);
        /* flags still win over the file */
        assert_int_equal(PARSE(&o, err, cli, "--collector.smart"), 0);
        assert_true(o.collector[COLLECTOR_SMART]);
        options_free(&o);
        unlink(path);
}

static void expect_bad_config(const char *text, unsigned line, const char *w1, const char *w2);

static void test_canary_flags(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        /* default: one fdatasync target in the state directory */
        assert_int_equal(PARSE(&o, err, "--state.directory=/srv/dp"), 0);
        assert_int_equal(canary_opts(&o)->n_paths, 1);
        assert_string_equal(canary_opts(&o)->paths[0].path, "/srv/dp");
        assert_int_equal(canary_opts(&o)->paths[0].mode, CANARY_MODE_FDATASYNC);
        assert_true(canary_opts(&o)->interval == 180 * USEC_PER_SEC);
        assert_int_equal(canary_opts(&o)->burst, 16);
        assert_true(canary_opts(&o)->timeout == 30 * USEC_PER_SEC);
        assert_true(canary_opts(&o)->size == 4096);
        assert_true(o.collector[COLLECTOR_CANARY]);
        options_free(&o);

        /* a relative state directory gives an absolute default target */
        assert_int_equal(PARSE(&o, err, "--state.directory=rel"), 0);
        assert_int_equal(canary_opts(&o)->n_paths, 1);
        assert_true(canary_opts(&o)->paths[0].path[0] == '/');
        assert_non_null(strstr(canary_opts(&o)->paths[0].path, "/rel"));
        options_free(&o);

        /* every mode, repeated, trailing slashes dropped (and "." and "..", as the records and an
         * import take a path), a ':' inside a path kept */
        assert_int_equal(PARSE(&o, err, "--canary.path=/a", "--canary.path", "/x/..//b/.:append",
                               "--canary.path=/c:dsync", "--canary.path=/d:direct",
                               "--canary.path=/a:dsync", "--canary.path=/e:x/f",
                               "--canary.interval=1s", "--canary.size=8k", "--canary.timeout=500ms",
                               "--canary.burst=0", "--no-collector.canary"),
                         0);
        assert_int_equal(canary_opts(&o)->n_paths, 6);
        assert_string_equal(canary_opts(&o)->paths[0].path, "/a");
        assert_int_equal(canary_opts(&o)->paths[0].mode, CANARY_MODE_FDATASYNC);
        assert_string_equal(canary_opts(&o)->paths[1].path, "/b");
        assert_int_equal(canary_opts(&o)->paths[1].mode, CANARY_MODE_APPEND);
        assert_int_equal(canary_opts(&o)->paths[2].mode, CANARY_MODE_DSYNC);
        assert_int_equal(canary_opts(&o)->paths[3].mode, CANARY_MODE_DIRECT);
        assert_string_equal(canary_opts(&o)->paths[4].path, "/a");
        assert_int_equal(canary_opts(&o)->paths[4].mode, CANARY_MODE_DSYNC);
        assert_string_equal(canary_opts(&o)->paths[5].path, "/e:x/f");
        assert_int_equal(canary_opts(&o)->paths[5].mode, CANARY_MODE_FDATASYNC);
        assert_true(canary_opts(&o)->interval == USEC_PER_SEC);
        assert_int_equal(canary_opts(&o)->burst, 0);
        assert_true(canary_opts(&o)->size == 8192);
        assert_true(canary_opts(&o)->timeout == 500 * USEC_PER_MSEC);
        assert_false(o.collector[COLLECTOR_CANARY]);
        options_free(&o);

        /* the file's targets replace the default, flags replace the file's */
        write_config(path, sizeof path,
                     "canary.path = /var/lib/pg:append\ncanary.path = \"/srv/wal\"\n"
                     "canary.interval = 2s\ncanary.burst = 100\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_int_equal(canary_opts(&o)->n_paths, 2);
        assert_string_equal(canary_opts(&o)->paths[0].path, "/var/lib/pg");
        assert_int_equal(canary_opts(&o)->paths[0].mode, CANARY_MODE_APPEND);
        assert_string_equal(canary_opts(&o)->paths[1].path, "/srv/wal");
        assert_true(canary_opts(&o)->interval == 2 * USEC_PER_SEC);
        assert_int_equal(canary_opts(&o)->burst, 100);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, cli, "--canary.path=/x:direct"), 0);
        assert_int_equal(canary_opts(&o)->n_paths, 1);
        assert_string_equal(canary_opts(&o)->paths[0].path, "/x");
        assert_int_equal(canary_opts(&o)->paths[0].mode, CANARY_MODE_DIRECT);
        options_free(&o);
        unlink(path);
        expect_bad_config("canary.path = /a:nope\n", 1, "canary.path", "nope");
        /* only on/off options have a no- form, and it wants true or false */
        expect_bad_config("\nno-log.level = warn\n", 2, "no-log.level", "on/off");
        expect_bad_config("no-collector.smart = maybe\n", 1, "no-collector.smart", "true or false");
}

static void test_config_listen(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        write_config(path, sizeof path,
                     "web.listen-address = 127.0.0.1:9100\n"
                     "web.listen-address = \"[::1]:9100\"\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);

        /* the file's addresses replace the default */
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_int_equal(o.n_listen, 2);
        assert_string_equal(o.listen[0], "127.0.0.1:9100");
        assert_string_equal(o.listen[1], "[::1]:9100");
        options_free(&o);

        /* flags replace the file's */
        assert_int_equal(PARSE(&o, err, cli, "--web.listen-address=:9200"), 0);
        assert_int_equal(o.n_listen, 1);
        assert_string_equal(o.listen[0], ":9200");
        options_free(&o);
        unlink(path);
}

static void test_web_limits(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        assert_int_equal(PARSE(&o, err, "--web.max-connections=100",
                               "--web.max-connections-per-address", "4",
                               "--web.read-header-timeout=2s", "--web.request-timeout=10s",
                               "--web.idle-timeout=90s", "--web.allow-from=192.168.0.0/16",
                               "--web.allow-from", "::1", "--web.allow-from=::ffff:10.0.0.0/104"),
                         0);
        assert_int_equal(o.max_connections, 100);
        assert_int_equal(o.max_per_address, 4);
        assert_true(o.header_timeout == 2 * USEC_PER_SEC);
        assert_true(o.request_timeout == 10 * USEC_PER_SEC);
        assert_true(o.idle_timeout == 90 * USEC_PER_SEC);
        assert_int_equal(o.n_allow_from, 3);
        assert_string_equal(o.allow_from[0], "192.168.0.0/16");
        assert_string_equal(o.allow_from[1], "::1");
        assert_string_equal(o.allow_from[2], "::ffff:10.0.0.0/104");
        options_free(&o);

        /* the file's networks; flags replace them */
        write_config(path, sizeof path,
                     "web.allow-from = 10.0.0.0/8\n"
                     "web.allow-from = 172.16.0.0/12\n"
                     "web.max-connections-per-address = 2\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_int_equal(o.n_allow_from, 2);
        assert_string_equal(o.allow_from[1], "172.16.0.0/12");
        assert_int_equal(o.max_per_address, 2);
        options_free(&o);
        assert_int_equal(PARSE(&o, err, cli, "--web.allow-from=127.0.0.1"), 0);
        assert_int_equal(o.n_allow_from, 1);
        assert_string_equal(o.allow_from[0], "127.0.0.1");
        options_free(&o);
        unlink(path);
        expect_bad_config("web.allow-from = 10.1.0.0/8\n", 1, "web.allow-from", "host bits");
}

/* Asserts that a config file is rejected with a message naming path:line and the strings. */
static void expect_bad_config(const char *text, unsigned line, const char *w1, const char *w2)
{
        char path[64], cli[128], err[512], where[96];
        struct dp_options o;
        int r;

        write_config(path, sizeof path, text);
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        r = PARSE(&o, err, cli);
        unlink(path);
        if (r != -EINVAL)
                fail_msg("config \"%s\": got %d, want -EINVAL", text, r);
        snprintf(where, sizeof where, "%s:%u", path, line);
        if (line && !strstr(err, where))
                fail_msg("message \"%s\" does not contain \"%s\"", err, where);
        if (w1 && !strstr(err, w1))
                fail_msg("message \"%s\" does not contain \"%s\"", err, w1);
        if (w2 && !strstr(err, w2))
                fail_msg("message \"%s\" does not contain \"%s\"", err, w2);
}

static void test_config_errors(void **state)
{
        (void)state;

        expect_bad_config("# ok\nweb.max-connections = 3\nno.such.option = 1\n", 3,
                          "no.such.option", NULL);
        /* the no- form of an on/off flag is a name now (test_config_file); of no option, not */
        expect_bad_config("no-collector.nosuch = 1\n", 1, "no-collector.nosuch", NULL);
        expect_bad_config("\n\nonce = true\n", 3, "once", NULL);
        expect_bad_config("check-config = true\n", 1, "check-config", NULL);
        expect_bad_config("version = true\n", 1, "version", NULL);
        expect_bad_config("config.file = /etc/other.conf\n", 1, "config.file", NULL);
        expect_bad_config("diskstats.interval = 10x\n", 1, "diskstats.interval", "10x");
        expect_bad_config("log.level = loud\n", 1, "log.level", "loud");
        expect_bad_config("web.listen-address = nohost\n", 1, "web.listen-address", "nohost");
        expect_bad_config("web.max-connections = 0\n", 1, "web.max-connections", "0");
        expect_bad_config("collector.diskstats.device-include = (\n", 1,
                          "collector.diskstats.device-include", "(");
        expect_bad_config("collector.diskstats = perhaps\n", 1, "collector.diskstats", "perhaps");
        expect_bad_config("no-collector.diskstats = perhaps\n", 1, "no-collector.diskstats",
                          "perhaps");
        expect_bad_config("no-web.max-connections = 3\n", 1, "no-web.max-connections",
                          "only on/off options");
        expect_bad_config("path.procfs = \"\"\n", 1, "path.procfs", NULL);
        expect_bad_config("just some words\n", 1, "just some words", NULL);
        expect_bad_config("a\nb = 1\n", 1, NULL, NULL);
        expect_bad_config("= value\n", 1, NULL, NULL);
        /* a window shorter than the interval, both from the file */
        expect_bad_config("diskstats.interval = 5s\ndiskstats.window = 1s\n", 0, "diskstats.window",
                          "1s");
}

/* A key given twice (last one winning silently before) is refused with both lines; "no-NAME" is
 * NAME; a repeatable option takes several lines; a flag on the command line does not excuse a
 * file that names an option twice. */
static void test_config_repeated(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        expect_bad_config("diskstats.interval = 2s\nlog.level = info\ndiskstats.interval = 5s\n", 3,
                          "diskstats.interval is given twice", "on lines 1 and 3");
        expect_bad_config("# c\ncollector.smart = false\n\nno-collector.smart = true\n", 4,
                          "collector.smart is given twice", "on lines 2 and 4");
        expect_bad_config("no-collector.smart = true\nno-collector.smart = true\n", 2,
                          "collector.smart is given twice", "on lines 1 and 2");
        expect_bad_config("--log.level = debug\nlog.level = debug\n", 2, "log.level is given twice",
                          "on lines 1 and 2");
        expect_bad_config("path.procfs = /a\npath.procfs = /a\n", 2, "path.procfs", "1 and 2");
        expect_bad_config("canary.interval = 1m\ncanary.interval = 2m\n", 2, "canary.interval",
                          "1 and 2");
        expect_bad_config("collector.diskstats.device-exclude = ^a$\n"
                          "collector.diskstats.device-exclude = ^b$\n",
                          2, "collector.diskstats.device-exclude is given twice", "1 and 2");

        write_config(path, sizeof path, "log.level = debug\nlog.level = warn\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli, "--log.level=error"), -EINVAL);
        assert_non_null(strstr(err, "log.level is given twice, on lines 1 and 2"));
        unlink(path);

        /* different switches of the collectors, and repeatable options, are no repetition */
        write_config(path, sizeof path,
                     "collector.smart = false\nno-collector.canary = true\n"
                     "web.listen-address = 127.0.0.1:1\nweb.listen-address = [::1]:1\n"
                     "canary.path = /srv/a\ncanary.path = /srv/b:append\n"
                     "web.allow-from = 10.0.0.0/8\nweb.allow-from = 127.0.0.1\n");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_false(o.collector[COLLECTOR_SMART]);
        assert_false(o.collector[COLLECTOR_CANARY]);
        assert_int_equal(o.n_listen, 2);
        assert_int_equal(o.n_allow_from, 2);
        options_free(&o);
        unlink(path);
}

static void test_config_nul_byte(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        int fd;
        (void)state;

        snprintf(path, sizeof path, "/tmp/diskpulse-test-config-XXXXXX");
        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "log.level = info\n\0x = y\n", 24), 24);
        close(fd);
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), -EINVAL);
        assert_non_null(strstr(err, path));
        unlink(path);
}

static void test_config_unreadable(void **state)
{
        char err[512];
        struct dp_options o;
        (void)state;

        assert_int_equal(PARSE(&o, err, "--config.file=/nonexistent/diskpulse.conf"), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/diskpulse.conf"));

        /* a directory */
        assert_true(PARSE(&o, err, "--config.file=/tmp") < 0);
        assert_non_null(strstr(err, "/tmp"));
}

static void test_config_empty_file(void **state)
{
        char path[64], cli[128], err[512];
        struct dp_options o;
        (void)state;

        write_config(path, sizeof path, "");
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&o, err, cli), 0);
        assert_int_equal(o.n_listen, 1);
        assert_string_equal(o.listen[0], ":9477");
        options_free(&o);
        unlink(path);
}

static bool ere_match(const char *pattern, const char *s)
{
        struct namefilter *f = NULL;
        char err[256];
        bool m;

        assert_int_equal(namefilter_new(pattern, NULL, &f, err, sizeof err), 0);
        m = namefilter_match(f, s);
        namefilter_free(f);
        return m;
}

static void test_regex(void **state)
{
        static const char *const excluded[] = {"sda1",  "sdz15", "nvme0n1p2", "nvme12n3p45",
                                               "loop3", "loop0", "ram0",      "zram1",
                                               "xvda1", "hda2",  "vdb1",      "fd0"};
        static const char *const kept[] = {"sda", "nvme0n1", "dm-0",     "md127",
                                           "vda", "xvda",    "zram",     "loop",
                                           "sr0", "mmcblk0", "nvme0n1p", "sda1x"};
        char err[256];
        (void)state;

        for (size_t i = 0; i < ARRAY_SIZE(excluded); i++)
                if (!ere_match(DEFAULT_DEVICE_EXCLUDE, excluded[i]))
                        fail_msg("default exclude does not match %s", excluded[i]);
        for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                if (ere_match(DEFAULT_DEVICE_EXCLUDE, kept[i]))
                        fail_msg("default exclude matches %s", kept[i]);

        /* \d outside and inside brackets */
        assert_true(ere_match("^a\\d$", "a7"));
        assert_false(ere_match("^a\\d$", "ad"));
        assert_true(ere_match("^[\\dx]+$", "1x2"));
        assert_false(ere_match("^[\\dx]+$", "1y2"));
        assert_true(ere_match("^[^\\d]$", "q"));
        assert_false(ere_match("^[^\\d]$", "5"));
        /* "[]" starts with a literal ] and \d after it still works */
        assert_true(ere_match("^[]\\d]+$", "]9"));
        /* other escapes are kept */
        assert_true(ere_match("^a\\.b$", "a.b"));
        assert_false(ere_match("^a\\.b$", "axb"));
        assert_true(ere_match("^dm-\\d+$", "dm-12"));

        err[0] = 0;
        assert_int_equal(namefilter_check("(", err, sizeof err), -EINVAL);
        assert_true(err[0] != 0);
        assert_int_equal(namefilter_check("a[", err, sizeof err), -EINVAL);
        assert_int_equal(namefilter_check("trailing\\", err, sizeof err), -EINVAL);
}

static void dump(const struct dp_options *o, char *buf, size_t size)
{
        FILE *f = fmemopen(buf, size, "w");
        assert_non_null(f);
        options_dump(o, f);
        fclose(f);
}

static void test_dump_roundtrip(void **state)
{
        char text[4096], again[4096], path[64], cli[128], err[512];
        struct dp_options o, p;
        (void)state;

        assert_int_equal(PARSE(&o, err, "--web.listen-address=127.0.0.1:1", "--web.listen-address",
                               "[::1]:2", "--diskstats.interval=250ms", "--diskstats.window=1m30s",
                               "--no-collector.diskstats", "--log.level=debug",
                               "--collector.diskstats.device-include=^(sd|nvme)",
                               "--web.max-connections=7", "--state.directory=/s",
                               "--web.max-connections-per-address=3",
                               "--web.read-header-timeout=1500ms", "--web.request-timeout=1m",
                               "--web.idle-timeout=5m", "--web.allow-from=10.0.0.0/8",
                               "--web.allow-from=2001:db8::/32"),
                         0);
        memset(text, 0, sizeof text);
        dump(&o, text, sizeof text);
        assert_non_null(strstr(text, "web.listen-address = 127.0.0.1:1\n"
                                     "web.listen-address = [::1]:2\n"));
        assert_non_null(strstr(text, "diskstats.interval = 250ms\n"));
        assert_non_null(strstr(text, "diskstats.window = 90s\n"));
        assert_non_null(strstr(text, "collector.diskstats = false\n"));
        assert_non_null(strstr(text, "log.level = debug\n"));
        assert_non_null(strstr(text, "web.max-connections = 7\n"));
        assert_non_null(strstr(text, "web.max-connections-per-address = 3\n"
                                     "web.read-header-timeout = 1500ms\n"
                                     "web.request-timeout = 1m\n"
                                     "web.idle-timeout = 5m\n"
                                     "web.allow-from = 10.0.0.0/8\n"
                                     "web.allow-from = 2001:db8::/32\n"));

        /* --check-config's output is a config file that gives the same options */
        write_config(path, sizeof path, text);
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&p, err, cli), 0);
        memset(again, 0, sizeof again);
        dump(&p, again, sizeof again);
        assert_string_equal(again, text);
        unlink(path);
        options_free(&o);
        options_free(&p);

        /* the defaults show the default exclude */
        assert_int_equal(parse_args(&o, err, sizeof err, (char *)NULL), 0);
        dump(&o, text, sizeof text);
        assert_non_null(
            strstr(text, "collector.diskstats.device-exclude = " DEFAULT_DEVICE_EXCLUDE "\n"));
        assert_non_null(strstr(text, "web.listen-address = :9477\n"));
        options_free(&o);
}

/* What --help prints, into buf. */
static void help_text(char *buf, size_t size)
{
        FILE *f = fmemopen(buf, size, "w");

        assert_non_null(f);
        options_help(f);
        fclose(f);
}

static void test_help_lists_flags(void **state)
{
        char buf[8192] = {0};
        (void)state;

        help_text(buf, sizeof buf);
        assert_non_null(strstr(buf, "--web.listen-address=[HOST]:PORT"));
        assert_non_null(strstr(buf, "--diskstats.window=DUR"));
        assert_non_null(strstr(buf, "--[no-]collector.diskstats"));
        assert_non_null(strstr(buf, "--config.file=FILE"));
}

/* Every option of the table, one at a time and all together, with a value other than its
 * default that the checks accept. */

#define SAMPLE_MAX 64

struct sample {
        char flag[SAMPLE_MAX][160]; /* "--name=value" */
        size_t n;
};

/* The flags that give d a value other than its default (every collector switched). */
static void sample_of(const struct opt_def *d, struct sample *s)
{
        char v[128], why[256];

        s->n = 0;
        switch (d->type) {
        case OPT_BOOL:
                snprintf(v, sizeof v, "%s", d->def ? "false" : "true");
                break;
        case OPT_STRING:
                if (d->check) {
                        /* a regex, a list of latencies, a list of operations: the first the
                         * check accepts */
                        const char *const candidates[] = {"0.002,0.2", "read,flush"};
                        snprintf(v, sizeof v, "^sample-%s$", d->name);
                        for (size_t i = 0;
                             i < ARRAY_SIZE(candidates) && d->check(v, why, sizeof why) != 0; i++)
                                snprintf(v, sizeof v, "%s", candidates[i]);
                        assert_int_equal(d->check(v, why, sizeof why), 0);
                } else {
                        snprintf(v, sizeof v, "/sample/%s", d->name);
                }
                break;
        case OPT_LIST: {
                static const char *const candidates[] = {"127.0.0.1:1", "10.0.0.0/8"};
                v[0] = 0;
                for (size_t i = 0; i < ARRAY_SIZE(candidates) && !v[0]; i++)
                        if (!d->check || d->check(candidates[i], why, sizeof why) == 0)
                                snprintf(v, sizeof v, "%s", candidates[i]);
                assert_true(v[0] != 0);
                break;
        }
        case OPT_DURATION:
                format_duration(d->min && d->min != d->def ? d->min : d->def * 2, v, sizeof v);
                break;
        case OPT_UINT:
        case OPT_SIZE:
                snprintf(v, sizeof v, "%" PRIu64, d->type == OPT_SIZE ? d->def * 2 : d->def + 1);
                break;
        case OPT_ENUM: {
                size_t n = 0;
                while (d->names[n])
                        n++;
                snprintf(v, sizeof v, "%s", d->names[(d->def + 1) % n]);
                break;
        }
        case OPT_CUSTOM: /* canary.path, the only one */
                snprintf(v, sizeof v, "/sample:append");
                break;
        case OPT_FRAGMENT: /* not an option of options_entry() */
                return;
        case OPT_COLLECTORS:
                for (size_t c = 0; c < COLLECTOR_MAX; c++)
                        snprintf(s->flag[s->n++], sizeof s->flag[0], "--%s.%s=%s", d->name,
                                 collector_defs[c]->name,
                                 collector_defs[c]->default_enabled ? "false" : "true");
                return;
        }
        snprintf(s->flag[s->n++], sizeof s->flag[0], "--%s=%s", d->name, v);
}

static int parse_flags(struct dp_options *o, char *err, size_t errsz, const struct sample *s)
{
        char *argv[SAMPLE_MAX + 2];
        int argc = 0;

        argv[argc++] = (char *)"diskpulse";
        for (size_t i = 0; i < s->n; i++)
                argv[argc++] = (char *)s->flag[i];
        argv[argc] = NULL;
        err[0] = 0;
        return options_parse(argc, argv, o, err, errsz);
}

/* The option a dump line sets: "name" of "name = value". */
static bool line_is(const char *line, const char *name)
{
        size_t l = strlen(name);
        return strncmp(line, name, l) == 0 && strncmp(line + l, " = ", 3) == 0;
}

/* Whether a line of the dump may change with option d: its own, and the value that stands
 * for another one's default (the state directory is the default canary target; the default
 * device exclude applies only without an include). */
static bool line_of(const char *line, const struct opt_def *d)
{
        if (strcmp(d->name, "state.directory") == 0 && line_is(line, "canary.path"))
                return true;
        if (strcmp(d->name, "collector.diskstats.device-include") == 0 &&
            line_is(line, "collector.diskstats.device-exclude"))
                return true;
        if (d->type == OPT_COLLECTORS)
                return strncmp(line, "collector.", 10) == 0 && strstr(line, " = ") &&
                       !strchr(line + 10, '-');
        return line_is(line, d->name);
}

/* Every line of a that is not in b belongs to d. */
static void only_lines_of(const char *a, const char *b, const struct opt_def *d)
{
        char copy[8192], *save = NULL;

        snprintf(copy, sizeof copy, "%s", a);
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char needle[600];
                bool at_start = strncmp(b, line, strlen(line)) == 0 && b[strlen(line)] == '\n';
                snprintf(needle, sizeof needle, "\n%s\n", line);
                if (!at_start && !strstr(b, needle) && !line_of(line, d))
                        fail_msg("%s: the dump's line \"%s\" changed too", d->name, line);
        }
}

static void test_table_sane(void **state)
{
        (void)state;

        assert_true(options_count() > 30);
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                char why[256];

                assert_non_null(d->name);
                for (size_t k = 0; k < i; k++)
                        if (strcmp(options_entry(k)->name, d->name) == 0)
                                fail_msg("%s: twice in the table", d->name);
                if (d->type != OPT_COLLECTORS && (!d->help || !*d->help))
                        fail_msg("%s: no help", d->name);
                if ((d->type == OPT_BOOL || d->type == OPT_COLLECTORS) != (d->arg == NULL))
                        fail_msg("%s: an argument name in --help exactly when it takes a value",
                                 d->name);
                if ((d->type == OPT_LIST || d->type == OPT_CUSTOM) != (d->count_offset != 0))
                        fail_msg("%s: a count exactly for lists", d->name);
                if ((d->reload == OPT_RELOAD) != (d->parts != 0))
                        fail_msg("%s: parts exactly when SIGHUP applies it", d->name);
                if ((d->flags & OPT_CLI_ONLY) && d->reload != OPT_START)
                        fail_msg("%s: given only on the command line, so read at start", d->name);
                if (d->type == OPT_ENUM) {
                        size_t n = 0;
                        assert_non_null(d->names);
                        while (d->names[n])
                                n++;
                        if (d->def >= n)
                                fail_msg("%s: default out of its names", d->name);
                }
                if ((d->min || d->max) && (d->def < d->min || (d->max && d->def > d->max)))
                        fail_msg("%s: default out of its range", d->name);
                if (d->type == OPT_UINT && (d->max == 0 || d->max > UINT_MAX))
                        fail_msg("%s: a number without its upper bound", d->name);
                if (d->check && d->def_str && d->check(d->def_str, why, sizeof why) < 0)
                        fail_msg("%s: default refused by its check: %s", d->name, why);
        }
}

/* For every option: a value other than the default changes its lines of the dump and no
 * other's, and the dump read back as a config file gives the same dump; the defaults' dump
 * too. */
static void test_every_option_roundtrip(void **state)
{
        char defaults[8192], text[8192], again[8192], path[64], cli[128], err[512];
        struct dp_options o, p;
        struct sample s = {.n = 0};
        (void)state;

        assert_int_equal(parse_flags(&o, err, sizeof err, &s), 0);
        memset(defaults, 0, sizeof defaults);
        dump(&o, defaults, sizeof defaults);
        options_free(&o);
        write_config(path, sizeof path, defaults);
        snprintf(cli, sizeof cli, "--config.file=%s", path);
        assert_int_equal(PARSE(&p, err, cli), 0);
        memset(again, 0, sizeof again);
        dump(&p, again, sizeof again);
        options_free(&p);
        unlink(path);
        assert_string_equal(again, defaults);

        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);

                if (d->flags & OPT_CLI_ONLY)
                        continue; /* not in the dump */
                sample_of(d, &s);
                if (parse_flags(&o, err, sizeof err, &s) < 0)
                        fail_msg("%s: %s refused: %s", d->name, s.flag[0], err);
                memset(text, 0, sizeof text);
                dump(&o, text, sizeof text);
                if (strcmp(text, defaults) == 0)
                        fail_msg("%s: %s does not change the dump", d->name, s.flag[0]);
                only_lines_of(text, defaults, d);
                only_lines_of(defaults, text, d);

                write_config(path, sizeof path, text);
                snprintf(cli, sizeof cli, "--config.file=%s", path);
                if (PARSE(&p, err, cli) < 0)
                        fail_msg("%s: the dump read back is refused: %s", d->name, err);
                unlink(path);
                memset(again, 0, sizeof again);
                dump(&p, again, sizeof again);
                assert_string_equal(again, text);
                /* the same values too, but where the dump writes out what "not set" means */
                for (size_t k = 0; k < options_count(); k++)
                        if (!(options_entry(k)->flags & OPT_CLI_ONLY) && !options_entry(k)->unset &&
                            !options_equal(options_entry(k), &o, &p))
                                fail_msg("%s: %s differs after the round trip", d->name,
                                         options_entry(k)->name);
                options_free(&o);
                options_free(&p);
        }
}

/* Every option given on the command line with another value than its default. */
static void all_samples(struct sample *all)
{
        all->n = 0;
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                struct sample s;

                if ((d->flags & OPT_CLI_ONLY) && d->type == OPT_BOOL)
                        continue; /* --once, --help, ...: another run altogether */
                if (d->flags & OPT_CLI_ONLY)
                        continue; /* --config.file, --canary.reset-reference */
                sample_of(d, &s);
                for (size_t k = 0; k < s.n; k++) {
                        assert_true(all->n < SAMPLE_MAX);
                        memcpy(all->flag[all->n++], s.flag[k], sizeof s.flag[k]);
                }
        }
}

static void test_reload_changes_reloadable(void **state)
{
        struct dp_options cur, next, def;
        struct sample s = {.n = 0};
        unsigned parts, want_parts = 0;
        size_t want_restart = 0;
        char err[512];
        (void)state;

        assert_int_equal(parse_flags(&cur, err, sizeof err, &s), 0);
        assert_int_equal(parse_flags(&def, err, sizeof err, &s), 0);
        all_samples(&s);
        if (parse_flags(&next, err, sizeof err, &s) < 0)
                fail_msg("every option changed at once is refused: %s", err);

        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                if (options_equal(d, &def, &next))
                        continue;
                if (d->reload == OPT_RELOAD)
                        want_parts |= d->parts;
                else if (d->reload == OPT_RESTART)
                        want_restart++;
        }
        assert_true(want_restart >= 5);
        assert_int_equal(options_reload(&cur, &next, &parts), want_restart);
        assert_int_equal(parts, want_parts);
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                bool changed = !options_equal(d, &def, &next);

                if (d->reload == OPT_RELOAD && !options_equal(d, &cur, &next))
                        fail_msg("%s: not applied by the reload", d->name);
                if (d->reload != OPT_RELOAD && !options_equal(d, &cur, &def))
                        fail_msg("%s: changed by the reload", d->name);
                if (!(d->flags & OPT_CLI_ONLY) && !changed && strcmp(d->name, "canary.path"))
                        fail_msg("%s: the test did not change it", d->name);
        }
        /* again: nothing left to apply, the same options still want a restart */
        assert_int_equal(options_reload(&cur, &next, &parts), want_restart);
        assert_int_equal(parts, 0);
        assert_int_equal(options_reload(&cur, &cur, NULL), 0);

        /* one at a time: the parts of what changed (a new state directory is also a new
         * default canary target), a restart for an option read at start */
        options_free(&cur);
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                struct dp_options one;

                if (d->flags & OPT_CLI_ONLY)
                        continue;
                sample_of(d, &s);
                assert_int_equal(parse_flags(&one, err, sizeof err, &s), 0);
                assert_int_equal(parse_flags(&cur, err, sizeof err, &(struct sample){.n = 0}), 0);
                want_parts = 0;
                want_restart = 0;
                for (size_t k = 0; k < options_count(); k++) {
                        const struct opt_def *e = options_entry(k);
                        if (options_equal(e, &def, &one))
                                continue;
                        if (e->reload == OPT_RELOAD)
                                want_parts |= e->parts;
                        else if (e->reload == OPT_RESTART)
                                want_restart++;
                }
                if (options_reload(&cur, &one, &parts) != want_restart || parts != want_parts)
                        fail_msg("%s: reload parts %#x, want %#x", d->name, parts, want_parts);
                assert_int_equal(want_restart, d->reload == OPT_RESTART ? 1 : 0);
                if ((parts & d->parts) != d->parts)
                        fail_msg("%s: its parts %#x not all reported", d->name, d->parts);
                options_free(&one);
                options_free(&cur);
        }
        options_free(&next);
        options_free(&def);
}

/* What SIGHUP does, as the manual page and the README say it: a change of the table is a change
 * of the contract. */
static void test_reload_contract(void **state)
{
        static const char *const restart[] = {"web.listen-address", "web.systemd-socket",
                                              "path.procfs",        "path.sysfs",
                                              "path.udev.data",     "state.directory"};
        static const char *const applied[] = {"web.max-connections",
                                              "web.max-connections-per-address",
                                              "web.read-header-timeout",
                                              "web.request-timeout",
                                              "web.idle-timeout",
                                              "web.allow-from",
                                              "web.config.file",
                                              "collector.diskstats.device-include",
                                              "collector.diskstats.device-exclude",
                                              "diskstats.interval",
                                              "diskstats.sampling",
                                              "diskstats.window",
                                              "helper.zygote-grace",
                                              "canary.path",
                                              "canary.interval",
                                              "canary.burst",
                                              "canary.size",
                                              "canary.timeout",
                                              "collector",
                                              "log.level",
                                              "log.format"};
        (void)state;

        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                enum opt_reload want = OPT_START;

                for (size_t k = 0; k < ARRAY_SIZE(restart); k++)
                        if (strcmp(restart[k], d->name) == 0)
                                want = OPT_RESTART;
                for (size_t k = 0; k < ARRAY_SIZE(applied); k++)
                        if (strcmp(applied[k], d->name) == 0)
                                want = OPT_RELOAD;
                if (d->reload != want)
                        fail_msg("%s: reload %d, the documentation says %d", d->name, d->reload,
                                 want);
        }
}

/* The pre-start child's message (prestart.c) carries exactly the options marked OPT_PRESTART. */
static void test_prestart_facts(void **state)
{
        static const char *const carried[] = {"web.listen-address", "web.systemd-socket",
                                              "path.dev", "once", "collector"};
        struct dp_options a, b;
        char err[256];
        size_t n = 0;
        (void)state;

        for (size_t i = 0; i < options_count(); i++) {
                bool in = false;
                for (size_t k = 0; k < ARRAY_SIZE(carried); k++)
                        in = in || strcmp(carried[k], options_entry(i)->name) == 0;
                if (in != !!(options_entry(i)->flags & OPT_PRESTART))
                        fail_msg("%s: OPT_PRESTART and the pre-start message disagree",
                                 options_entry(i)->name);
                n += in;
        }
        assert_int_equal(n, ARRAY_SIZE(carried));

        assert_int_equal(PARSE(&a, err, "--web.listen-address=:1", "--log.level=debug"), 0);
        assert_int_equal(PARSE(&b, err, "--web.listen-address=:1", "--diskstats.interval=2s"), 0);
        assert_true(options_same(&a, &b, OPT_PRESTART));
        assert_false(options_same(&a, &b, 0));
        options_free(&b);
        assert_int_equal(PARSE(&b, err, "--web.listen-address=:1", "--path.dev=/d"), 0);
        assert_false(options_same(&a, &b, OPT_PRESTART));
        options_free(&b);
        assert_int_equal(PARSE(&b, err, "--web.listen-address=:1", "--web.listen-address=:2"), 0);
        assert_false(options_same(&a, &b, OPT_PRESTART));
        options_free(&b);
        /* the collectors: what the helper keeps depends on them */
        assert_int_equal(PARSE(&b, err, "--web.listen-address=:1", "--no-collector.smart"), 0);
        assert_false(options_same(&a, &b, OPT_PRESTART));
        options_free(&b);
        options_free(&a);
}

/* Every registered collector's own flags are options exactly once, in its fragment's order,
 * inside its options struct, and reloaded ones report the collector's part; the daemon's table
 * marks no collector that is not registered. */
static void test_collector_fragments(void **state)
{
        (void)state;

        for (size_t c = 0; c < COLLECTOR_MAX; c++) {
                const struct collector_def *def = collector_defs[c];
                size_t at = 0;

                for (size_t k = 0; k < def->n_options; k++) {
                        const struct opt_def *own = &def->options[k];
                        size_t found = 0;

                        assert_true(own->offset < def->options_size);
                        assert_true(own->type != OPT_COLLECTORS && own->type != OPT_FRAGMENT);
                        for (size_t i = 0; i < options_count(); i++) {
                                const struct opt_def *d = options_entry(i);
                                if (strcmp(d->name, own->name) != 0)
                                        continue;
                                found++;
                                if (k > 0 && i != at + 1)
                                        fail_msg("%s: not next to the fragment's previous flag",
                                                 own->name);
                                at = i;
                                if (d->reload == OPT_RELOAD && !(d->parts & OPT_PART_COLLECTOR(c)))
                                        fail_msg("%s: its collector's part is not reported",
                                                 own->name);
                        }
                        if (found != 1)
                                fail_msg("%s: %zu options of that name", own->name, found);
                }
        }
        /* A collector whose options the table does not mark: its flags come just before the
         * collectors' switches, the unmarked collectors in the registry's order. */
        size_t sw = options_count();
        for (size_t i = 0; i < options_count(); i++)
                if (options_entry(i)->type == OPT_COLLECTORS) {
                        sw = i;
                        break;
                }
        assert_true(sw < options_count());
        for (size_t c = COLLECTOR_MAX; c-- > 0;) {
                const struct collector_def *def = collector_defs[c];
                bool marked = false;

                for (size_t i = 0; i < options_table_size; i++)
                        marked |= options_table[i].type == OPT_FRAGMENT &&
                                  strcmp(options_table[i].name, def->name) == 0;
                if (marked)
                        continue;
                for (size_t k = def->n_options; k-- > 0;) {
                        assert_true(sw > 0);
                        sw--;
                        if (strcmp(options_entry(sw)->name, def->options[k].name) != 0)
                                fail_msg("%s (no mark): not just before the switches",
                                         def->options[k].name);
                }
        }
        for (size_t i = 0; i < options_table_size; i++) {
                bool known = options_table[i].type != OPT_FRAGMENT;
                for (size_t c = 0; c < COLLECTOR_MAX && !known; c++)
                        known = strcmp(collector_defs[c]->name, options_table[i].name) == 0;
                if (!known)
                        fail_msg("the table marks the options of \"%s\", not registered",
                                 options_table[i].name);
        }
}

/* One range per number, the table's: a flag and a config line out of it, below or above, get
 * the same message naming it, and --help shows it. */
static void test_one_range_per_number(void **state)
{
        char help[8192] = {0};
        (void)state;

        help_text(help, sizeof help);
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                char want[128], flag[128], conf[128], line[128];
                const char *nl;
                uint64_t bad[3];
                size_t nbad = 0;

                if (d->type != OPT_UINT)
                        continue;
                snprintf(want, sizeof want, "(expected a number from %" PRIu64 " to %" PRIu64 ")",
                         d->min, d->max);
                bad[nbad++] = d->max + 1;
                bad[nbad++] = d->max * 10 + 7;
                if (d->min > 0)
                        bad[nbad++] = d->min - 1;
                for (size_t k = 0; k < nbad; k++) {
                        const char *args[] = {flag};

                        snprintf(flag, sizeof flag, "--%s=%" PRIu64, d->name, bad[k]);
                        expect_bad(args, 1, (const char *const[]){want}, 1);
                        snprintf(conf, sizeof conf, "# a comment\n%s = %" PRIu64 "\n", d->name,
                                 bad[k]);
                        expect_bad_config(conf, 2, want, d->name);
                }
                snprintf(line, sizeof line, "\n  --%s=%s ", d->name, d->arg);
                nl = strstr(help, line);
                assert_non_null(nl);
                snprintf(want, sizeof want, ", %" PRIu64 " to %" PRIu64 ")\n", d->min, d->max);
                if (!strstr(nl, want) || strstr(nl, want) > strchr(nl + 1, '\n'))
                        fail_msg("--help's line of %s lacks \"%s\"", d->name, want);
        }
}

static void test_help_lists_every_option(void **state)
{
        char buf[8192] = {0};
        (void)state;

        help_text(buf, sizeof buf);
        for (size_t i = 0; i < options_count(); i++) {
                const struct opt_def *d = options_entry(i);
                char want[128];

                if (d->type == OPT_COLLECTORS) {
                        for (size_t c = 0; c < COLLECTOR_MAX; c++) {
                                snprintf(want, sizeof want, "\n  --[no-]%s.%s ", d->name,
                                         collector_defs[c]->name);
                                if (!strstr(buf, want))
                                        fail_msg("--help lacks \"%s\"", want + 1);
                        }
                        continue;
                }
                snprintf(want, sizeof want, "\n  --%s%s%s ", d->name, d->arg ? "=" : "",
                         d->arg ? d->arg : "");
                if (!strstr(buf, want))
                        fail_msg("--help lacks \"%s\"", want + 1);
        }
        /* the defaults come from the table, written as the dump writes them */
        assert_non_null(strstr(buf, "after its start (default 5s, 100ms to 1h)\n"));
        assert_non_null(strstr(buf, "(default 30s, --web.read-header-timeout to 1h)\n"));
        assert_non_null(strstr(buf, "(default 1m, 1s to 1h)\n"));
        assert_non_null(strstr(buf, "(default $STATE_DIRECTORY or /var/lib/diskpulse)\n"));
        assert_non_null(strstr(buf, "warn or error (default info)\n"));
        assert_non_null(strstr(buf, "repeatable (default: all)\n"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_one_range_per_number),
            cmocka_unit_test(test_state_directory_env),
            cmocka_unit_test(test_equals_and_separate_forms),
            cmocka_unit_test(test_booleans),
            cmocka_unit_test(test_listen_repeatable),
            cmocka_unit_test(test_help_version),
            cmocka_unit_test(test_bad_values),
            cmocka_unit_test(test_canary_flags),
            cmocka_unit_test(test_config_file),
            cmocka_unit_test(test_config_listen),
            cmocka_unit_test(test_web_limits),
            cmocka_unit_test(test_config_errors),
            cmocka_unit_test(test_config_repeated),
            cmocka_unit_test(test_config_nul_byte),
            cmocka_unit_test(test_config_unreadable),
            cmocka_unit_test(test_config_empty_file),
            cmocka_unit_test(test_regex),
            cmocka_unit_test(test_dump_roundtrip),
            cmocka_unit_test(test_help_lists_flags),
            cmocka_unit_test(test_table_sane),
            cmocka_unit_test(test_every_option_roundtrip),
            cmocka_unit_test(test_reload_changes_reloadable),
            cmocka_unit_test(test_reload_contract),
            cmocka_unit_test(test_prestart_facts),
            cmocka_unit_test(test_help_lists_every_option),
            cmocka_unit_test(test_collector_fragments),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
