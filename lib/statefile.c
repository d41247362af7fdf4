/* Atomic, durable replacement and bounded reading of small state files (the pattern of
 * systemd's fileio.c: O_TMPFILE + linkat, else a unique temp name; fsync; rename; fsync dir). */
#include "statefile.h"

#include "fsroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define TMP_TAG       ".tmp-"
#define TMP_HEXDIGITS 16
#define TMP_ATTEMPTS  16

static bool name_valid(const char *name)
{
        size_t l;

        if (!name)
                return false;
        l = strlen(name);
        return l > 0 && l <= STATEFILE_NAME_MAX && strcmp(name, ".") != 0 &&
               strcmp(name, "..") != 0 && !strchr(name, '/');
}

/* ".NAME.tmp-" and 16 random hex digits. */
static void tmp_name(char *buf, size_t size, const char *name)
{
        static unsigned long counter;
        uint64_t x = 0;

        if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x)
                x = now_monotonic() ^ ((uint64_t)getpid() << 32) ^
                    __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ULL;
        snprintf(buf, size, ".%s" TMP_TAG "%016llx", name, (unsigned long long)x);
}

static int write_all(int fd, const void *data, size_t len)
{
        const char *p = data;

        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Errors after which another way of creating the temp file cannot help. */
static bool is_final(int e)
{
        return e == ENOSPC || e == EDQUOT || e == EIO || e == EROFS || e == ENOMEM || e == EFBIG;
}

/* Links the written O_TMPFILE fd as a temp name in dir and renames it over name. Returns 0,
 * -errno, or 1 when linking is impossible here (no /proc, no privilege): fall back. */
static int link_and_rename(int fd, int dir, const char *name)
{
        char tmp[NAME_MAX + 1], proc[64];

        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
                int e;

                tmp_name(tmp, sizeof tmp, name);
                if (linkat(AT_FDCWD, proc, dir, tmp, AT_SYMLINK_FOLLOW) < 0) {
                        e = errno;
                        if (e == ENOENT && linkat(fd, "", dir, tmp, AT_EMPTY_PATH) == 0)
                                e = 0;
                        else if (e == ENOENT)
                                e = errno;
                        if (e == EEXIST)
                                continue;
                        if (e != 0)
                                return is_final(e) ? -e : 1;
                }
                if (renameat(dir, tmp, dir, name) < 0) {
                        e = errno;
                        (void)unlinkat(dir, tmp, 0);
                        return -e;
                }
                return 0;
        }
        return -EEXIST;
}

/* The O_TMPFILE way. Returns 0, -errno, or 1 to fall back to a named temp file. */
static int write_via_tmpfile(int dir, const char *name, const void *data, size_t len)
{
        _cleanup_close_ int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, STATEFILE_MODE);
        int r;

        if (fd < 0)
                return is_final(errno) ? -errno : 1;
        /* The umask may have taken bits away (or, at 0, left them): exactly STATEFILE_MODE. */
        if (fchmod(fd, STATEFILE_MODE) < 0)
                return -errno;
        r = write_all(fd, data, len);
        if (r < 0)
                return r; /* the unlinked file goes with the fd */
        if (fsync(fd) < 0)
                return -errno;
        return link_and_rename(fd, dir, name);
}

static int write_via_named(int dir, const char *name, const void *data, size_t len)
{
        char tmp[NAME_MAX + 1];
        int fd = -1, r;

        for (int attempt = 0; attempt < TMP_ATTEMPTS && fd < 0; attempt++) {
                tmp_name(tmp, sizeof tmp, name);
                fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                            STATEFILE_MODE);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        r = fchmod(fd, STATEFILE_MODE) < 0 ? -errno : 0;
        if (r == 0)
                r = write_all(fd, data, len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0 && errno != EINTR)
                r = -errno;
        if (r == 0 && renameat(dir, tmp, dir, name) < 0)
                r = -errno;
        if (r < 0)
                (void)unlinkat(dir, tmp, 0);
        return r;
}

int statefile_write_atomic_flags(int dirfd, const char *name, const void *data, size_t len,
                                 unsigned flags)
{
        _cleanup_close_ int dir = -1;
        int r = 1;

        if (!name_valid(name) || (!data && len > 0))
                return -EINVAL;
        if (len > STATEFILE_MAX_SIZE)
                return -EFBIG;
        /* A readable fd of the directory: dirfd may be O_PATH, which fsync() refuses. */
        dir = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        if (!(flags & STATEFILE_NO_TMPFILE))
                r = write_via_tmpfile(dir, name, data, len);
        if (r == 1)
                r = write_via_named(dir, name, data, len);
        if (r < 0)
                return r;
        if (fsync(dir) < 0)
                return -errno;
        return 0;
}

int statefile_write_atomic(int dirfd, const char *name, const void *data, size_t len)
{
        return statefile_write_atomic_flags(dirfd, name, data, len, 0);
}

/* Opens name below dirfd for reading, not through a link, and fills ret_st: returns the fd, or
 * -errno (-EINVAL when it is not a regular file). */
static int open_regular(int dirfd, const char *name, struct stat *ret_st)
{
        int fd, r = 0;

        /* O_NONBLOCK: opening a FIFO put there must not hang; regular files ignore it. */
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, ret_st) < 0)
                r = -errno;
        else if (!S_ISREG(ret_st->st_mode))
                r = -EINVAL;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int statefile_read(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (!name_valid(name))
                return -EINVAL;
        if (max > SIZE_MAX / 4)
                max = SIZE_MAX / 4; /* room for the arithmetic below */
        fd = open_regular(dirfd, name, &st);
        if (fd < 0)
                return fd;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        return read_fd_all(fd, max, ret, ret_len);
}

static bool is_stale_name(const char *entry, const char *name)
{
        size_t nl = strlen(name), tl = strlen(TMP_TAG);
        const char *p = entry;

        if (p[0] != '.' || strncmp(p + 1, name, nl) != 0 || strncmp(p + 1 + nl, TMP_TAG, tl) != 0)
                return false;
        p += 1 + nl + tl;
        for (int i = 0; i < TMP_HEXDIGITS; i++, p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return *p == 0;
}

int statefile_remove_stale(int dirfd, const char *name)
{
        int fd, removed = 0;
        struct dirent *e;
        DIR *d;

        if (!name_valid(name))
                return -EINVAL;
        fd = opendir_at(dirfd, &d);
        if (fd < 0)
                return fd;
        while ((e = readdir(d)))
                if (is_stale_name(e->d_name, name) && unlinkat(fd, e->d_name, 0) == 0)
                        removed++;
        closedir(d);
        return removed;
}

int statefile_restrict_mode(int dirfd, const char *name)
{
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (!name_valid(name))
                return -EINVAL;
        fd = open_regular(dirfd, name, &st);
        if (fd < 0)
                return fd;
        if ((st.st_mode & 07777) == STATEFILE_MODE)
                return 0;
        return fchmod(fd, STATEFILE_MODE) < 0 ? -errno : 1;
}

#define ASIDE_ATTEMPTS 100
#define ASIDE_TAG_MAX  16

static bool tag_valid(const char *tag)
{
        size_t l = tag ? strlen(tag) : 0;

        if (l == 0 || l > ASIDE_TAG_MAX)
                return false;
        for (size_t i = 0; i < l; i++)
                if (tag[i] < 'a' || tag[i] > 'z')
                        return false;
        return true;
}

static bool name_taken(int dir, const char *name, int *ret_err)
{
        struct stat st;

        *ret_err = 0;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return true;
        if (errno != ENOENT)
                *ret_err = -errno;
        return false;
}

/* Renames name to aside unless aside exists. Returns 0, -EEXIST or -errno. */
static int move_aside(int dir, const char *name, const char *aside)
{
        int e;

        if (renameat2(dir, name, dir, aside, RENAME_NOREPLACE) == 0)
                return 0;
        if (errno != EINVAL && errno != ENOSYS)
                return -errno;
        /* A filesystem without RENAME_NOREPLACE: look first (only we write these names). */
        if (name_taken(dir, aside, &e))
                return -EEXIST;
        if (e < 0)
                return e;
        return renameat(dir, name, dir, aside) < 0 ? -errno : 0;
}

/* Makes aside a second name of name (a hard link, else a copy). Returns 0, -EEXIST or -errno. */
static int keep_aside(int dir, const char *name, const char *aside)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int e;

        if (linkat(dir, name, dir, aside, 0) == 0)
                return 0;
        if (errno != EPERM && errno != EOPNOTSUPP && errno != EMLINK)
                return -errno;
        /* No hard link possible here (a filesystem without them, protected_hardlinks): a copy. */
        if (name_taken(dir, aside, &e))
                return -EEXIST;
        if (e < 0)
                return e;
        e = statefile_read(dir, name, STATEFILE_MAX_SIZE, &buf, &len);
        return e < 0 ? e : statefile_write_atomic(dir, aside, buf, len);
}

/* Aside names: "NAME.TAG-YYYYMMDDTHHMMSSZ.N", N the order in which they were made (1 + the
 * highest N in the directory, whatever the clock says); names of the older form without ".N"
 * ("NAME.TAG-STAMP", "-2", "-3", ... when a second had several) were made before any with one. */
#define ASIDE_SEQ_MAX 999999999UL

struct aside_key {
        char tag[ASIDE_TAG_MAX + 1];
        char stamp[16];
        unsigned long sub; /* the older form's "-N" (1 without) */
        unsigned long seq; /* ".N"; 0: the older form */
};

/* A decimal number 1 to max without leading zeros, the whole of s. */
static bool parse_number(const char *s, unsigned long max, unsigned long *ret)
{
        unsigned long v = 0;

        if (!(s[0] >= '1' && s[0] <= '9'))
                return false;
        for (; *s; s++) {
                if (!(*s >= '0' && *s <= '9') || v > (max - (unsigned long)(*s - '0')) / 10)
                        return false;
                v = v * 10 + (unsigned long)(*s - '0');
        }
        *ret = v;
        return true;
}

/* Whether entry is an aside name of name; fills *ret_key. */
static bool parse_aside(const char *entry, const char *name, struct aside_key *ret_key)
{
        size_t nl = strlen(name), tl = 0;
        const char *p = entry;

        if (strncmp(p, name, nl) != 0 || p[nl] != '.')
                return false;
        p += nl + 1;
        while (p[tl] >= 'a' && p[tl] <= 'z')
                tl++;
        if (tl == 0 || tl > ASIDE_TAG_MAX || p[tl] != '-')
                return false;
        memcpy(ret_key->tag, p, tl);
        ret_key->tag[tl] = 0;
        p += tl + 1;
        for (int i = 0; i < 15; i++)
                if (i == 8 ? p[i] != 'T' : !(p[i] >= '0' && p[i] <= '9'))
                        return false;
        if (p[15] != 'Z')
                return false;
        memcpy(ret_key->stamp, p, 15);
        ret_key->stamp[15] = 0;
        p += 16;
        ret_key->sub = 1;
        ret_key->seq = 0;
        if (*p == 0)
                return true;
        if (*p == '.')
                return parse_number(p + 1, ASIDE_SEQ_MAX, &ret_key->seq);
        return *p == '-' && parse_number(p + 1, ULONG_MAX, &ret_key->sub) && ret_key->sub > 1;
}

struct aside_entry {
        struct aside_key key;
        char *name;
};

/* The order they were made: the older form first (by stamp, then number), then by N. */
static int cmp_aside(const void *a, const void *b)
{
        const struct aside_entry *x = a, *y = b;
        int c;

        if (x->key.seq != y->key.seq)
                return x->key.seq < y->key.seq ? -1 : 1;
        c = strcmp(x->key.stamp, y->key.stamp);
        if (c != 0)
                return c;
        if (x->key.sub != y->key.sub)
                return x->key.sub < y->key.sub ? -1 : 1;
        return strcmp(x->name, y->name);
}

/* The aside names of name in dir, oldest first, into *ret (malloc'd). Returns how many or
 * -errno. */
static int list_aside(int dir, const char *name, struct aside_entry **ret)
{
        struct aside_entry *v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        DIR *d;
        int fd = opendir_at(dir, &d);

        if (fd < 0)
                return fd;
        while ((e = readdir(d))) {
                struct aside_key k;

                if (!parse_aside(e->d_name, name, &k))
                        continue;
                GROW(v, cap, n + 1);
                v[n++] = (struct aside_entry){.key = k, .name = xstrdup(e->d_name)};
        }
        closedir(d);
        if (n > 1)
                qsort(v, n, sizeof(v[0]), cmp_aside);
        *ret = v;
        return (int)n;
}

static void free_aside(struct aside_entry *v, int n)
{
        for (int i = 0; i < n; i++)
                free(v[i].name);
        free(v);
}

int statefile_list_aside(int dirfd, const char *name, char ***ret)
{
        struct aside_entry *v = NULL;
        char **names;
        int n;

        if (!name_valid(name))
                return -EINVAL;
        n = list_aside(dirfd, name, &v);
        if (n < 0)
                return n;
        names = n > 0 ? xcalloc((size_t)n, sizeof(*names)) : NULL;
        for (int i = 0; i < n; i++)
                names[i] = v[i].name; /* handed over */
        free(v);
        *ret = names;
        return n;
}

/* An aside name of name that already is a hard link to it (a copy made before, the file not
 * replaced since): copied into aside. Returns whether there is one. */
static bool already_kept(int dir, const char *name, char aside[NAME_MAX + 1])
{
        struct aside_entry *v = NULL;
        struct stat st, a;
        bool found = false;
        int n;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_nlink < 2)
                return false;
        n = list_aside(dir, name, &v);
        for (int i = n - 1; i >= 0 && !found; i--)
                if (fstatat(dir, v[i].name, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
                    a.st_dev == st.st_dev && a.st_ino == st.st_ino) {
                        (void)strscpy(aside, v[i].name, NAME_MAX + 1);
                        found = true;
                }
        free_aside(v, n);
        return found;
}

/* The N of the next aside name of name: 1 + the highest there is. Returns 0 when none is left
 * (a name at ASIDE_SEQ_MAX) or -errno. */
static long next_seq(int dir, const char *name)
{
        struct aside_entry *v = NULL;
        int n = list_aside(dir, name, &v);
        unsigned long top = 0;

        if (n < 0)
                return n;
        for (int i = 0; i < n; i++)
                if (v[i].key.seq > top)
                        top = v[i].key.seq;
        free_aside(v, n);
        return top < ASIDE_SEQ_MAX ? (long)(top + 1) : 0;
}

/* Whether v[i] is the oldest of its tag still there (gone[] marks the removed) while a newer one
 * of that tag is (one of tag coming about to be made counts): the first copy of a kind, the file
 * from before the first reset, outlives the later ones. */
static bool first_of_kind(const struct aside_entry *v, const bool *gone, int n, int i,
                          const char *coming)
{
        for (int j = 0; j < i; j++)
                if (!gone[j] && strcmp(v[j].key.tag, v[i].key.tag) == 0)
                        return false;
        if (coming && strcmp(coming, v[i].key.tag) == 0)
                return true;
        for (int j = i + 1; j < n; j++)
                if (!gone[j] && strcmp(v[j].key.tag, v[i].key.tag) == 0)
                        return true;
        return false;
}

/* Removes aside names of name in the order they were made until at most max are left: never
 * keep (the one just made, or NULL), never the first of a kind while a newer one of its kind is
 * there (coming: the tag of a copy about to be made, or NULL). Best effort. */
static void prune_aside(int dir, const char *name, int max, const char *keep, const char *coming)
{
        struct aside_entry *v = NULL;
        int n = list_aside(dir, name, &v), left = n;
        bool *gone, *tried, removed = true;

        if (n <= max) {
                free_aside(v, n);
                return;
        }
        gone = xcalloc((size_t)n, sizeof(*gone));
        tried = xcalloc((size_t)n, sizeof(*tried));
        /* again while something went: the first of a kind is free to go once it is alone */
        while (left > max && removed) {
                removed = false;
                for (int i = 0; i < n && left > max; i++) {
                        if (gone[i] || tried[i] || (keep && strcmp(v[i].name, keep) == 0) ||
                            first_of_kind(v, gone, n, i, coming))
                                continue;
                        tried[i] = true;
                        if (unlinkat(dir, v[i].name, 0) == 0 ||
                            (errno == EISDIR && unlinkat(dir, v[i].name, AT_REMOVEDIR) == 0)) {
                                gone[i] = removed = true;
                                left--;
                        } else {
                                log_debug("cannot remove an old aside copy", "name", v[i].name);
                        }
                }
        }
        free(tried);
        free(gone);
        free_aside(v, n);
}

int statefile_set_aside(int dirfd, const char *name, const char *tag, unsigned flags,
                        char *ret_name, size_t size)
{
        _cleanup_close_ int dir = -1;
        char aside[NAME_MAX + 1], stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        long seq;
        int r = -EEXIST;

        if (!name_valid(name) || !tag_valid(tag))
                return -EINVAL;
        dir = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        if (!gmtime_r(&now, &tm) || strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm) == 0)
                return -EOVERFLOW;
        if ((flags & STATEFILE_ASIDE_KEEP) && already_kept(dir, name, aside)) {
                r = 0;
        } else {
                if (fstatat(dir, name, &(struct stat){0}, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                /* room first, so that no more than STATEFILE_ASIDE_MAX are ever there, even
                 * when this process is killed between the two steps */
                prune_aside(dir, name, STATEFILE_ASIDE_MAX - 1, NULL, tag);
                seq = next_seq(dir, name);
                if (seq <= 0)
                        return seq < 0 ? (int)seq : -EOVERFLOW;
                for (unsigned tries = 0;
                     tries < ASIDE_ATTEMPTS && r == -EEXIST && (unsigned long)seq <= ASIDE_SEQ_MAX;
                     tries++, seq++) {
                        snprintf(aside, sizeof aside, "%s.%s-%s.%ld", name, tag, stamp, seq);
                        r = flags & STATEFILE_ASIDE_KEEP ? keep_aside(dir, name, aside)
                                                         : move_aside(dir, name, aside);
                }
        }
        if (r < 0)
                return r;
        /* what an older version or a killed run left beyond the bound */
        prune_aside(dir, name, STATEFILE_ASIDE_MAX, aside, NULL);
        if (fsync(dir) < 0)
                return -errno;
        if (ret_name && size > 0)
                (void)strscpy(ret_name, aside, size);
        return 0;
}

int statefile_lock(int dirfd)
{
        if (flock(dirfd, LOCK_EX | LOCK_NB) == 0)
                return 0;
        return errno == EWOULDBLOCK ? -EBUSY : -errno;
}

int statefile_unlock(int dirfd)
{
        return flock(dirfd, LOCK_UN) < 0 ? -errno : 0;
}

int statefile_lock_holder(int fd)
{
        char line[256];
        FILE *f;
        struct stat st;
        int pid = 0;

        if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
                return 0;
        /* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (fs/locks.c, lock_get_status():
         * major and minor in hex, the inode in decimal); waiters' lines have "->" after the
         * number. */
        while (pid == 0 && fgets(line, sizeof line, f)) {
                unsigned maj, min;
                unsigned long long ino;
                char kind[16], arrow[4];
                int p;

                if (sscanf(line, "%*d: %2s", arrow) == 1 && strcmp(arrow, "->") == 0)
                        continue;
                if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", kind, &p, &maj, &min, &ino) ==
                        5 &&
                    strcmp(kind, "FLOCK") == 0 && p > 0 && maj == major(st.st_dev) &&
                    min == minor(st.st_dev) && ino == (unsigned long long)st.st_ino)
                        pid = p;
        }
        fclose(f);
        return pid;
}
