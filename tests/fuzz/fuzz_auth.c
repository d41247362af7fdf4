/* Fuzz target of the Authorization header path (exporters/webconfig/auth.c): the Basic parser never
 * reads or writes out of bounds, what it accepts encodes back to the same credentials and to the
 * very token it was given (strict base64 has one form), and
 * the cache key and lookup take any result. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* one for the process, as the daemon's for its server: nothing is ever checked with it */
static struct auth_checker *checker;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *v = malloc(size + 1);
        char user[AUTH_USER_MAX], pass[AUTH_PASS_MAX], u2[AUTH_USER_MAX], p2[AUTH_PASS_MAX];
        struct auth_key k;

        if (!checker)
                checker = auth_checker_new();
        memcpy(v, data, size);
        v[size] = 0;
        if (auth_parse_basic(v, user, sizeof user, pass, sizeof pass)) {
                size_t ul = strlen(user), pl = strlen(pass);
                char *plain = malloc(ul + pl + 2), *hdr = malloc((ul + pl + 4) / 3 * 4 + 16);

                if (strchr(user, ':') || ul >= sizeof user || pl >= sizeof pass)
                        abort();
                memcpy(plain, user, ul);
                plain[ul] = ':';
                memcpy(plain + ul + 1, pass, pl);
                memcpy(hdr, "bAsIc ", 6);
                base64_encode(plain, ul + pl + 1, hdr + 6);
                /* strict base64 is canonical: the token accepted is the encoding itself */
                {
                        const char *t = v + strspn(v, " \t") + 5;
                        t += strspn(t, " \t");
                        if (strcspn(t, " \t") != strlen(hdr + 6) ||
                            memcmp(t, hdr + 6, strlen(hdr + 6)) != 0)
                                abort();
                }
                if (!auth_parse_basic(hdr, u2, sizeof u2, p2, sizeof p2) || strcmp(u2, user) ||
                    strcmp(p2, pass))
                        abort();
                auth_key_of(checker, user,
                            "$2y$10$b2hxBQgqRxqbMOrTZv0v8.N76f9wX3NDhSAuoWk1Qy4H0/uw1FOyq", pass,
                            &k);
                if (auth_cache_get(checker, &k) == 1)
                        abort(); /* nothing was ever checked */
                free(plain);
                free(hdr);
        }
        /* a small buffer never overflows */
        (void)auth_parse_basic(v, user, 2, pass, 2);
        free(v);
        return 0;
}
