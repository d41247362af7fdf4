/* If-None-Match against the runbook's entity tag (RFC 9110 §13.1.2, §8.8.3): "*" alone or a list
 * of entity tags, compared weakly; anything else is no valid field and gets the page. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runbook.h"

static void test_if_none_match(void **state)
{
        static const char tag[] = "\"ffdf4e9520dbf2fe01ba\"";
        static const struct {
                const char *inm;
                bool listed;
        } cases[] = {
            {NULL, false},
            {"", false},
            {"*", true},
            {" * ", true},
            {"\t*", true},
            /* "*" only alone */
            {"*x", false},
            {"**", false},
            {"* ,", false},
            {"*, \"ffdf4e9520dbf2fe01ba\"", false},
            {"\"ffdf4e9520dbf2fe01ba\", *", false},
            /* a list of entity tags, weakly compared */
            {"\"ffdf4e9520dbf2fe01ba\"", true},
            {"W/\"ffdf4e9520dbf2fe01ba\"", true},
            {"\"a\", \"ffdf4e9520dbf2fe01ba\"", true},
            {"\"a\",W/\"ffdf4e9520dbf2fe01ba\" , \"b\"", true},
            {", ,\"ffdf4e9520dbf2fe01ba\",", true}, /* empty list elements */
            {"\"a\", \"b\"", false},
            {"\"ffdf4e9520dbf2fe01b\"", false},
            {"\"ffdf4e9520dbf2fe01bab\"", false},
            {"\"FFDF4E9520DBF2FE01BA\"", false}, /* opaque: exact */
            /* not a valid field: the page is sent */
            {"ffdf4e9520dbf2fe01ba", false},
            {"\"ffdf4e9520dbf2fe01ba", false},
            {"\"ffdf4e9520dbf2fe01ba\"x", false},
            {"\"ffdf4e9520dbf2fe01ba\" \"a\"", false},
            {"w/\"ffdf4e9520dbf2fe01ba\"", false},
            {"\"ffdf4e9520dbf2fe01ba\", junk", false},
            {"\"a b\", \"ffdf4e9520dbf2fe01ba\"", false}, /* a space is no etagc */
        };
        (void)state;

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                if (http_etag_listed(cases[i].inm, tag) != cases[i].listed)
                        fail_msg("http_etag_listed(%s%s%s) != %d", cases[i].inm ? "'" : "",
                                 cases[i].inm ? cases[i].inm : "NULL", cases[i].inm ? "'" : "",
                                 cases[i].listed);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_if_none_match),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
