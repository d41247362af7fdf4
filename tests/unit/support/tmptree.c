/* Test support: throwing away the temporary trees the tests make. */
#include "tmptree.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int test_remove_tree(const char *path)
{
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
        return system(cmd) == 0 ? 0 : -1;
}
