/* Device identity from udev's database files and sysfs (node_exporter's udev properties; sysfs
 * attributes from Documentation/ABI/stable/sysfs-block). */
#include "devices.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsroot.h"
#include "util.h"

int device_udev_parse(const char *buf, size_t len,
                      void (*cb)(const char *key, size_t klen, const char *value, size_t vlen,
                                 void *userdata),
                      void *userdata)
{
        size_t i = 0;
        int n = 0;
        bool bad = false;

        while (i < len) {
                const char *line = buf + i, *nl = memchr(line, '\n', len - i), *eq;
                size_t l = nl ? (size_t)(nl - line) : len - i;

                i += l + 1;
                if (l == 0)
                        continue;
                if (l < 2 || line[1] != ':') {
                        bad = true;
                        continue;
                }
                if (line[0] != 'E')
                        continue; /* S: symlinks, I: init time, G: tags, ... */
                eq = memchr(line + 2, '=', l - 2);
                if (!eq || eq == line + 2) {
                        bad = true;
                        continue;
                }
                cb(line + 2, (size_t)(eq - line - 2), eq + 1, (size_t)(line + l - eq - 1),
                   userdata);
                n++;
        }
        return bad ? -EINVAL : n;
}

void device_udev_decode(const char *in, size_t len, char *out, size_t size)
{
        size_t o = 0, start = 0;

        if (size == 0)
                return;
        for (size_t i = 0; i < len && o + 1 < size; i++) {
                char c = in[i];
                if (c == '\\' && i + 3 < len && in[i + 1] == 'x' && unhexchar(in[i + 2]) >= 0 &&
                    unhexchar(in[i + 3]) >= 0) {
                        c = (char)(unhexchar(in[i + 2]) * 16 + unhexchar(in[i + 3]));
                        i += 3;
                }
                out[o++] = c;
        }
        out[o] = 0;
        o = strlen(out); /* a raw or decoded NUL ends the string */
        /* trim */
        while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '\t' || out[o - 1] == '\n'))
                out[--o] = 0;
        while (out[start] == ' ' || out[start] == '\t')
                start++;
        if (start)
                memmove(out, out + start, o - start + 1);
}

static void set_decoded(char *dst, size_t size, const char *v)
{
        if (v && !dst[0])
                device_udev_decode(v, strlen(v), dst, size);
}

static void set_attr(char *dst, size_t size, int sysfs_fd, const char *name, const char *attr)
{
        char path[256], buf[DEV_STR_MAX];

        if (dst[0])
                return;
        snprintf(path, sizeof path, "block/%s/%s", name, attr);
        if (read_attr_at(sysfs_fd, path, buf, sizeof buf) > 0)
                device_udev_decode(buf, strlen(buf), dst, size);
}

void device_info_fill(struct device_info *info, int sysfs_fd, const char *name,
                      const char *(*get)(const char *key, void *userdata), void *userdata)
{
        char path[256], buf[32];

        memset(info, 0, sizeof(*info));
        info->rotational = -1;

        set_decoded(info->model, sizeof info->model, get("ID_MODEL_ENC", userdata));
        set_decoded(info->model, sizeof info->model, get("ID_MODEL", userdata));
        set_decoded(info->serial, sizeof info->serial, get("SCSI_IDENT_SERIAL", userdata));
        set_decoded(info->serial, sizeof info->serial, get("ID_SERIAL_SHORT", userdata));
        set_decoded(info->serial, sizeof info->serial, get("ID_SERIAL", userdata));
        set_decoded(info->wwn, sizeof info->wwn, get("ID_WWN", userdata));
        set_decoded(info->path, sizeof info->path, get("ID_PATH", userdata));
        set_decoded(info->revision, sizeof info->revision, get("ID_REVISION", userdata));

        /* Without udev (containers, minimal hosts) the kernel still knows most of it. */
        set_attr(info->model, sizeof info->model, sysfs_fd, name, "device/model");
        set_attr(info->serial, sizeof info->serial, sysfs_fd, name, "device/serial");
        set_attr(info->serial, sizeof info->serial, sysfs_fd, name, "serial");
        set_attr(info->wwn, sizeof info->wwn, sysfs_fd, name, "wwid");
        set_attr(info->wwn, sizeof info->wwn, sysfs_fd, name, "device/wwid");
        set_attr(info->revision, sizeof info->revision, sysfs_fd, name, "device/rev");
        set_attr(info->revision, sizeof info->revision, sysfs_fd, name, "device/firmware_rev");

        snprintf(path, sizeof path, "block/%s/queue/rotational", name);
        if (read_attr_at(sysfs_fd, path, buf, sizeof buf) > 0)
                info->rotational = strcmp(buf, "0") == 0 ? 0 : strcmp(buf, "1") == 0 ? 1 : -1;
        snprintf(path, sizeof path, "block/%s/queue/write_cache", name);
        if (read_attr_at(sysfs_fd, path, buf, sizeof buf) > 0 &&
            (strcmp(buf, "write back") == 0 || strcmp(buf, "write through") == 0))
                strscpy(info->write_cache, buf, sizeof info->write_cache);
        device_sets(sysfs_fd, name, info->sets, sizeof info->sets);
}

#define SETS_MAX 16

/* Adds the md holders listed in dir (an fd, closed here) to names. */
static void add_md_holders(int dfd, char names[][32], size_t *n)
{
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *de;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((de = readdir(d)) && *n < SETS_MAX) {
                bool dup = false;
                if (strncmp(de->d_name, "md", 2) != 0 || strlen(de->d_name) >= 32)
                        continue;
                for (size_t i = 0; i < *n; i++)
                        dup |= strcmp(names[i], de->d_name) == 0;
                if (!dup)
                        strscpy(names[(*n)++], de->d_name, 32);
        }
        closedir(d);
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(a, b);
}

void device_sets(int sysfs_fd, const char *name, char *out, size_t size)
{
        char names[SETS_MAX][32], path[128];
        size_t n = 0, nl = strlen(name), o = 0;
        int dfd;
        DIR *d;
        struct dirent *de;

        if (size)
                out[0] = 0;
        if (sysfs_fd < 0 || snprintf(path, sizeof path, "block/%s", name) >= (int)sizeof path)
                return;
        dfd = openat(sysfs_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        add_md_holders(openat(dfd, "holders", O_RDONLY | O_DIRECTORY | O_CLOEXEC), names, &n);
        /* its partitions: the subdirectories named after it (sda1, nvme0n1p2) */
        d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return;
        }
        while ((de = readdir(d))) {
                char sub[96];
                if (strncmp(de->d_name, name, nl) != 0 || de->d_name[nl] == 0 ||
                    snprintf(sub, sizeof sub, "%s/holders", de->d_name) >= (int)sizeof sub)
                        continue;
                add_md_holders(openat(dirfd(d), sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC), names,
                               &n);
        }
        closedir(d);
        qsort(names, n, sizeof names[0], cmp_name);
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(names[i]);
                if (o + (i ? 1 : 0) + l + 1 > size)
                        break;
                if (i)
                        out[o++] = ',';
                memcpy(out + o, names[i], l + 1);
                o += l;
        }
}

static uint64_t stamp_mix(uint64_t h, uint64_t v)
{
        h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
        return h * 0xBF58476D1CE4E5B9ULL;
}

/* "[dir/]b<major>:<minor>" into buf; false when it does not fit. */
static bool udev_path(char *buf, size_t size, const char *dir, unsigned major, unsigned minor)
{
        char num[24];
        size_t o = 0, dl = dir ? strlen(dir) : 0;
        unsigned v[2] = {major, minor};

        if (dl + 24 > size)
                return false;
        if (dir) {
                memcpy(buf, dir, dl);
                buf[dl] = '/';
                o = dl + 1;
        }
        buf[o++] = 'b';
        for (int k = 0; k < 2; k++) {
                size_t n = 0;
                unsigned x = v[k];
                do {
                        num[n++] = (char)('0' + x % 10);
                        x /= 10;
                } while (x);
                while (n)
                        buf[o++] = num[--n];
                if (k == 0)
                        buf[o++] = ':';
        }
        buf[o] = 0;
        return true;
}

uint64_t device_stamp(int sysfs_fd, int udev_fd, const char *udev_dir, const char *name,
                      unsigned major, unsigned minor)
{
        /* queue/rotational is read with the rest when the device appears and on its events */
        static const char *const attrs[] = {"queue/write_cache"};
        char path[256], buf[64];
        struct stat st;
        uint64_t h = 1;

        /* paths built by hand: this runs for every device every few minutes */
        if (udev_fd != -1 && udev_path(path, sizeof path, udev_dir, major, minor) &&
            fstatat(udev_fd, path, &st, 0) == 0) {
                h = stamp_mix(h, (uint64_t)st.st_ino);
                h = stamp_mix(h, (uint64_t)st.st_size);
                h = stamp_mix(h, (uint64_t)st.st_mtim.tv_sec);
                h = stamp_mix(h, (uint64_t)st.st_mtim.tv_nsec);
        }
        for (size_t i = 0; i < ARRAY_SIZE(attrs); i++) {
                size_t nl = strlen(name), al = strlen(attrs[i]);
                int n = -ENAMETOOLONG;
                if (6 + nl + 1 + al < sizeof path) {
                        memcpy(path, "block/", 6);
                        memcpy(path + 6, name, nl);
                        path[6 + nl] = '/';
                        memcpy(path + 7 + nl, attrs[i], al + 1);
                        n = read_attr_at(sysfs_fd, path, buf, sizeof buf);
                }
                h = stamp_mix(h, (uint64_t)(n < 0 ? n : 0));
                for (int k = 0; k < n; k++)
                        h = stamp_mix(h, (unsigned char)buf[k]);
        }
        {
                /* an array assembled or stopped sends no event for its members */
                char sets[DEV_STR_MAX];
                device_sets(sysfs_fd, name, sets, sizeof sets);
                for (const char *p = sets; *p; p++)
                        h = stamp_mix(h, (unsigned char)*p);
        }
        return h;
}

/* The file-reading source. */

struct devsrc_files {
        struct devsrc base;
        int sysfs_fd, udev_fd;
};

/* Properties of one udev record, pointing into the record's buffer, which collect_prop
 * NUL-terminates in place (the parser has already moved past each line when it reports it). */
struct prop {
        const char *key, *value;
};

struct prop_list {
        struct prop *items;
        size_t n, cap;
};

static void collect_prop(const char *key, size_t klen, const char *value, size_t vlen, void *ud)
{
        struct prop_list *l = ud;

        ((char *)key)[klen] = 0;   /* was '=' */
        ((char *)value)[vlen] = 0; /* was '\n' or the buffer's final NUL */
        GROW(l->items, l->cap, l->n + 1);
        l->items[l->n].key = key;
        l->items[l->n].value = value;
        l->n++;
}

static const char *get_prop(const char *key, void *ud)
{
        struct prop_list *l = ud;

        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->items[i].key, key) == 0)
                        return l->items[i].value;
        return NULL;
}

static int files_lookup(struct devsrc *src, const char *name, unsigned major, unsigned minor,
                        struct device_info *ret)
{
        struct devsrc_files *f = (struct devsrc_files *)src;
        _cleanup_free_ char *buf = NULL;
        struct prop_list props = {.items = NULL, .n = 0, .cap = 0};
        char path[64];
        size_t len;

        snprintf(path, sizeof path, "b%u:%u", major, minor);
        if (f->udev_fd >= 0 && read_regular_at(f->udev_fd, path, 1 << 20, &buf, &len, NULL, 0) == 0)
                (void)device_udev_parse(buf, len, collect_prop, &props);
        device_info_fill(ret, f->sysfs_fd, name, get_prop, &props);
        free(props.items);
        return 0;
}

static uint64_t files_stamp(struct devsrc *src, const char *name, unsigned major, unsigned minor)
{
        struct devsrc_files *f = (struct devsrc_files *)src;

        return device_stamp(f->sysfs_fd, f->udev_fd, NULL, name, major, minor);
}

static int files_monitor_fd(struct devsrc *src)
{
        (void)src;
        return -1;
}

static int files_receive(struct devsrc *src, struct dev_event *ret)
{
        (void)src;
        (void)ret;
        return 0;
}

static void files_free(struct devsrc *src)
{
        free(src);
}

static const struct devsrc_ops files_ops = {
    .lookup = files_lookup,
    .stamp = files_stamp,
    .monitor_fd = files_monitor_fd,
    .receive = files_receive,
    .free = files_free,
};

struct devsrc *devsrc_files_new(int sysfs_fd, int udev_fd)
{
        struct devsrc_files *f = xcalloc(1, sizeof(*f));

        f->base.ops = &files_ops;
        f->sysfs_fd = sysfs_fd;
        f->udev_fd = udev_fd;
        return &f->base;
}

struct devsrc *devsrc_free(struct devsrc *src)
{
        if (src)
                src->ops->free(src);
        return NULL;
}
