/* The descriptors this process has open, for tests that check an error path leaks none: compare
 * the count before and after. Needs cmocka's headers included before it. */
#pragma once

#include <dirent.h>

static inline int open_fd_count(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        int n = 0;

        assert_non_null(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own descriptor */
}
