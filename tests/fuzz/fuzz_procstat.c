/* Fuzz target of the /proc/self/stat parser. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *buf = malloc(size + 1);
        uint64_t ticks = 1, vsize = 2, rss = 3;
        int r;

        if (!buf)
                abort();
        memcpy(buf, data, size);
        buf[size] = 0;
        r = process_parse_stat(buf, &ticks, &vsize, &rss);
        if (r != 0 && r != -EINVAL)
                abort();
        if (r != 0 && (ticks != 1 || vsize != 2 || rss != 3))
                abort(); /* outputs untouched on failure */
        if (r == 0 && !strrchr(buf, ')'))
                abort();
        free(buf);
        return 0;
}
