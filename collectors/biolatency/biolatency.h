/* The biolatency reader: the two maps the BPF program fills (biolatency_shared.h), mapped
 * read-only, summed over the CPUs into per-(device, operation, kind) histograms with wrap-safe
 * deltas, the devices named from sysfs and filtered, and exported as two histogram families and
 * three small ones. One reader per attachment; the caller serializes every call on it (the
 * daemon's main loop). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biolatency_hist.h"
#include "metrics.h"
#include "namefilter.h"
#include "util.h"

#define BIOLAT_FAMILY_QUEUE     "diskpulse_io_queue_latency_seconds"
#define BIOLAT_FAMILY_DEVICE    "diskpulse_io_device_latency_seconds"
#define BIOLAT_FAMILY_UP        "diskpulse_io_latency_up"
#define BIOLAT_FAMILY_UNTRACKED "diskpulse_io_latency_untracked_total"
#define BIOLAT_FAMILY_UNSLOTTED "diskpulse_io_latency_unslotted_total"

/* A device's name is read again from sysfs this long after it was read (hotplug events make it
 * sooner: biolatency_reader_forget()). */
#define BIOLAT_NAME_REFRESH (300 * USEC_PER_SEC)

struct biolat_reader;

/* What a reader reads and exports: the maps' size (as the loader made them), the classic bounds
 * (the grid is made from them, as the loader made it), and the operations exported per kind. */
struct biolat_config {
        uint32_t max_devices, ncpu;
        size_t nclassic;
        uint64_t classic_ns[BIOLAT_MAX_CLASSIC]; /* strictly increasing, > 0 */
        unsigned ops[BIOLAT_KINDS];              /* per kind, bit 1 << BIOLAT_OP_*: exported */
};
/* All operations of both kinds, the default classic bounds; max_devices and ncpu as given. */
void biolatency_config_default(struct biolat_config *c, uint32_t max_devices, uint32_t ncpu);

/* The name of kernel device dev (major << 20 | minor) into name (size bytes): 0 or -errno. */
typedef int (*biolat_name_fn)(void *ud, uint32_t dev, char *name, size_t size);

/* The bytes of each map: value_size rounded up to 8 per element (the kernel's array map), the
 * whole rounded up to the page size as mmap wants it. */
size_t biolatency_devs_size(uint32_t max_devices);
size_t biolatency_rows_size(uint32_t max_devices, uint32_t ncpu);

/* A reader of the loader's descriptors (BIOLAT_FD_* order): maps devs and rows read-only
 * (PROT_READ, MAP_SHARED) and keeps the two link descriptors open, which keeps the programs
 * attached. On 0 *ret owns fds (biolatency_reader_free closes them); on -errno (-EINVAL for
 * max_devices, ncpu or classic bounds out of range, mmap's error: a map smaller than this layout)
 * fds are still the caller's. */
int biolatency_reader_open(const int fds[BIOLAT_NFDS], const struct biolat_config *cfg,
                           struct biolat_reader **ret);
/* A reader of plain memory laid out as the maps are (tests, fuzzing): devs of
 * biolatency_devs_size() bytes and rows of biolatency_rows_size() bytes, borrowed, outliving the
 * reader. NULL when cfg is out of range. */
struct biolat_reader *biolatency_reader_init_mem(const void *devs, const void *rows,
                                                 const struct biolat_config *cfg);
/* The bytes of the maps mapped now: the slots' table, the overflow slot's rows and the rows of
 * each slot in use (the kernel maps a BPF map's pages when they are mapped, so they count in the
 * process's memory: the slots not in use are not mapped). 0 for a reader of plain memory. */
size_t biolatency_reader_mapped(const struct biolat_reader *r);
/* The reader's grid (the program's buckets). */
const struct biolat_grid *biolatency_reader_grid(const struct biolat_reader *r);
/* Unmaps, closes, frees (NULL accepted); returns NULL. */
struct biolat_reader *biolatency_reader_free(struct biolat_reader *r);

/* One reading: every slot that has a device is summed over the CPUs into its totals (the
 * difference from the last reading, modulo 2^32 per count and 2^64 per sum); its name is
 * looked up by name_fn when the device is new to the slot, was forgotten, failed last time, or
 * was read BIOLAT_NAME_REFRESH before now. A device whose name differs from the one it had
 * starts from zero; one whose name cannot be read is not exported until it can. filter (NULL:
 * all) decides which named devices are exported. */
void biolatency_reader_collect(struct biolat_reader *r, biolat_name_fn name_fn, void *ud,
                               const struct namefilter *filter, usec_t now);
/* The same, names read from sysfs below sysfs_fd (biolatency_sysfs_name). */
void biolatency_reader_collect_sysfs(struct biolat_reader *r, int sysfs_fd,
                                     const struct namefilter *filter, usec_t now);
/* The name of dev from the DEVNAME line of dev/block/MAJ:MIN/uevent below sysfs_fd
 * (Documentation/ABI/testing/sysfs-dev): 0, or -errno of the read, -ENOENT / -EINVAL of
 * biolatency_parse_devname(). */
int biolatency_sysfs_name(int sysfs_fd, uint32_t dev, char *name, size_t size);

/* Makes the next collect read the name of the device called device again (a hotplug event);
 * NULL: every device. */
void biolatency_reader_forget(struct biolat_reader *r, const char *device);

/* The devices exported now (named and passing the filter); 0 for NULL. */
size_t biolatency_reader_devices(const struct biolat_reader *r);

/* The totals of one exported (device, op, kind): counts (grid n + 1, not cumulative) and
 * the sum in nanoseconds. NULL when no device of that name is exported. */
const uint64_t *biolatency_reader_counts(const struct biolat_reader *r, const char *device,
                                         unsigned op, unsigned kind, uint64_t *ret_sum_ns);
/* Completions with no issue on record, over every row; I/Os of devices that found no free slot
 * (the overflow row's device-time counts: one per completed I/O). */
uint64_t biolatency_reader_untracked(const struct biolat_reader *r);
uint64_t biolatency_reader_unslotted(const struct biolat_reader *r);

/* Fills out: diskpulse_io_latency_up (1 with a reader, 0 for NULL); with a reader the two
 * histogram families (labels device and op, devices in name order, the operations the config
 * exports of each kind, a (device, op) with no count left out; cumulative _bucket at the classic
 * bounds with le in seconds, _sum in seconds, _count; and each series' native histogram, schema
 * BIOLAT_NATIVE_SCHEMA, for the protobuf exposition) and the untracked and unslotted counters. */
void biolatency_export(const struct biolat_reader *r, struct mset *out);
