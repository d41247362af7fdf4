/* Fuzz target of listen-address parsing, with a round trip of what it accepts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *addr = malloc(size + 1);
        char host[256], port[8], host2[256], port2[8], again[300];
        int r;

        if (!addr)
                abort();
        memcpy(addr, data, size);
        addr[size] = 0;

        /* small buffers must be respected */
        char tiny_h[4], tiny_p[3];
        r = listen_parse(addr, tiny_h, sizeof tiny_h, tiny_p, sizeof tiny_p);
        if (r == 0 && (strlen(tiny_h) >= sizeof tiny_h || strlen(tiny_p) >= sizeof tiny_p))
                abort();

        r = listen_parse(addr, host, sizeof host, port, sizeof port);
        if (r != 0 && r != -EINVAL)
                abort();
        if (r == 0) {
                char *end;
                unsigned long p = strtoul(port, &end, 10);
                /* a canonical decimal port */
                if (*end || p > 65535 || !port[0] || (port[0] == '0' && port[1]))
                        abort();
                if (strlen(host) >= sizeof host)
                        abort();
                /* rebuilding the address from its parts gives the same parts */
                if (!strpbrk(host, "[]")) {
                        snprintf(again, sizeof again, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host,
                                 port);
                        if (listen_parse(again, host2, sizeof host2, port2, sizeof port2) != 0)
                                abort();
                        if (strcmp(host, host2) != 0 || strcmp(port, port2) != 0)
                                abort();
                }
        }
        free(addr);
        return 0;
}
