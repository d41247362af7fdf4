/* Fuzz target of the config file, parsed with --config.file alone and against competing flags. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "listen.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct dp_options *o)
{
        /* what validate() promises */
        if (o->n_listen == 0 || !o->listen || !o->procfs || !o->sysfs || !o->udev_data || !o->dev ||
            !o->state_dir)
                abort();
        if (o->round_interval < 10 * USEC_PER_MSEC || ds_opts(o)->window < o->round_interval)
                abort();
        if (o->max_connections == 0 || o->max_connections > 65535)
                abort();
        for (size_t i = 0; i < o->n_listen; i++) {
                char host[256], port[8];
                if (listen_parse(o->listen[i], host, sizeof host, port, sizeof port) != 0)
                        abort();
        }
        /* at least one canary target, each an absolute path with a valid mode, none twice */
        if (canary_opts(o)->n_paths == 0 || !canary_opts(o)->paths)
                abort();
        for (size_t i = 0; i < canary_opts(o)->n_paths; i++) {
                const char *p = canary_opts(o)->paths[i].path;
                size_t l = strlen(p);
                if (p[0] != '/' || (l > 1 && p[l - 1] == '/') ||
                    !canary_mode_to_string(canary_opts(o)->paths[i].mode))
                        abort();
                for (size_t k = 0; k < i; k++)
                        if (canary_opts(o)->paths[k].mode == canary_opts(o)->paths[i].mode &&
                            strcmp(canary_opts(o)->paths[k].path, p) == 0)
                                abort();
        }
        if (canary_opts(o)->interval < 100 * USEC_PER_MSEC ||
            canary_opts(o)->timeout < 10 * USEC_PER_MSEC || canary_opts(o)->size == 0 ||
            canary_opts(o)->size > CANARY_SIZE_MAX)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char path[] = "/tmp/diskpulse-fuzz-config-XXXXXX";
        char flag[sizeof path + 16];
        char err[512];
        struct dp_options o;
        int fd, r;

        if (size > 64 * 1024)
                return 0;
        fd = mkstemp(path);
        if (fd < 0)
                abort();
        if (size && write(fd, data, size) != (ssize_t)size)
                abort();
        close(fd);
        snprintf(flag, sizeof flag, "--config.file=%s", path);

        for (int variant = 0; variant < 2; variant++) {
                char *argv_plain[] = {(char *)"diskpulse", flag, NULL};
                char *argv_flags[] = {(char *)"diskpulse",
                                      (char *)"--web.listen-address=127.0.0.1:1",
                                      flag,
                                      (char *)"--diskstats.interval=2s",
                                      (char *)"--no-collector.diskstats",
                                      NULL};
                char **argv = variant ? argv_flags : argv_plain;
                int argc = variant ? 5 : 2;

                err[0] = 0;
                memset(&o, 0, sizeof o);
                r = options_parse(argc, argv, &o, err, sizeof err);
                if (r == 0) {
                        check(&o);
                        if (variant == 1 &&
                            (o.n_listen != 1 || o.round_interval != 2 * USEC_PER_SEC ||
                             o.collector[COLLECTOR_DISKSTATS]))
                                abort(); /* flags win */
                        options_free(&o);
                } else {
                        if (r >= 0 || !err[0] || !memchr(err, 0, sizeof err))
                                abort();
                }
        }
        unlink(path);
        return 0;
}
