/* The diskstats collector's sampling: reads /proc/diskstats (and /proc/uptime once) below the
 * procfs fd, skips lines equal to the last read's, parses the others and appends to each
 * device's window the samples whose counters changed. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "diskstats_internal.h"
#include "fsroot.h"
#include "iostat.h"
#include "log.h"

#define DISKSTATS_MAX_BYTES (64u << 20)
#define READ_CHUNK          (64u * 1024)

/* Reads the device's identity; a changed one waits in d->fresh for the next rows. */
static void refresh_identity(struct diskstats *d, struct ds_device *dev, usec_t now)
{
        struct device_info info;
        size_t row;

        diskstats_read_identity(d, dev, &info);
        dev->identity_valid = true;
        dev->identity_time = now;
        if (!d->fresh)
                d->fresh = mrows_new(label_names, L_MAX);
        row = diskstats_add_row(d->fresh, dev, &info);
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
                        uint32_t h = hash_fnv1a32(dev->name);
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
        pos = diskstats_find_pos(d, e->name, &found);
        if (found)
                return d->devs[pos];
        /* A partition whose counters moved: the same name as last time is still filtered out
         * (a regular expression costs more than the rest of the line). */
        c->cur.name_hash = line_hash(d->seed, e->name, strlen(e->name));
        if (c->old.kind == LINE_EXCLUDED && c->old.name_hash == c->cur.name_hash)
                return NULL;
        if (!diskstats_name_included(&d->cfg, e->name))
                return NULL;
        return diskstats_device_add(d, pos, e);
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
                diskstats_device_restart(dev);
        }
        if (dev->npts > 0 && dev->last_round + 1 != r)
                diskstats_device_restart(dev); /* not sampled last round: a new window */
        for (size_t k = 0; k < NW; k++)
                w[k] = e->v[window_fields[k]];
        for (size_t k = 0; k < NL; k++)
                l[k] = e->v[latest_fields[k]];
        same = dev->npts > 0 && memcmp(w, dev->pts[dev->npts - 1].v, sizeof w) == 0;
        if (!same && dev->npts > 0) {
                uint64_t prev[DS_NFIELDS];
                diskstats_device_values(dev, prev);
                if (iostat_is_reset(prev, e->v))
                        diskstats_device_restart(
                            dev); /* removed and added again: the old samples mean
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

/* The lines of buf as diskstats_parse_chunk takes them, with unchanged ones left out; each leaves its
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
                        (void)diskstats_parse_chunk(buf + i, l, true, on_entry, c, bad, &err);
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

        /* A file that cannot be opened leaves everything as it was; one that is not a regular
         * file (a FIFO in a --path.procfs tree) is not waited for. */
        fd = open_regular_at(d->cfg.procfs_fd, "diskstats", SIZE_MAX, NULL, 0);
        if (fd < 0)
                return fd;
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
                        diskstats_device_free(dev);
                }
        }
        d->n = kept;
        d->first_round_done = true;
        return 0;
}
