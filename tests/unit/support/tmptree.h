/* Test support: throwing away the temporary trees the tests make (fixture sysfs, state dirs). */
#pragma once

/* Removes path and everything below it (rm -rf); returns 0, or -1 when that failed. */
int test_remove_tree(const char *path);

/* A fresh directory below $TMPDIR (else /tmp) named PREFIX.XXXXXX, and a descriptor of it opened
 * O_PATH, as the daemon opens its roots (root_open()). */
struct tmpdir {
        char path[256];
        int fd;
};

/* Makes *ret; returns 0, or -1 (nothing left behind). */
int test_tmpdir_new(struct tmpdir *ret, const char *prefix);
/* Closes the descriptor and removes the tree; returns 0, or -1 when the removal failed. */
int test_tmpdir_free(struct tmpdir *d);

/* Writes text into dir/rel (created or truncated); returns 0, or -1 when that failed. */
int test_write_file(const char *dir, const char *rel, const char *text);
