/* Test support: throwing away the temporary trees the tests make (fixture sysfs, state dirs). */
#pragma once

/* Removes path and everything below it (rm -rf); returns 0, or -1 when that failed. */
int test_remove_tree(const char *path);
