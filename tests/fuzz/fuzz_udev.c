/* Fuzz target of the udev database parser and udev's \xNN decoding. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ctx {
        const char *buf;
        size_t len;
        int calls;
};

/* True when decoding can produce a NUL byte: a raw one or a \x00 escape. */
static bool makes_nul(const char *in, size_t len)
{
        if (memchr(in, 0, len))
                return true;
        for (size_t i = 0; i + 3 < len; i++)
                if (in[i] == '\\' && in[i + 1] == 'x' && in[i + 2] == '0' && in[i + 3] == '0')
                        return true;
        return false;
}

/* Decodes into buffers of several sizes and checks the result's shape. */
static void check_decode(const char *in, size_t len)
{
        static const size_t sizes[] = {1, 2, 7, DEV_STR_MAX};
        char out[DEV_STR_MAX + 1];
        /* Known bug (tests/unit/test_bugs.c): with an embedded NUL the trim works on the bytes
         * after it, so the string can keep trailing spaces. Its shape is checked otherwise. */
        bool nul = makes_nul(in, len);

        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                size_t size = sizes[k], n;

                out[size] = 'Z'; /* guard: nothing is written past size */
                device_udev_decode(in, len, out, size);
                if (out[size] != 'Z')
                        abort();
                n = strnlen(out, size);
                if (n >= size)
                        abort(); /* terminated within size */
                if (n > 0 && (out[0] == ' ' || out[0] == '\t'))
                        abort();
                if (!nul && n > 0 &&
                    (out[n - 1] == ' ' || out[n - 1] == '\t' || out[n - 1] == '\n'))
                        abort();
                /* decoding never makes a string longer than its input */
                if (n > len)
                        abort();
        }
}

static void on_prop(const char *key, size_t klen, const char *value, size_t vlen, void *userdata)
{
        struct ctx *c = userdata;

        c->calls++;
        /* both within the input, on one line, the key without '=' */
        if (key < c->buf || key + klen > c->buf + c->len)
                abort();
        if (value < c->buf || value + vlen > c->buf + c->len)
                abort();
        if (klen == 0 || value != key + klen + 1 || key[klen] != '=')
                abort();
        if (memchr(key, '=', klen) || memchr(key, '\n', klen) || memchr(value, '\n', vlen))
                abort();
        if (key - 2 < c->buf || key[-2] != 'E' || key[-1] != ':')
                abort();
        check_decode(value, vlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct ctx c = {(const char *)data, size, 0};
        int r = device_udev_parse((const char *)data, size, on_prop, &c);

        if (r != -EINVAL && r != c.calls)
                abort();
        if (r < -EINVAL)
                abort();
        check_decode((const char *)data, size);
        return 0;
}
