/* Unit tests of the per-address counts: random increments and decrements against a plain array,
 * so that every probe run and backward-shift deletion is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "addrmap.h"

#define NKEYS 400

static struct addrkey key_of(unsigned i)
{
        /* IPv4-like and IPv6-like keys, some sharing hi or lo */
        struct addrkey k = {.hi = i % 3 ? (uint64_t)i << 40 : 0,
                            .lo = i % 3 ? 2 : (1ULL << 32) | i};
        return k;
}

static void check_all(const struct addrmap *m, const uint32_t *ref)
{
        size_t live = 0;

        for (unsigned i = 0; i < NKEYS; i++) {
                uint32_t got = addrmap_get(m, key_of(i));
                if (got != ref[i])
                        fail_msg("key %u: count %u, want %u", i, got, ref[i]);
                live += ref[i] > 0;
        }
        assert_int_equal(addrmap_size(m), live);
}

static void test_random(void **state)
{
        uint32_t ref[NKEYS];
        (void)state;

        for (uint64_t seed = 0; seed < 4; seed++) {
                struct addrmap m;
                unsigned r = (unsigned)seed * 7919 + 1;

                memset(ref, 0, sizeof ref);
                addrmap_init(&m, seed * 0x9E3779B97F4A7C15ULL);
                assert_int_equal(addrmap_get(&m, key_of(1)), 0);
                addrmap_dec(&m, key_of(1)); /* absent, on an empty map */
                for (int op = 0; op < 20000; op++) {
                        unsigned i;
                        r = r * 1103515245 + 12345;
                        i = (r >> 8) % NKEYS;
                        /* grow for the first half, then mostly shrink to empty */
                        if ((op < 10000 ? (r >> 4) % 3 != 0 : (r >> 4) % 4 == 0)) {
                                addrmap_inc(&m, key_of(i));
                                ref[i]++;
                        } else {
                                addrmap_dec(&m, key_of(i));
                                if (ref[i])
                                        ref[i]--;
                        }
                        if (op % 97 == 0)
                                check_all(&m, ref);
                }
                check_all(&m, ref);
                for (unsigned i = 0; i < NKEYS; i++)
                        while (ref[i]) {
                                addrmap_dec(&m, key_of(i));
                                ref[i]--;
                        }
                check_all(&m, ref);
                assert_int_equal(addrmap_size(&m), 0);
                addrmap_done(&m);
                assert_int_equal(addrmap_get(&m, key_of(3)), 0);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_random),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
