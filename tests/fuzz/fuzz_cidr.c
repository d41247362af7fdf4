/* Fuzz target of --web.allow-from parsing: whatever is accepted formats back to a network that
 * parses to itself and contains its own network address. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1), text[64];
        struct cidr c, again;
        const char *why = NULL;
        int r;

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = 0;
        r = cidr_parse(s, &c, &why);
        if (r != 0 && r != -EINVAL)
                abort();
        if (r == -EINVAL && !why)
                abort();
        if (r == 0) {
                if (why || (c.net.family == AF_INET ? c.prefix > 32 : c.prefix > 128))
                        abort();
                if (!cidr_contains(&c, &c.net))
                        abort();
                cidr_format(&c, text, sizeof text);
                if (cidr_parse(text, &again, &why) != 0 || again.prefix != c.prefix ||
                    again.net.family != c.net.family || memcmp(again.net.a, c.net.a, 16) != 0)
                        abort();
                {
                        struct addrkey k = cidr_netaddr_key(&c.net);
                        if (k.lo == 0)
                                abort();
                }
        }
        free(s);
        return 0;
}
