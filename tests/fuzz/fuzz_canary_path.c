/* Fuzz target of the records' path normal form (canary_path_normalize(), what
 * --canary.import-path and --canary.reset-reference are taken as): what is accepted is absolute,
 * has no empty, "." or ".." component and no trailing slash, fits, is a fixed point, and is
 * accepted whatever bytes the components hold; what is refused is relative, empty or too long. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "canary_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1), out[CANARY_PATH_MAX], again[CANARY_PATH_MAX];
        size_t len;
        int r;

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = 0; /* a NUL inside ends the path, as in argv */
        r = canary_path_normalize(s, out, sizeof out);
        if (r == -EINVAL) {
                if (s[0] == '/')
                        abort();
                free(s);
                return 0;
        }
        if (r == -ENAMETOOLONG) {
                if (strlen(s) < sizeof out)
                        abort(); /* normalising never lengthens */
                free(s);
                return 0;
        }
        if (r != 0 || s[0] != '/')
                abort();
        len = strlen(out);
        if (len == 0 || len >= sizeof out || out[0] != '/' || len > strlen(s))
                abort();
        if (len > 1 && out[len - 1] == '/')
                abort();
        if (strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../"))
                abort();
        if ((len >= 2 && strcmp(out + len - 2, "/.") == 0) ||
            (len >= 3 && strcmp(out + len - 3, "/..") == 0))
                abort();
        if (canary_path_normalize(out, again, sizeof again) != 0 || strcmp(out, again) != 0)
                abort();
        free(s);
        return 0;
}
