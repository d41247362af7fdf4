/* logreplay: reads a dm-log-writes log and replays a prefix of it onto a copy of the device, so
 * that a guest scenario can check the filesystem as a power cut at that point would leave it.
 *
 * The log's layout (Linux drivers/md/dm-log-writes.c and
 * Documentation/admin-guide/device-mapper/log-writes.rst): block 0 of the log device holds
 * struct log_write_super (little endian: magic 0x6a736677736872, version 1, nr_entries,
 * sectorsize, the logged device's logical block size); the entries follow from block 1 on, each
 * one block holding struct log_write_entry (sector, nr_sectors, both in sectorsize units of the
 * logged device, flags, data_len) and, for a mark, its text after the struct; then, unless it is a
 * discard, nr_sectors blocks of the data written. Entries are logged in the order the writes
 * completed, a write only once a flush covered it (FUA writes at once), so a prefix ending at a
 * flush or FUA entry is what the device held after a power cut there.
 *
 *   logreplay list LOG            one line per entry: INDEX FLAGS SECTOR NR_SECTORS [MARK]
 *   logreplay apply LOG DEV FROM TO
 *                                 writes entries FROM..TO-1 to DEV (a discard writes zeros)
 *
 * FLAGS is a word of letters: F flush, U FUA, D discard, M mark, m metadata, - none.
 * Exit status 0, 1 on a bad log or an I/O error (said on stderr), 2 on bad usage. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_MAGIC   0x6a736677736872ULL
#define LOG_VERSION 1
#define F_FLUSH     (1u << 0)
#define F_FUA       (1u << 1)
#define F_DISCARD   (1u << 2)
#define F_MARK      (1u << 3)
#define F_META      (1u << 4)
#define BLOCK_MAX   65536

struct entry {
        uint64_t sector, nr, flags, data_len;
        char mark[256];
};

struct log {
        int fd;
        uint32_t bs;
        uint64_t n;
        uint64_t next; /* byte offset of the next entry */
        unsigned char block[BLOCK_MAX];
};

static int die(const char *what)
{
        fprintf(stderr, "logreplay: %s: %s\n", what, strerror(errno ? errno : EIO));
        return 1;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
        size_t done = 0;

        while (done < len) {
                ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        if (k == 0)
                                errno = EIO;
                        return -1;
                }
                done += (size_t)k;
        }
        return 0;
}

static int write_at(int fd, const void *buf, size_t len, uint64_t off)
{
        size_t done = 0;

        while (done < len) {
                ssize_t k = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        if (k == 0)
                                errno = EIO;
                        return -1;
                }
                done += (size_t)k;
        }
        return 0;
}

static uint64_t le64_at(const unsigned char *p)
{
        uint64_t v;

        memcpy(&v, p, sizeof v);
        return le64toh(v);
}

static int log_open(struct log *l, const char *path)
{
        unsigned char sb[512];
        uint32_t bs;

        l->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (l->fd < 0 || read_at(l->fd, sb, sizeof sb, 0) < 0)
                return die(path);
        memcpy(&bs, sb + 24, sizeof bs);
        l->bs = le32toh(bs);
        l->n = le64_at(sb + 16);
        if (le64_at(sb) != LOG_MAGIC || le64_at(sb + 8) != LOG_VERSION || l->bs < 512 ||
            l->bs > BLOCK_MAX || (l->bs & (l->bs - 1)) != 0) {
                fprintf(stderr, "logreplay: %s: not a dm-log-writes log of version 1\n", path);
                return 1;
        }
        l->next = l->bs;
        return 0;
}

/* Reads the entry at l->next into *e and advances past its header (not its data). */
static int entry_read(struct log *l, struct entry *e)
{
        if (read_at(l->fd, l->block, l->bs, l->next) < 0)
                return die("reading an entry");
        e->sector = le64_at(l->block);
        e->nr = le64_at(l->block + 8);
        e->flags = le64_at(l->block + 16);
        e->data_len = le64_at(l->block + 24);
        e->mark[0] = 0;
        if (e->flags & F_MARK) {
                size_t len = e->data_len < sizeof e->mark ? e->data_len : sizeof e->mark - 1;
                if (len > l->bs - 32)
                        len = l->bs - 32;
                memcpy(e->mark, l->block + 32, len);
                e->mark[len] = 0;
        }
        l->next += l->bs;
        return 0;
}

/* The bytes of data after an entry's header. */
static uint64_t data_bytes(const struct log *l, const struct entry *e)
{
        return (e->flags & F_DISCARD) ? 0 : e->nr * l->bs;
}

static void flag_word(uint64_t f, char *buf)
{
        char *p = buf;

        if (f & F_FLUSH)
                *p++ = 'F';
        if (f & F_FUA)
                *p++ = 'U';
        if (f & F_DISCARD)
                *p++ = 'D';
        if (f & F_MARK)
                *p++ = 'M';
        if (f & F_META)
                *p++ = 'm';
        if (p == buf)
                *p++ = '-';
        *p = 0;
}

static int cmd_list(const char *path)
{
        struct log *l = calloc(1, sizeof(*l));
        struct entry e;
        char fw[8];

        if (!l || log_open(l, path) != 0)
                return 1;
        for (uint64_t i = 0; i < l->n; i++) {
                if (entry_read(l, &e) != 0)
                        return 1;
                flag_word(e.flags, fw);
                printf("%" PRIu64 " %s %" PRIu64 " %" PRIu64 "%s%s\n", i, fw, e.sector, e.nr,
                       e.mark[0] ? " " : "", e.mark);
                l->next += data_bytes(l, &e);
        }
        return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_apply(const char *path, const char *dev, uint64_t from, uint64_t to)
{
        struct log *l = calloc(1, sizeof(*l));
        struct entry e;
        int out;

        if (!l || log_open(l, path) != 0)
                return 1;
        if (to > l->n || from > to) {
                fprintf(stderr, "logreplay: entries %" PRIu64 "..%" PRIu64 " of %" PRIu64 "\n",
                        from, to, l->n);
                return 2;
        }
        out = open(dev, O_WRONLY | O_CLOEXEC);
        if (out < 0)
                return die(dev);
        for (uint64_t i = 0; i < to; i++) {
                uint64_t len, off, done = 0;

                if (entry_read(l, &e) != 0)
                        return 1;
                len = (e.flags & F_DISCARD) ? e.nr * l->bs : data_bytes(l, &e);
                off = e.sector * l->bs;
                while (i >= from && done < len) {
                        size_t k = len - done < BLOCK_MAX ? (size_t)(len - done) : BLOCK_MAX;
                        if (e.flags & F_DISCARD)
                                memset(l->block, 0, k);
                        else if (read_at(l->fd, l->block, k, l->next + done) < 0)
                                return die("reading data");
                        if (write_at(out, l->block, k, off + done) < 0)
                                return die(dev);
                        done += k;
                }
                l->next += data_bytes(l, &e);
        }
        if (fsync(out) < 0 || close(out) < 0)
                return die(dev);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 3 && strcmp(argv[1], "list") == 0)
                return cmd_list(argv[2]);
        if (argc == 6 && strcmp(argv[1], "apply") == 0)
                return cmd_apply(argv[2], argv[3], strtoull(argv[4], NULL, 10),
                                 strtoull(argv[5], NULL, 10));
        fprintf(stderr, "usage: logreplay list LOG | logreplay apply LOG DEV FROM TO\n");
        return 2;
}
