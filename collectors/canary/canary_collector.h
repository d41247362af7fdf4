/* The canary collector behind the collector interface (lib/collector.h). */
#pragma once

#include <stdint.h>

#include "canary.h"
#include "canary_probe.h"
#include "collector.h"

/* One --canary.path target. */
struct canary_path_option {
        char *path; /* absolute */
        enum canary_mode mode;
};

/* Its options, the --canary.* flags: the storage of its option entries. */
struct canary_options {
        struct canary_path_option *paths; /* --canary.path, repeatable; none given: state dir */
        size_t n_paths;
        usec_t interval, timeout;
        usec_t baseline_period; /* tests and evaluation only: the baseline's hour */
        unsigned burst;         /* 0 .. CANARY_BURST_MAX */
        uint64_t size;
        /* The one-shot commands (canary_command.c), NULL: not given. */
        char *reset_reference; /* --canary.reset-reference: the target's path */
        char *export_disk;     /* --canary.export-records: a disk (name or identity) */
        char *import_file;     /* --canary.import-records: a file, "-" for stdin */
        char *import_path;     /* --canary.import-path: the imported records' path */
};

/* Its settings (the reconfigure argument) are a struct canary_config. A new collector, its
 * prober threads not started yet (never fails). */
struct collector *canary_collector_new(const struct canary_config *cfg);

/* The baselines' disk key (canary_disk_id()) of a kernel device from the identity facts ud (a
 * struct collector_disk_ids): 0, or -errno as its lookup. */
int canary_collector_disk_id(void *ud, const char *device, char *buf, size_t size);

/* Its one-shot commands (its definition's commanded and command): the state file's edits and
 * export, instead of the daemon. */
bool canary_commanded(const void *opts);
int canary_command(const void *opts, const struct collector_command_env *env);

/* Its definition, for the daemon's registry. */
extern const struct collector_def canary_collector_def;

/* Its part of the landing page's summary from the set it exported (its summarize function, named
 * for tests): pure, any thread. */
void canary_summarize(const struct mset *set, struct summary *sum);
