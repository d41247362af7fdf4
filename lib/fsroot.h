/* Reading files below a root directory fd (--path.procfs, --path.sysfs, --path.udev.data), so
 * the same code reads the host or a fixture tree. */
#pragma once

#include <dirent.h>
#include <stddef.h>

/* Opens a root directory (O_PATH|O_DIRECTORY|O_CLOEXEC). Returns the fd or -errno. */
int root_open(const char *path);

/* Reads a small attribute file with one read() into buf (NUL-terminated, trailing newlines
 * stripped). Returns the length, -errno, or -EFBIG when it does not fit. */
int read_attr_at(int dirfd, const char *path, char *buf, size_t size);

/* Reads everything from fd (at most max bytes) into *ret_buf (malloc'd, NUL-terminated).
 * Returns 0 and sets *ret_len, or -errno (-EFBIG past max); *ret_buf untouched on failure. */
int read_fd_all(int fd, size_t max, char **ret_buf, size_t *ret_len);

/* Reads a whole file of any size into *ret_buf (malloc'd, NUL-terminated), at most max bytes.
 * Returns 0 and sets *ret_len, or -errno (-EFBIG past max); *ret_buf untouched on failure. */
int read_file_at(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len);

/* Opens the directory dirfd itself for reading its entries (a fresh descriptor, so that dirfd
 * stays open and its position untouched). Returns that descriptor, which *ret owns (closedir()
 * it; the descriptor goes with it), or -errno. */
int opendir_at(int dirfd, DIR **ret);
