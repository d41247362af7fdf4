/* Reading files below a root directory fd (--path.procfs, --path.sysfs, --path.udev.data), so
 * the same code reads the host or a fixture tree. */
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

/* Opens a root directory (O_PATH|O_DIRECTORY|O_CLOEXEC). Returns the fd or -errno. */
int root_open(const char *path);

/* Reads a small attribute file with one read() into buf (NUL-terminated, trailing newlines
 * stripped). Only a regular file (what sysfs and procfs attributes are) is opened and read, as
 * open_regular_at() does, so that a FIFO or a device node put in a root never blocks the caller.
 * Returns the length, -errno, -EINVAL when it is not a regular file, or -EFBIG when it does not
 * fit. */
int read_attr_at(int dirfd, const char *path, char *buf, size_t size);

/* What a file of type mode (st_mode) is, for a message: "a directory", "a FIFO", "a socket", "a
 * character device", "a block device", "a symbolic link", "a regular file", or "not a regular
 * file". Pure. */
const char *file_kind(mode_t mode);

/* Opens path below dirfd for reading a regular file. Anything else is refused before it is
 * opened (opening a device node can act: a watchdog starts counting), and the open is
 * non-blocking (O_NONBLOCK, which regular files ignore), so that a FIFO swapped in meanwhile opens
 * at once instead of waiting for a writer, and is refused by fstat() on the descriptor; so is a
 * file of more than max bytes. Returns the descriptor (O_CLOEXEC), or -errno: -EINVAL for anything but a regular
 * file, -EFBIG past max. When why is not NULL it gets the reason of a failure, for a message
 * such as "cannot read config file PATH: WHY": "a FIFO, not a regular file", "larger than 1 MiB",
 * or strerror(). Any thread. */
int open_regular_at(int dirfd, const char *path, size_t max, char *why, size_t whysz);

/* open_regular_at(), then the whole file (at most max bytes) into *ret_buf (malloc'd,
 * NUL-terminated): what every file named by a flag, the config file or the web config is read
 * with (they could be swapped for a FIFO, which would block the main loop on SIGHUP forever).
 * Returns 0 and sets *ret_len, or open_regular_at()'s -errno (or a read's), with the reason in
 * why (may be NULL); *ret_buf untouched on failure. */
int read_regular_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len,
                    char *why, size_t whysz);

/* Reads everything from fd (at most max bytes) into *ret_buf (malloc'd, NUL-terminated).
 * Returns 0 and sets *ret_len, or -errno (-EFBIG past max); *ret_buf untouched on failure. */
int read_fd_all(int fd, size_t max, char **ret_buf, size_t *ret_len);

/* Reads a whole file of any size into *ret_buf (malloc'd, NUL-terminated), at most max bytes,
 * whatever its type, and blocks on a FIFO until a writer comes: for a one-shot command's input,
 * which may be a pipe (a shell's <(...)). The daemon reads its files with read_regular_at().
 * Returns 0 and sets *ret_len, or -errno (-EFBIG past max); *ret_buf untouched on failure. */
int read_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len);

/* Opens the directory dirfd itself for reading its entries (a fresh descriptor, so that dirfd
 * stays open and its position untouched). Returns that descriptor, which *ret owns (closedir()
 * it; the descriptor goes with it), or -errno. */
int opendir_at(int dirfd, DIR **ret);
