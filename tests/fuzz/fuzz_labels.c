/* Fuzz target of labels_next (lib/metrics.c), the parser of rendered label strings that the
 * protobuf exposition unescapes labels with: no crash, no read past the string; a string that
 * parses whole is rendered back identically from its pairs (metric_escape_value), and a value
 * parsed into a buffer too small is refused, never cut. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *in = malloc(size + 1), *value = malloc(size + 1), *out = malloc(3 * size + 8);
        const char *pos, *name;
        size_t nl, vl, o = 0;
        int r;

        memcpy(in, data, size);
        in[size] = 0;
        pos = in;
        while ((r = labels_next(&pos, &name, &nl, value, size + 1, &vl)) == 1) {
                if (pos < in || pos > in + strlen(in) || vl != strlen(value))
                        abort();
                if (o)
                        out[o++] = ',';
                memcpy(out + o, name, nl);
                o += nl;
                out[o++] = '=';
                out[o++] = '"';
                o += metric_escape_value(value, out + o);
                out[o++] = '"';
        }
        out[o] = 0;
        /* a whole parse renders back as it was (but for a trailing comma), unless a value held
         * bytes the escaping replaces (control bytes, invalid UTF-8), which mset_labels never
         * leaves in */
        if (r == 0 &&
            strspn(in, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_=\",\\ ") ==
                size &&
            !(strcmp(out, in) == 0 || (o + 1 == size && in[o] == ',' && memcmp(out, in, o) == 0)))
                abort();
        if (r == 0 && o > 0) {
                /* too small a buffer for the first value: refused */
                char small[1];
                pos = in;
                r = labels_next(&pos, &name, &nl, small, sizeof small, &vl);
                if (r == 1 && vl != 0)
                        abort();
        }
        free(in);
        free(value);
        free(out);
        return 0;
}
