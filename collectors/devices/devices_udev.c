/* Device identity and hotplug events from libudev (libudev(3), udev_monitor(3)). */
#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "devices.h"
#include "util.h"

struct devsrc_udev {
        struct devsrc base;
        struct udev *udev;
        struct udev_monitor *mon;
        int sysfs_fd;
};

static const char *udev_get(const char *key, void *ud)
{
        return udev_device_get_property_value(ud, key);
}

static const char *no_props(const char *key, void *ud)
{
        (void)key;
        (void)ud;
        return NULL;
}

static int udev_lookup(struct devsrc *src, const char *name, unsigned major, unsigned minor,
                       struct device_info *ret)
{
        struct devsrc_udev *u = (struct devsrc_udev *)src;
        struct udev_device *d;

        d = udev_device_new_from_devnum(u->udev, 'b', makedev(major, minor));
        if (!d) {
                /* Not in udev's view (yet): sysfs alone still gives most of it. */
                device_info_fill(ret, u->sysfs_fd, name, no_props, NULL);
                return 0;
        }
        device_info_fill(ret, u->sysfs_fd, name, udev_get, d);
        udev_device_unref(d);
        return 0;
}

/* udev's database is that of the live system (this source is used only there). */
static uint64_t udev_stamp(struct devsrc *src, const char *name, unsigned major, unsigned minor)
{
        struct devsrc_udev *u = (struct devsrc_udev *)src;

        return device_stamp(u->sysfs_fd, AT_FDCWD, "/run/udev/data", name, major, minor);
}

static int udev_monitor_fd_get(struct devsrc *src)
{
        struct devsrc_udev *u = (struct devsrc_udev *)src;
        return u->mon ? udev_monitor_get_fd(u->mon) : -1;
}

static int udev_receive(struct devsrc *src, struct dev_event *ret)
{
        struct devsrc_udev *u = (struct devsrc_udev *)src;
        struct udev_device *d;
        const char *action, *sysname;
        dev_t devnum;

        if (!u->mon)
                return 0;
        d = udev_monitor_receive_device(u->mon);
        if (!d)
                return errno == EAGAIN || errno == EWOULDBLOCK || errno == 0 ? 0 : -errno;
        action = udev_device_get_action(d);
        sysname = udev_device_get_sysname(d);
        devnum = udev_device_get_devnum(d);
        memset(ret, 0, sizeof(*ret));
        strscpy(ret->action, action ? action : "", sizeof ret->action);
        strscpy(ret->name, sysname ? sysname : "", sizeof ret->name);
        ret->major = major(devnum);
        ret->minor = minor(devnum);
        udev_device_unref(d);
        return 1;
}

static void udev_free(struct devsrc *src)
{
        struct devsrc_udev *u = (struct devsrc_udev *)src;

        if (u->mon)
                udev_monitor_unref(u->mon);
        if (u->udev)
                udev_unref(u->udev);
        free(u);
}

static const struct devsrc_ops udev_ops = {
    .lookup = udev_lookup,
    .stamp = udev_stamp,
    .monitor_fd = udev_monitor_fd_get,
    .receive = udev_receive,
    .free = udev_free,
};

struct devsrc *devsrc_udev_new(int sysfs_fd)
{
        struct devsrc_udev *u = xcalloc(1, sizeof(*u));
        /* With udevd running its processed events carry the properties; without it the
         * kernel's own uevents still tell that a device came or went. */
        const char *source = access("/run/udev/control", F_OK) == 0 ? "udev" : "kernel";

        u->base.ops = &udev_ops;
        u->sysfs_fd = sysfs_fd;
        u->udev = udev_new();
        if (!u->udev) {
                free(u);
                return NULL;
        }
        u->mon = udev_monitor_new_from_netlink(u->udev, source);
        if (u->mon) {
                if (udev_monitor_filter_add_match_subsystem_devtype(u->mon, "block", "disk") < 0 ||
                    udev_monitor_enable_receiving(u->mon) < 0) {
                        udev_monitor_unref(u->mon);
                        u->mon = NULL;
                }
        }
        return &u->base;
}
