/* TEMPORARY stand-in for biolatency_load.c (the BPF loader, written apart): it answers as the
 * loader does in a build without BPF. The integrator replaces this file with the real loader. */
#include "biolatency_collector.h"

#include <errno.h>
#include <stdio.h>

int biolatency_load(const void *arg, size_t len, int fds[], size_t *nfds, char *err, size_t errsz)
{
        (void)arg;
        (void)len;
        (void)fds;
        *nfds = 0;
        snprintf(err, errsz, "built without BPF support");
        return -EOPNOTSUPP;
}
