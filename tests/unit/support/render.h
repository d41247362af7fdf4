/* Test support: a collector's exported set as the text page a scrape would get. Include after
 * <cmocka.h>. */
#ifndef DISKPULSE_TEST_RENDER_H
#define DISKPULSE_TEST_RENDER_H

#include <stddef.h>

#include "expo.h"
#include "metrics.h"

/* The text page of set (fails the test when it cannot be rendered); frees set. The caller frees
 * the page. */
static inline char *test_render_set(struct mset *set)
{
        char *text;
        size_t len;

        assert_int_equal(expo_render_text(&set, 1, &text, &len), 0);
        mset_free(set);
        return text;
}

#endif
