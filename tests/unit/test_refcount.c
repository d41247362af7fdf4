/* Unit tests of the reference functions that REFCOUNT_DEFINE writes (lib/refcount.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>

#include <cmocka.h>

#include "refcount.h"
#include "util.h"

#define THREADS 4
#define ROUNDS  100000

struct obj {
        struct refcount refs;
        unsigned *destroyed;    /* counts the calls of obj_destroy(), outlives the object */
        uint64_t *sum;          /* what obj_destroy() saw in done[], outlives the object */
        uint64_t done[THREADS]; /* each thread's rounds, written before its last drop */
};

static void obj_destroy(struct obj *o)
{
        uint64_t s = 0;

        for (size_t i = 0; i < THREADS; i++)
                s += o->done[i];
        *o->sum = s;
        (*o->destroyed)++;
        free(o);
}

REFCOUNT_DEFINE(static, struct obj, obj, refs, obj_destroy)

static struct obj *obj_new(unsigned *destroyed, uint64_t *sum)
{
        struct obj *o = xcalloc(1, sizeof(*o));

        refcount_init(&o->refs);
        o->destroyed = destroyed;
        o->sum = sum;
        return o;
}

static void test_one_thread(void **state)
{
        unsigned destroyed = 0;
        uint64_t sum = 1;
        struct obj *o = obj_new(&destroyed, &sum);
        (void)state;

        assert_ptr_equal(obj_ref(o), o);
        assert_ptr_equal(obj_ref(o), o);
        assert_null(obj_unref(o)); /* 3 -> 2 */
        assert_null(obj_unref(o)); /* 2 -> 1 */
        assert_int_equal(destroyed, 0);
        o->done[1] = 7;
        assert_null(obj_unref(o)); /* the last: destroyed once */
        assert_int_equal(destroyed, 1);
        assert_int_equal(sum, 7);
        assert_null(obj_ref(NULL));
        assert_null(obj_unref(NULL));
        assert_int_equal(destroyed, 1);
}

struct worker {
        struct obj *o; /* one reference, the worker's */
        size_t slot;
        unsigned wrong; /* a ref that did not return the object, an unref that did not NULL */
};

static void *work(void *arg)
{
        struct worker *w = arg;

        for (unsigned i = 0; i < ROUNDS; i++) {
                struct obj *extra = obj_ref(w->o);

                w->wrong += extra != w->o;
                w->o->done[w->slot]++;
                w->wrong += obj_unref(extra) != NULL;
        }
        w->o = obj_unref(w->o); /* perhaps the last */
        return NULL;
}

/* Threads take and drop references at once, then each drops its own while the main thread has
 * dropped its own early: the object is destroyed exactly once, by whichever drop was last, and
 * that destroy sees every count the threads wrote before their drops. */
static void test_threads(void **state)
{
        unsigned destroyed = 0;
        uint64_t sum = 0;
        struct obj *o = obj_new(&destroyed, &sum);
        struct worker w[THREADS];
        pthread_t th[THREADS];
        (void)state;

        for (size_t i = 0; i < THREADS; i++) {
                w[i] = (struct worker){.o = obj_ref(o), .slot = i};
                assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
        }
        o = obj_unref(o);
        assert_null(o);
        for (size_t i = 0; i < THREADS; i++) {
                assert_int_equal(pthread_join(th[i], NULL), 0);
                assert_null(w[i].o);
                assert_int_equal(w[i].wrong, 0);
        }
        assert_int_equal(destroyed, 1);
        assert_int_equal(sum, (uint64_t)THREADS * ROUNDS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_one_thread),
            cmocka_unit_test(test_threads),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
