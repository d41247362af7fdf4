/* Device identity (model, serial, WWN, path, ...) from udev's database and sysfs, behind a small
 * interface: a file-reading source for any root (fixture trees, containers) and a libudev
 * source with a hotplug monitor for the live system. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEV_STR_MAX 128

struct device_info {
        char model[DEV_STR_MAX];
        char serial[DEV_STR_MAX];
        char wwn[DEV_STR_MAX];
        char path[DEV_STR_MAX];
        char revision[DEV_STR_MAX];
        int rotational;         /* 1, 0, or -1 unknown */
        char write_cache[16];   /* "write back", "write through" or "" unknown */
        char sets[DEV_STR_MAX]; /* the md arrays holding the device or one of its partitions,
                                 * sorted, comma-separated ("md0,md1"); "" none */
};

/* A hotplug event: the kernel name of a block device that was added, removed or changed. */
struct dev_event {
        char action[16];
        char name[32];
        unsigned major, minor;
};

struct devsrc;

struct devsrc_ops {
        /* Fills *ret for the block device name (major:minor). Returns 0 (fields it cannot learn
         * are left empty) or -errno. Main thread. */
        int (*lookup)(struct devsrc *src, const char *name, unsigned major, unsigned minor,
                      struct device_info *ret);
        /* A value that changes when the device's identity may have (its udev record, the
         * write cache mode, which can be switched without an event), far cheaper than a lookup:
         * a periodic refresh that finds it unchanged needs none. NULL: not known. Main thread. */
        uint64_t (*stamp)(struct devsrc *src, const char *name, unsigned major, unsigned minor);
        /* A pollable fd that becomes readable on hotplug events, or -1. */
        int (*monitor_fd)(struct devsrc *src);
        /* Reads one event: 1 with *ret filled, 0 when none is pending, -errno. */
        int (*receive)(struct devsrc *src, struct dev_event *ret);
        void (*free)(struct devsrc *src);
};

struct devsrc {
        const struct devsrc_ops *ops;
};

/* A source reading <udev_dir>/b<major>:<minor> and <sysfs>/block/<name>/...; borrows the fds.
 * Never fails. */
struct devsrc *devsrc_files_new(int sysfs_fd, int udev_fd);

/* A source using libudev, with a monitor ("udev" events when udevd runs, kernel uevents
 * otherwise). Borrows sysfs_fd for queue attributes. Returns NULL when libudev cannot start. */
struct devsrc *devsrc_udev_new(int sysfs_fd);

/* Frees any source; accepts NULL; returns NULL. */
struct devsrc *devsrc_free(struct devsrc *src);

/* Pure parser of a udev database file (lines "E:KEY=VALUE"; systemd src/libsystemd/sd-device
 * device-private.c). Calls cb for each property. Returns the number of properties, or -EINVAL
 * when a line is malformed (the good properties are still reported). */
int device_udev_parse(const char *buf, size_t len,
                      void (*cb)(const char *key, size_t klen, const char *value, size_t vlen,
                                 void *userdata),
                      void *userdata);

/* The stamp of both sources: the udev record's inode, size and modification time
 * ("b<major>:<minor>" below udev_fd, or below udev_dir when not NULL), and the contents of
 * queue/write_cache. */
uint64_t device_stamp(int sysfs_fd, int udev_fd, const char *udev_dir, const char *name,
                      unsigned major, unsigned minor);

/* The md arrays holding block device name or one of its partitions (sysfs holders/, Linux 2.6.22+),
 * sorted and comma-separated into out ("" when none or unreadable; a list longer than size is
 * cut at an array name). */
void device_sets(int sysfs_fd, const char *name, char *out, size_t size);

/* Decodes udev's \xNN escapes (ID_MODEL_ENC) and trims spaces; writes at most size bytes. */
void device_udev_decode(const char *in, size_t len, char *out, size_t size);

/* Fills identity from a property getter and sysfs; shared by both sources. get returns NULL
 * when the property is absent. */
void device_info_fill(struct device_info *info, int sysfs_fd, const char *name,
                      const char *(*get)(const char *key, void *userdata), void *userdata);
