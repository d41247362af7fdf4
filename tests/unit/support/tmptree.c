/* Test support: the temporary trees the tests make, and throwing them away. */
#include "tmptree.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int test_remove_tree(const char *path)
{
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
        return system(cmd) == 0 ? 0 : -1;
}

int test_tmpdir_new(struct tmpdir *ret, const char *prefix)
{
        const char *base = getenv("TMPDIR");

        snprintf(ret->path, sizeof ret->path, "%s/%s.XXXXXX", base ? base : "/tmp", prefix);
        if (!mkdtemp(ret->path))
                return -1;
        ret->fd = open(ret->path, O_PATH | O_DIRECTORY | O_CLOEXEC); /* as root_open() */
        if (ret->fd < 0) {
                rmdir(ret->path);
                return -1;
        }
        return 0;
}

int test_tmpdir_free(struct tmpdir *d)
{
        close(d->fd);
        return test_remove_tree(d->path);
}

int test_write_file(const char *dir, const char *rel, const char *text)
{
        char path[512];
        FILE *f;
        int r;

        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path)
                return -1;
        f = fopen(path, "w");
        if (!f)
                return -1;
        r = fputs(text, f) < 0 ? -1 : 0;
        if (fclose(f) != 0)
                r = -1;
        return r;
}
