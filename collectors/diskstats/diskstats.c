/* The diskstats collector (node_exporter collector/diskstats_linux.go for names and meanings,
 * sysstat iostat -x for the derived gauges).
 *
 * Cost: the file is read in chunks into one buffer; a line that is byte for byte what the same
 * device printed last round (by a keyed 64-bit hash and its length) is not parsed again, the
 * others are parsed without allocating. Each device
 * keeps its latest counters and, for the window of the derived gauges, only the samples at which
 * the counters those gauges use changed (an idle device keeps one); the time of every round is
 * kept once for all devices. The exported set is a table: one row per device, whose label values
 * (device name and identity) are shared with the previous round's set as long as no device came,
 * went or changed its identity, and whose values are the previous round's own table as long as no
 * counter changed. */
#include "diskstats.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "diskstats_parse.h"
#include "fsroot.h"
#include "iostat.h"
#include "log.h"

#define DISKSTATS_MAX_BYTES (64u << 20)
#define READ_CHUNK          (64u * 1024)

/* The counters the derived gauges read, kept for every change within the window; the others
 * are kept for the latest sample only. */
static const enum ds_field window_fields[] = {
    DS_READS, DS_READ_SECTORS,   DS_READ_MS,  DS_WRITES,     DS_WRITE_SECTORS, DS_WRITE_MS,
    DS_IO_MS, DS_IO_WEIGHTED_MS, DS_DISCARDS, DS_DISCARD_MS, DS_FLUSHES,       DS_FLUSH_MS,
};
#define NW ARRAY_SIZE(window_fields)
static const enum ds_field latest_fields[] = {DS_READS_MERGED, DS_WRITES_MERGED, DS_IO_NOW,
                                              DS_DISCARDS_MERGED, DS_DISCARD_SECTORS};
#define NL ARRAY_SIZE(latest_fields)

/* The window's counters as of a round: valid from that round until the next point's. */
struct ds_point {
        uint64_t round;
        uint64_t v[NW];
};

struct ds_device {
        char name[DS_NAME_MAX];
        unsigned major, minor;
        uint32_t present;
        uint32_t row;       /* its row in d->rows, or NO_ROW */
        uint32_t fresh_row; /* its identity read anew, in d->fresh, or NO_ROW */
        bool identity_valid;
        bool since_boot;                  /* only one sample, taken in the first round */
        bool changed;                     /* its exported values may differ from the last round's */
        uint16_t npts, cap;               /* points */
        uint64_t first_round, last_round; /* sampled in every round from first to last */
        struct ds_point *pts;             /* oldest first; the last holds the latest values */
        uint64_t latest[NL];
        usec_t identity_time;
        uint64_t identity_stamp; /* the source's stamp when it was read */
};

#define NO_ROW UINT32_MAX

/* What the last read printed at a line position: enough to tell the same line again. */
enum line_kind {
        LINE_OTHER,    /* malformed, a duplicate: parsed each time */
        LINE_EXCLUDED, /* a device the filters leave out (a partition): nothing to do */
        LINE_DEVICE,   /* a monitored device's */
};

struct ds_line {
        uint64_t hash;
        uint32_t len;
        uint32_t kind;
        union {
                struct ds_device *dev; /* LINE_DEVICE */
                uint64_t name_hash;    /* LINE_EXCLUDED: its name's, to skip the filter */
        };
};

/* The labels of the rows: what diskpulse_disk_info, ..._write_cache_info and ..._set_info say
 * of a device. */
enum {
        L_DEVICE,
        L_MAJOR,
        L_MINOR,
        L_MODEL,
        L_SERIAL,
        L_WWN,
        L_PATH,
        L_REVISION,
        L_ROTATIONAL,
        L_MODE,
        L_SETS,
        L_MAX
};
static const char *const label_names[L_MAX] = {"device",     "major", "minor", "model",
                                               "serial",     "wwn",   "path",  "revision",
                                               "rotational", "mode",  "set"};
#define MASK_DEVICE (1u << L_DEVICE)
#define MASK_INFO   ((1u << L_MODE) - 1)
#define MASK_CACHE  (1u << L_DEVICE | 1u << L_MODE)
#define MASK_SET    (1u << L_DEVICE | 1u << L_SETS)

struct diskstats {
        struct diskstats_config cfg;
        struct ds_device **devs; /* the monitored devices, sorted by name */
        size_t n, cap;
        struct ds_line *lines; /* by position in the last read, rewritten in place as read */
        size_t nlines, lines_cap;
        size_t ring_cap; /* rounds a window spans at most */
        usec_t *times;   /* time of round r at times[r % ring_cap] */
        uint64_t round;  /* the latest round; 0 before the first */
        bool first_round_done;
        uint64_t bad_lines;
        usec_t uptime; /* from /proc/uptime at the first round */
        struct ratelimit bad_rl;
        char *buf; /* buf_cap + 1 bytes */
        size_t buf_cap;
        uint64_t seed[2];        /* of the line hash */
        bool membership_changed; /* a device came or went, or its row must change */
        struct mrows *rows;      /* the label values of the exported devices, shared */
        struct mrows *fresh;     /* identities read since the rows were made, or NULL */
        struct mtable *table;    /* the last round's values, reused while nothing changed */
        bool table_dirty;
};

static size_t ring_cap_for(const struct diskstats_config *cfg)
{
        usec_t iv = cfg->interval ? cfg->interval : USEC_PER_SEC;
        return (size_t)(cfg->window / iv) + 2;
}

struct diskstats *diskstats_new(const struct diskstats_config *cfg)
{
        struct diskstats *d = xcalloc(1, sizeof(*d));

        d->cfg = *cfg;
        d->ring_cap = ring_cap_for(cfg);
        d->times = xcalloc(d->ring_cap, sizeof(*d->times));
        d->bad_rl.interval = 3600 * USEC_PER_SEC;
        d->rows = mrows_new(label_names, L_MAX);
        d->membership_changed = true;
        if (getrandom(d->seed, sizeof d->seed, GRND_NONBLOCK) != (ssize_t)sizeof d->seed) {
                d->seed[0] = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
                d->seed[1] = ~d->seed[0] * 0xC2B2AE3D27D4EB4FULL;
        }
        d->seed[0] |= 1;
        return d;
}

static void device_free(struct ds_device *dev)
{
        if (dev) {
                free(dev->pts);
                free(dev);
        }
}

struct diskstats *diskstats_free(struct diskstats *d)
{
        if (!d)
                return NULL;
        for (size_t i = 0; i < d->n; i++)
                device_free(d->devs[i]);
        free(d->devs);
        free(d->lines);
        free(d->times);
        free(d->buf);
        mrows_unref(d->rows);
        mrows_unref(d->fresh);
        mtable_unref(d->table);
        free(d);
        return NULL;
}

static bool name_included(const struct diskstats_config *cfg, const char *name)
{
        return name_filter_match(cfg->include, cfg->exclude, name);
}

/* Forgets the device's samples: its next one starts a new window. */
static void device_restart(struct ds_device *dev)
{
        dev->npts = 0;
        dev->last_round = 0;
}

void diskstats_reconfigure(struct diskstats *d, const struct diskstats_config *cfg)
{
        size_t cap = ring_cap_for(cfg), kept = 0;

        d->cfg = *cfg;
        /* Devices the new filters leave out go; those they let in come with the next read. */
        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                if (!name_included(cfg, dev->name)) {
                        device_free(dev);
                        continue;
                }
                if (cap != d->ring_cap)
                        device_restart(dev);
                d->devs[kept++] = dev;
        }
        d->n = kept;
        d->nlines = 0;
        if (cap != d->ring_cap) {
                free(d->times);
                d->times = xcalloc(cap, sizeof(*d->times));
                d->ring_cap = cap;
        }
        d->membership_changed = true;
        d->table_dirty = true;
}

/* Binary search by name; returns the index where it is or would be. */
static size_t find_pos(const struct diskstats *d, const char *name, bool *found)
{
        size_t lo = 0, hi = d->n;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(d->devs[mid]->name, name);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static struct ds_device *device_add(struct diskstats *d, size_t pos, const struct ds_entry *e)
{
        struct ds_device *dev = xcalloc(1, sizeof(*dev));

        memcpy(dev->name, e->name, sizeof dev->name);
        dev->major = e->major;
        dev->minor = e->minor;
        dev->row = NO_ROW;
        dev->fresh_row = NO_ROW;
        GROW(d->devs, d->cap, d->n + 1);
        memmove(d->devs + pos + 1, d->devs + pos, (d->n - pos) * sizeof(*d->devs));
        d->devs[pos] = dev;
        d->n++;
        d->membership_changed = true;
        return dev;
}

/* The full counters of the latest sample. */
static void device_values(const struct ds_device *dev, uint64_t v[DS_NFIELDS])
{
        memset(v, 0, DS_NFIELDS * sizeof(*v));
        for (size_t k = 0; k < NW; k++)
                v[window_fields[k]] = dev->pts[dev->npts - 1].v[k];
        for (size_t k = 0; k < NL; k++)
                v[latest_fields[k]] = dev->latest[k];
}

/* The window's counters as of round r (r within the device's samples). */
static const struct ds_point *point_at(const struct ds_device *dev, uint64_t r)
{
        size_t k = dev->npts - 1;

        while (k > 0 && dev->pts[k].round > r)
                k--;
        return &dev->pts[k];
}

/* The label values of a device's row. */
static size_t add_row(struct mrows *rows, const struct ds_device *dev,
                      const struct device_info *info)
{
        char maj[16], min[16];
        const char *values[L_MAX];

        snprintf(maj, sizeof maj, "%u", dev->major);
        snprintf(min, sizeof min, "%u", dev->minor);
        values[L_DEVICE] = dev->name;
        values[L_MAJOR] = maj;
        values[L_MINOR] = min;
        values[L_MODEL] = info->model;
        values[L_SERIAL] = info->serial;
        values[L_WWN] = info->wwn;
        values[L_PATH] = info->path;
        values[L_REVISION] = info->revision;
        values[L_ROTATIONAL] = info->rotational < 0 ? "" : info->rotational ? "1" : "0";
        values[L_MODE] = info->write_cache;
        values[L_SETS] = info->sets;
        return mrows_add(rows, values);
}

/* Reads the device's identity from the source (and the source's stamp of it). */
static void read_identity(struct diskstats *d, struct ds_device *dev, struct device_info *ret)
{
        struct devsrc *src = d->cfg.devsrc;
        int r = src ? src->ops->lookup(src, dev->name, dev->major, dev->minor, ret) : -ENODEV;

        if (r < 0) {
                memset(ret, 0, sizeof(*ret));
                ret->rotational = -1;
        }
        if (src && src->ops->stamp)
                dev->identity_stamp = src->ops->stamp(src, dev->name, dev->major, dev->minor);
}

/* Reads the device's identity; a changed one waits in d->fresh for the next rows. */
static void refresh_identity(struct diskstats *d, struct ds_device *dev, usec_t now)
{
        struct device_info info;
        size_t row;

        read_identity(d, dev, &info);
        dev->identity_valid = true;
        dev->identity_time = now;
        if (!d->fresh)
                d->fresh = mrows_new(label_names, L_MAX);
        row = add_row(d->fresh, dev, &info);
        if (dev->fresh_row == NO_ROW && dev->row != NO_ROW &&
            mrows_row_equal(d->fresh, row, d->rows, dev->row)) {
                mrows_truncate(d->fresh, row); /* unchanged (the usual case) */
                return;
        }
        dev->fresh_row = (uint32_t)row;
        d->membership_changed = true;
}

struct sample_ctx {
        struct diskstats *d;
        usec_t now;
        size_t pos;         /* the line's position in this read */
        struct ds_line old; /* what the last read printed there (kind OTHER: nothing) */
        struct ds_line cur; /* and what this one does */
};

/* A keyed hash of a line, 16 bytes a round (each a 64x64->128 multiply folded, as wyhash
 * does), for telling whether a device's line changed since the last read. */
static inline uint64_t fold(uint64_t a, uint64_t b)
{
        unsigned __int128 m = (unsigned __int128)a * b;
        return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static uint64_t line_hash(const uint64_t seed[2], const char *p, size_t len)
{
        const char *end = p + len;
        uint64_t h = seed[0] ^ len, a = 0, b = 0;

        for (; end - p > 16; p += 16) {
                memcpy(&a, p, 8);
                memcpy(&b, p + 8, 8);
                h = fold(a ^ seed[1], b ^ h);
        }
        /* the last 1..16 bytes: two loads ending at the end (overlapping what came before;
         * the same line always reads the same bytes) */
        if (len >= 16) {
                memcpy(&a, end - 16, 8);
                memcpy(&b, end - 8, 8);
        } else if (len >= 8) {
                memcpy(&a, p, 8);
                memcpy(&b, end - 8, 8);
        } else {
                for (size_t i = 0; i < len; i++)
                        a |= (uint64_t)(unsigned char)p[i] << (8 * i);
        }
        h = fold(a ^ seed[1], b ^ h);
        return fold(h ^ seed[0], seed[1]);
}

/* The points of the window after a sample of round r; whether the device's exported values
 * may have changed. */
static void round_done(struct diskstats *d, struct ds_device *dev, uint64_t r, usec_t now)
{
        /* Points older than the oldest round a window can start at, but the one in force
         * then, are no longer needed. */
        if (dev->npts > 1 && r + 1 > d->ring_cap) {
                uint64_t oldest = r + 1 - d->ring_cap;
                size_t drop = 0;
                while (drop + 1 < dev->npts && dev->pts[drop + 1].round <= oldest)
                        drop++;
                if (drop) {
                        memmove(dev->pts, dev->pts + drop, (dev->npts - drop) * sizeof(*dev->pts));
                        dev->npts = (uint16_t)(dev->npts - drop);
                }
                if (dev->cap >= 8 && dev->npts <= dev->cap / 4) {
                        /* busy once, quiet since: give the room back */
                        dev->cap = (uint16_t)(dev->npts * 2);
                        dev->pts = xrealloc(dev->pts, dev->cap * sizeof(*dev->pts));
                }
        }
        if (dev->npts > 1)
                dev->changed = true; /* the window moves over a change */
        if (dev->changed)
                d->table_dirty = true;
        dev->last_round = r;
        if (!dev->identity_valid ||
            (d->cfg.identity_refresh && now - dev->identity_time >= d->cfg.identity_refresh)) {
                struct devsrc *src = d->cfg.devsrc;
                if (dev->identity_valid && src && src->ops->stamp &&
                    src->ops->stamp(src, dev->name, dev->major, dev->minor) ==
                        dev->identity_stamp) {
                        /* the periodic look finds nothing that could have changed */
                        dev->identity_time = now;
                        return;
                }
                if (dev->row == NO_ROW && dev->fresh_row == NO_ROW) {
                        /* a new row: read straight into the next rows, in their order; its
                         * periodic looks come at a time of its own within the period, so that
                         * devices found together are not all looked at in one round */
                        uint32_t h = 2166136261u;
                        for (const char *p = dev->name; *p; p++)
                                h = (h ^ (unsigned char)*p) * 16777619u;
                        dev->identity_valid = true;
                        dev->identity_time =
                            now - (d->cfg.identity_refresh ? h % d->cfg.identity_refresh : 0);
                        d->membership_changed = true;
                } else {
                        refresh_identity(d, dev, now);
                }
        }
}

/* The device a line names: the one named at the same position last time (the kernel keeps its
 * order), or found by name, or a new one; NULL when the filters leave it out. */
static struct ds_device *lookup(struct sample_ctx *c, const struct ds_entry *e)
{
        struct diskstats *d = c->d;
        size_t pos;
        bool found;

        if (c->old.kind == LINE_DEVICE && strcmp(c->old.dev->name, e->name) == 0)
                return c->old.dev;
        pos = find_pos(d, e->name, &found);
        if (found)
                return d->devs[pos];
        /* A partition whose counters moved: the same name as last time is still filtered out
         * (a regular expression costs more than the rest of the line). */
        c->cur.name_hash = line_hash(d->seed, e->name, strlen(e->name));
        if (c->old.kind == LINE_EXCLUDED && c->old.name_hash == c->cur.name_hash)
                return NULL;
        if (!name_included(&d->cfg, e->name))
                return NULL;
        return device_add(d, pos, e);
}

static int on_entry(const struct ds_entry *e, void *userdata)
{
        struct sample_ctx *c = userdata;
        struct diskstats *d = c->d;
        struct ds_device *dev = lookup(c, e);
        uint64_t r = d->round;
        uint64_t w[NW], l[NL];
        bool same;

        if (!dev) {
                c->cur.kind = LINE_EXCLUDED;
                return 0;
        }
        if (dev->last_round == r && dev->npts > 0)
                return 0; /* a duplicate name in one read: keep the first */
        c->cur.kind = LINE_DEVICE;
        c->cur.dev = dev;
        if (dev->major != e->major || dev->minor != e->minor) {
                /* Same name, another device: start afresh. */
                dev->major = e->major;
                dev->minor = e->minor;
                dev->identity_valid = false;
                device_restart(dev);
        }
        if (dev->npts > 0 && dev->last_round + 1 != r)
                device_restart(dev); /* not sampled last round: a new window */
        for (size_t k = 0; k < NW; k++)
                w[k] = e->v[window_fields[k]];
        for (size_t k = 0; k < NL; k++)
                l[k] = e->v[latest_fields[k]];
        same = dev->npts > 0 && memcmp(w, dev->pts[dev->npts - 1].v, sizeof w) == 0;
        if (!same && dev->npts > 0) {
                uint64_t prev[DS_NFIELDS];
                device_values(dev, prev);
                if (iostat_is_reset(prev, e->v))
                        device_restart(dev); /* removed and added again: the old samples mean
                                              * nothing */
        }
        dev->changed = !same || memcmp(l, dev->latest, sizeof l) != 0 ||
                       dev->present != e->present || dev->since_boot;
        if (dev->npts == 0) {
                dev->first_round = r;
                dev->since_boot = !d->first_round_done;
        } else {
                dev->since_boot = false;
        }
        if (!same) {
                if (dev->npts == dev->cap) {
                        size_t cap = dev->cap ? dev->cap * 2u : 1u;
                        if (cap > d->ring_cap + 1)
                                cap = d->ring_cap + 1;
                        dev->pts = xrealloc(dev->pts, cap * sizeof(*dev->pts));
                        dev->cap = (uint16_t)cap;
                }
                dev->pts[dev->npts].round = r;
                memcpy(dev->pts[dev->npts].v, w, sizeof w);
                dev->npts++;
        }
        memcpy(dev->latest, l, sizeof l);
        dev->present = e->present;
        round_done(d, dev, r, c->now);
        return 0;
}

/* A line that is what the last read printed at the same position: the same sample again (or
 * the same excluded device), without parsing. Returns false when the line must be parsed. */
static bool unchanged_line(struct sample_ctx *c)
{
        struct diskstats *d = c->d;
        struct ds_device *dev = c->old.dev;

        if (c->old.hash != c->cur.hash || c->old.len != c->cur.len)
                return false;
        if (c->old.kind == LINE_EXCLUDED) {
                c->cur.kind = LINE_EXCLUDED;
                c->cur.name_hash = c->old.name_hash;
                return true;
        }
        if (c->old.kind != LINE_DEVICE || dev->last_round + 1 != d->round || dev->npts == 0)
                return false;
        c->cur.kind = LINE_DEVICE;
        c->cur.dev = dev;
        dev->changed = dev->since_boot;
        dev->since_boot = false;
        round_done(d, dev, d->round, c->now);
        return true;
}

/* The lines of buf as ds_parse_chunk takes them, with unchanged ones left out; each leaves its
 * record at its position. */
static size_t parse_lines(struct sample_ctx *c, const char *buf, size_t len, bool final,
                          unsigned *bad)
{
        struct diskstats *d = c->d;
        size_t i = 0;

        while (i < len) {
                const char *nl = memchr(buf + i, '\n', len - i);
                size_t l = nl ? (size_t)(nl - (buf + i)) : len - i;
                int err;

                if (!nl && !final)
                        break;
                if (c->pos < d->nlines)
                        c->old = d->lines[c->pos];
                else
                        c->old = (struct ds_line){.kind = LINE_OTHER};
                c->cur = (struct ds_line){.hash = line_hash(d->seed, buf + i, l),
                                          .len = l > UINT32_MAX ? UINT32_MAX : (uint32_t)l,
                                          .kind = LINE_OTHER};
                if (!unchanged_line(c))
                        (void)ds_parse_chunk(buf + i, l, true, on_entry, c, bad, &err);
                GROW(d->lines, d->lines_cap, c->pos + 1);
                d->lines[c->pos++] = c->cur;
                i += l + (nl ? 1 : 0);
        }
        return i;
}

static usec_t read_uptime(int procfs_fd)
{
        char buf[128];
        unsigned long long sec = 0, frac = 0;
        int fl = 0;

        if (read_attr_at(procfs_fd, "uptime", buf, sizeof buf) < 0)
                return 0;
        /* "12345.67 23456.78": seconds with hundredths */
        if (sscanf(buf, "%llu.%n", &sec, &fl) < 1)
                return 0;
        if (fl > 0) {
                const char *p = buf + fl;
                unsigned mult = 100000;
                while (*p >= '0' && *p <= '9' && mult > 0) {
                        frac += (unsigned long long)(*p - '0') * mult;
                        mult /= 10;
                        p++;
                }
        }
        return (usec_t)sec * USEC_PER_SEC + frac;
}

/* Reads and parses the file chunk by chunk into one buffer, which grows (up to READ_CHUNK) while
 * the file does not fit; a line longer than READ_CHUNK is malformed. */
static int read_and_parse(struct diskstats *d, int fd, struct sample_ctx *c, unsigned *bad)
{
        size_t have = 0, total = 0;
        bool skipping = false;

        if (!d->buf) {
                d->buf_cap = 4096;
                d->buf = xmalloc(d->buf_cap + 1);
        }
        for (;;) {
                size_t room = d->buf_cap - have, used;
                ssize_t k = read(fd, d->buf + have, room);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                total += (size_t)k;
                if (total > DISKSTATS_MAX_BYTES)
                        return -EFBIG;
                have += (size_t)k;
                if (skipping) {
                        /* the rest of an overlong line */
                        char *nl = memchr(d->buf, '\n', have);
                        if (!nl && k > 0) {
                                have = 0;
                                continue;
                        }
                        used = nl ? (size_t)(nl - d->buf) + 1 : have;
                        memmove(d->buf, d->buf + used, have - used);
                        have -= used;
                        skipping = false;
                }
                used = parse_lines(c, d->buf, have, k == 0, bad);
                memmove(d->buf, d->buf + used, have - used);
                have -= used;
                if (k == 0)
                        return 0;
                if ((size_t)k == room && d->buf_cap < READ_CHUNK) {
                        /* more than fits: fewer reads next time */
                        d->buf_cap *= 2;
                        d->buf = xrealloc(d->buf, d->buf_cap + 1);
                } else if (have == d->buf_cap) {
                        (*bad)++;
                        skipping = true;
                        have = 0;
                }
        }
}

int diskstats_sample(struct diskstats *d, usec_t now)
{
        struct sample_ctx c = {.d = d, .now = now};
        _cleanup_close_ int fd = -1;
        unsigned bad = 0;
        size_t kept = 0;
        int r;

        /* A file that cannot be opened leaves everything as it was. */
        fd = openat(d->cfg.procfs_fd, "diskstats", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (!d->first_round_done)
                d->uptime = read_uptime(d->cfg.procfs_fd);
        d->round++;
        d->times[d->round % d->ring_cap] = now;
        r = read_and_parse(d, fd, &c, &bad);
        d->nlines = c.pos;
        if (bad) {
                d->bad_lines += bad;
                if (ratelimit_ok(&d->bad_rl, now)) {
                        char n[16];
                        snprintf(n, sizeof n, "%u", bad);
                        log_warn("malformed lines in diskstats, skipped", "lines", n);
                }
        }
        if (r < 0) {
                /* The devices read so far have their sample, the others keep their last one
                 * (and start a new window next time). */
                d->table_dirty = true;
                return r;
        }
        /* Devices no longer listed are gone: drop them and their series. */
        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                if (dev->last_round == d->round) {
                        d->devs[kept++] = dev;
                } else {
                        d->membership_changed = true;
                        device_free(dev);
                }
        }
        d->n = kept;
        d->first_round_done = true;
        return 0;
}

void diskstats_invalidate(struct diskstats *d, const char *name)
{
        for (size_t i = 0; i < d->n; i++)
                if (!name || strcmp(d->devs[i]->name, name) == 0)
                        d->devs[i]->identity_valid = false;
}

size_t diskstats_device_count(const struct diskstats *d)
{
        return d->n;
}

/* Exported: included and sampled (in this round, or in the last one when this round's read
 * failed half-way). */
static bool exported(const struct ds_device *dev)
{
        return dev->npts > 0;
}

/* The oldest round a window that ends at round r may start at (with half an interval of slack
 * for timer jitter), or 0 when none but r itself is near enough. */
static uint64_t window_start(const struct diskstats *d, uint64_t r)
{
        usec_t newest = d->times[r % d->ring_cap];
        usec_t limit = d->cfg.window + d->cfg.interval / 2;
        uint64_t start = 0;

        if (r + d->ring_cap <= d->round)
                return 0; /* out of the ring */
        for (uint64_t k = 1; k + (d->round - r) < d->ring_cap && k < r; k++) {
                usec_t t = d->times[(r - k) % d->ring_cap];
                if (newest - t > limit)
                        break;
                start = r - k;
        }
        return start;
}

/* start: window_start(d, d->round). */
static void derive(const struct diskstats *d, const struct ds_device *dev, uint64_t start,
                   struct iostat_derived *ret)
{
        static const uint64_t zero[DS_NFIELDS];
        uint64_t cur[DS_NFIELDS], old[DS_NFIELDS];
        const struct ds_point *p;
        uint64_t from, last = dev->last_round;

        device_values(dev, cur);
        if (dev->since_boot) {
                /* As iostat's first report: everything since boot. */
                iostat_derive(zero, cur, dev->present, d->uptime, ret);
                return;
        }
        if (last != d->round)
                start = window_start(d, last);
        from = start > dev->first_round ? start : dev->first_round;
        if (start == 0 || from >= last) {
                iostat_derive(zero, zero, dev->present, 0, ret);
                return;
        }
        p = point_at(dev, from);
        memcpy(old, cur, sizeof old);
        for (size_t k = 0; k < NW; k++)
                old[window_fields[k]] = p->v[k];
        iostat_derive(old, cur, dev->present,
                      d->times[last % d->ring_cap] - d->times[from % d->ring_cap], ret);
}

/* /proc/diskstats counts 512-byte sectors whatever the device's block size. */
#define DISKSTATS_SECTOR_BYTES 512

struct counter_def {
        enum ds_field field;
        const char *name;
        const char *help;
        enum mcell cell;
        enum mtype type;
};

static const struct counter_def counters[] = {
    {DS_READS, "diskpulse_disk_reads_completed_total",
     "The total number of reads completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_READS_MERGED, "diskpulse_disk_reads_merged_total",
     "The total number of reads merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_READ_SECTORS, "diskpulse_disk_read_bytes_total",
     "The total number of bytes read successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_READ_MS, "diskpulse_disk_read_time_seconds_total",
     "The total number of seconds spent by all reads.", MCELL_MILLIS, MT_COUNTER},
    {DS_WRITES, "diskpulse_disk_writes_completed_total",
     "The total number of writes completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_WRITES_MERGED, "diskpulse_disk_writes_merged_total",
     "The total number of writes merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_WRITE_SECTORS, "diskpulse_disk_written_bytes_total",
     "The total number of bytes written successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_WRITE_MS, "diskpulse_disk_write_time_seconds_total",
     "The total number of seconds spent by all writes.", MCELL_MILLIS, MT_COUNTER},
    {DS_IO_NOW, "diskpulse_disk_io_now", "The number of I/Os currently in progress.", MCELL_U64,
     MT_GAUGE},
    {DS_IO_MS, "diskpulse_disk_io_time_seconds_total",
     "Total seconds spent doing I/Os (the device was busy).", MCELL_MILLIS, MT_COUNTER},
    {DS_IO_WEIGHTED_MS, "diskpulse_disk_io_time_weighted_seconds_total",
     "The weighted number of seconds spent doing I/Os (request time summed over requests).",
     MCELL_MILLIS, MT_COUNTER},
    {DS_DISCARDS, "diskpulse_disk_discards_completed_total",
     "The total number of discards completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_DISCARDS_MERGED, "diskpulse_disk_discards_merged_total",
     "The total number of discards merged with adjacent ones.", MCELL_U64, MT_COUNTER},
    {DS_DISCARD_SECTORS, "diskpulse_disk_discarded_bytes_total",
     "The total number of bytes discarded successfully.", MCELL_SCALED, MT_COUNTER},
    {DS_DISCARD_MS, "diskpulse_disk_discard_time_seconds_total",
     "The total number of seconds spent by all discards.", MCELL_MILLIS, MT_COUNTER},
    {DS_FLUSHES, "diskpulse_disk_flush_requests_total",
     "The total number of flush requests completed successfully.", MCELL_U64, MT_COUNTER},
    {DS_FLUSH_MS, "diskpulse_disk_flush_time_seconds_total",
     "The total number of seconds spent by all flush requests.", MCELL_MILLIS, MT_COUNTER},
};

struct gauge_def {
        const char *name;
        const char *help;
        size_t offset;
};

#define G(field) offsetof(struct iostat_derived, field)
static const struct gauge_def gauges[] = {
    {"diskpulse_disk_read_await_seconds",
     "Average time reads took to be served, queue included, over the window (iostat r_await).",
     G(read_await)},
    {"diskpulse_disk_write_await_seconds",
     "Average time writes took to be served, queue included, over the window (iostat w_await).",
     G(write_await)},
    {"diskpulse_disk_discard_await_seconds",
     "Average time discards took to be served over the window (iostat d_await).", G(discard_await)},
    {"diskpulse_disk_flush_await_seconds",
     "Average time flush requests took to be served over the window (iostat f_await).",
     G(flush_await)},
    {"diskpulse_disk_utilization_ratio",
     "Fraction of the window the device had I/O in flight (iostat %util / 100).", G(utilization)},
    {"diskpulse_disk_queue_depth",
     "Average number of requests queued or in service over the window (iostat aqu-sz).",
     G(queue_depth)},
    {"diskpulse_disk_read_iops", "Reads completed per second over the window (iostat r/s).",
     G(read_iops)},
    {"diskpulse_disk_write_iops", "Writes completed per second over the window (iostat w/s).",
     G(write_iops)},
    {"diskpulse_disk_read_bytes_per_second",
     "Bytes read per second over the window (iostat rkB/s x 1024).", G(read_bytes_per_second)},
    {"diskpulse_disk_write_bytes_per_second",
     "Bytes written per second over the window (iostat wkB/s x 1024).", G(write_bytes_per_second)},
};
#undef G

/* The columns of the table. */
#define COL_GAUGE(g) (ARRAY_SIZE(counters) + (g))
#define COL_INFO     (ARRAY_SIZE(counters) + ARRAY_SIZE(gauges))
#define COL_CACHE    (COL_INFO + 1)
#define COL_SET      (COL_CACHE + 1)
#define NCOLS        (COL_SET + 1)
_Static_assert(NCOLS <= 32, "a row's present mask is 32 bits");

/* A new d->rows for the devices exported now, copying the rows that did not change. */
static void rebuild_rows(struct diskstats *d)
{
        struct mrows *rows = mrows_new(label_names, L_MAX);

        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];

                if (!exported(dev)) {
                        dev->row = NO_ROW;
                } else if (dev->fresh_row != NO_ROW) {
                        dev->row = (uint32_t)mrows_copy_row(rows, d->fresh, dev->fresh_row);
                } else if (dev->row != NO_ROW) {
                        dev->row = (uint32_t)mrows_copy_row(rows, d->rows, dev->row);
                } else {
                        struct device_info info;
                        read_identity(d, dev, &info);
                        dev->row = (uint32_t)add_row(rows, dev, &info);
                }
                dev->fresh_row = NO_ROW;
        }
        mrows_unref(d->rows);
        d->rows = rows;
        d->fresh = mrows_unref(d->fresh);
}

static struct mtable *build_table(struct diskstats *d)
{
        struct mtable *t = mtable_new(d->rows, NCOLS);
        uint64_t start = window_start(d, d->round);

        for (size_t i = 0; i < d->n; i++) {
                struct ds_device *dev = d->devs[i];
                struct iostat_derived der;
                uint64_t v[DS_NFIELDS], cells[NCOLS];
                uint32_t present = 0;
                size_t mode_len;

                if (dev->row == NO_ROW)
                        continue;
                device_values(dev, v);
                for (size_t c = 0; c < ARRAY_SIZE(counters); c++)
                        if (dev->present & (1u << counters[c].field)) {
                                present |= 1u << c;
                                cells[c] = v[counters[c].field];
                        }
                derive(d, dev, start, &der);
                for (size_t g = 0; g < ARRAY_SIZE(gauges); g++) {
                        double x;
                        memcpy(&x, (const char *)&der + gauges[g].offset, sizeof x);
                        present |= 1u << COL_GAUGE(g);
                        cells[COL_GAUGE(g)] = mtable_double(x);
                }
                /* the info families print 1 whatever the cell: 0 takes no room */
                present |= 1u << COL_INFO;
                cells[COL_INFO] = 0;
                (void)mrows_value(d->rows, dev->row, L_MODE, &mode_len);
                if (mode_len)
                        present |= 1u << COL_CACHE;
                cells[COL_CACHE] = 0;
                (void)mrows_value(d->rows, dev->row, L_SETS, &mode_len);
                if (mode_len)
                        present |= 1u << COL_SET;
                cells[COL_SET] = 0;
                mtable_add_row(t, dev->row, present, cells);
        }
        return t;
}

void diskstats_export(struct diskstats *d, struct mset *out)
{
        size_t included = 0;

        for (size_t i = 0; i < d->n; i++)
                if (exported(d->devs[i]))
                        included++;
        /* Only what changed is done again: the rows when a device came, went or changed its
         * identity, the values when a counter moved (or the window still holds a change). */
        if (d->membership_changed) {
                rebuild_rows(d);
                d->membership_changed = false;
                d->table_dirty = true;
        }
        if (d->table_dirty || !d->table) {
                mtable_unref(d->table);
                d->table = build_table(d);
                d->table_dirty = false;
        }

        mset_table_family(out, "diskpulse_disk_info",
                          "Facts about a monitored block device; identity lives only here.",
                          MT_GAUGE, d->table, COL_INFO, MCELL_ONE, MASK_INFO);
        mset_table_family(out, "diskpulse_disk_write_cache_info",
                          "The kernel's write cache mode of the device (queue/write_cache).",
                          MT_GAUGE, d->table, COL_CACHE, MCELL_ONE, MASK_CACHE);
        mset_table_family(out, "diskpulse_disk_set_info",
                          "The md arrays that hold the device or one of its partitions (set, "
                          "comma-separated); devices with the same set are siblings.",
                          MT_GAUGE, d->table, COL_SET, MCELL_ONE, MASK_SET);
        for (size_t c = 0; c < ARRAY_SIZE(counters); c++) {
                struct mfamily *f =
                    mset_table_family(out, counters[c].name, counters[c].help, counters[c].type,
                                      d->table, (unsigned)c, counters[c].cell, MASK_DEVICE);
                if (counters[c].cell == MCELL_SCALED) /* sectors in the table, bytes on the page */
                        mfamily_scale(f, DISKSTATS_SECTOR_BYTES);
        }
        for (size_t g = 0; g < ARRAY_SIZE(gauges); g++)
                mset_table_family(out, gauges[g].name, gauges[g].help, MT_GAUGE, d->table,
                                  (unsigned)COL_GAUGE(g), MCELL_DOUBLE, MASK_DEVICE);

        mset_gauge(out, "diskpulse_disk_devices", "Number of block devices monitored.",
                   (double)included, NULL);
        {
                struct mfamily *f = mset_family(
                    out, "diskpulse_diskstats_malformed_lines_total",
                    "Lines of the diskstats file that could not be parsed and were skipped.",
                    MT_COUNTER);
                mfamily_add_u64(out, f, "", d->bad_lines, NULL);
        }
}
