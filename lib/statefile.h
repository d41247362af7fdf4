/* Small state files in the state directory, replaced atomically and durably (temp file, fsync,
 * rename, fsync of the directory) and read back with a size limit. */
#pragma once

#include <stddef.h>

/* Largest file statefile_write_atomic() writes. */
#define STATEFILE_MAX_SIZE (16u * 1024 * 1024)
/* Longest name (temp names add a prefix and a suffix within NAME_MAX). */
#define STATEFILE_NAME_MAX 200

/* The mode of every file statefile_write_atomic() creates, whatever the umask: state files may
 * hold disk serials and other host facts that are nobody else's business. */
#define STATEFILE_MODE 0600

/* Flags of statefile_write_atomic_flags(). */
enum {
        /* Skip O_TMPFILE and use a named temp file, as on filesystems without it. */
        STATEFILE_NO_TMPFILE = 1u << 0,
};

/* Replaces the file name in directory dirfd (any fd of the directory, O_PATH included, or
 * AT_FDCWD) with len bytes of data, mode STATEFILE_MODE (0600) regardless of the umask (set with
 * fchmod before anything is written): the data goes to a temp file in
 * the same directory (O_TMPFILE linked under a temporary name where the filesystem and /proc
 * allow, else ".NAME.tmp-XXXXXXXXXXXXXXXX" created with O_EXCL), which is fsync'ed and renamed
 * over name; then the directory is fsync'ed. Readers see the old or the new content, never a
 * mix, and after a crash one of the two. Returns 0, or -errno: -EINVAL for a name that is empty,
 * ".", "..", contains '/' or is longer than STATEFILE_NAME_MAX, -EFBIG above STATEFILE_MAX_SIZE,
 * else the failing call's error (-ENOSPC, -EROFS, -EACCES, -EIO, ...). On failure before the
 * rename the temp file is removed and the old file is left intact; only a failure of the final
 * directory fsync (-EIO and the like) comes after the rename: the new content is in place but
 * may not survive a crash. Any thread; concurrent writers of the same name are serialized by
 * the rename (the last one wins). */
int statefile_write_atomic(int dirfd, const char *name, const void *data, size_t len);
/* The same with STATEFILE_* flags. */
int statefile_write_atomic_flags(int dirfd, const char *name, const void *data, size_t len,
                                 unsigned flags);

/* Reads the regular file name in dirfd (symlinks not followed) into a malloc'd buffer with a
 * NUL after the data (the caller frees it). Returns 0 and sets *ret / *ret_len, or -errno:
 * -ENOENT when absent, -EFBIG when larger than max bytes, -EINVAL for a bad name or a file that
 * is not regular, -ELOOP for a symlink, else the failing call's error. ret and ret_len are
 * untouched on failure. Any thread. */
int statefile_read(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len);

/* Removes temp files of name left by a crash during a named-temp write (".NAME.tmp-" followed by
 * 16 hex digits). Call it at start, before writing. Returns how many were removed, or -errno
 * when the directory cannot be read (-EINVAL for a bad name). Not while another process writes
 * name. */
int statefile_remove_stale(int dirfd, const char *name);

/* Sets the mode of the regular file name in dirfd (symlinks not followed) to STATEFILE_MODE, for
 * a file an older version or another tool wrote with a wider one. Returns 1 when it changed, 0
 * when it already was, or -errno (-ENOENT, -EINVAL for a bad name or a file that is not
 * regular, -EPERM for a file of another owner). Any thread. */
int statefile_restrict_mode(int dirfd, const char *name);

/* Flags of statefile_set_aside(). */
enum {
        /* Keep name as it is and give its content a second name (a hard link, else a copy). */
        STATEFILE_ASIDE_KEEP = 1u << 0,
};

/* Aside copies of one name kept at most, all tags together: statefile_set_aside() makes room
 * before it makes one, so that no more are ever there. */
#define STATEFILE_ASIDE_MAX 10

/* Sets the file name in dirfd aside for a human to look at: renames it (whatever it is: a bad
 * file, a directory, a symlink) to "NAME.TAG-YYYYMMDDTHHMMSSZ.N" (UTC now; N the order in which
 * the aside names were made: 1 + the highest N there, whatever the clock says; never replacing
 * anything), or with STATEFILE_ASIDE_KEEP leaves name in place and makes the aside name a hard
 * link to it (a copy where the filesystem has no hard links, mode STATEFILE_MODE); when an aside
 * name of any tag already is a hard link to name, that one is the copy and nothing new is made.
 * Before a new one is made, aside names of name are removed in the order they were made (names
 * of the older form without ".N" first, by their time and "-N") until STATEFILE_ASIDE_MAX - 1
 * are left, but never the first of a tag while a newer one of that tag is there or about to be
 * made (of a series of resets, the file from before the first one stays); after it, any beyond
 * STATEFILE_ASIDE_MAX, never the one just made. Then the directory is fsync'ed. tag is 1 to 16
 * lowercase letters ("corrupt"). Writes the aside name into ret_name (size bytes; may be NULL).
 * Returns 0, or -errno: -EINVAL for a bad name or tag, -ENOENT when name does not exist, -EEXIST
 * when 100 aside names in a row are taken, -EOVERFLOW when N would pass 999999999, else the
 * failing call's error (-EROFS, -EACCES, -ENOSPC for a copy, -EIO). Any thread; not while
 * another thread writes name. */
int statefile_set_aside(int dirfd, const char *name, const char *tag, unsigned flags,
                        char *ret_name, size_t size);

/* Lists the aside names of name in dirfd, in the order they were made (oldest first), into a
 * malloc'd array of malloc'd strings (the caller frees each and the array). Returns how many
 * (0: *ret NULL), or -errno. */
int statefile_list_aside(int dirfd, const char *name, char ***ret);

/* The lock of a state directory: one writer at a time. Takes an exclusive flock(2) on dirfd (a
 * descriptor of the directory itself, O_RDONLY), without waiting. It is the open file
 * description's: held until the last descriptor of it is closed, dropped by the kernel when the
 * process dies, never inherited by a process started with exec (O_CLOEXEC), but shared with a
 * child forked while it is open. Returns 0, -EBUSY when another open file description holds it
 * (another process), or -errno (-EBADF, -ENOLCK). */
int statefile_lock(int dirfd);

/* Releases the lock statefile_lock() took through dirfd's open file description, even while
 * other descriptors of it stay open (a thread abandoned in a hung system call may keep one, and
 * with it the lock, long after the process meant to exit). Returns 0 or -errno. */
int statefile_unlock(int dirfd);

/* The process that holds a flock(2) lock on the file of fd, from /proc/locks (in this process's
 * PID namespace): its pid, 0 when none is listed or it cannot be told (a pid outside the
 * namespace, no /proc). For messages only: the answer may be stale at once. */
int statefile_lock_holder(int fd);
