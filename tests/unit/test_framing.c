/* The request framing checks (RFC 9112 §5.1, §5.2, §5.5, §6.1, §6.3), table-driven: the fields
 * as libmicrohttpd hands them over (names as received, values without surrounding whitespace). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "framing.h"

struct field_text {
        const char *name, *value;
};

struct framing_case {
        const char *what;
        struct field_text fields[4];
        const char *want; /* NULL: sound */
};

static const struct framing_case cases[] = {
    {"no body", {{"Host", "x"}, {"Accept", "*/*"}}, NULL},
    {"Content-Length: 0", {{"Host", "x"}, {"Content-Length", "0"}}, NULL},
    {"Content-Length, any case", {{"cOnTeNt-LeNgTh", "35"}}, NULL},
    {"chunked", {{"Transfer-Encoding", "chunked"}}, NULL},
    {"chunked last of a list", {{"Transfer-Encoding", "gzip, chunked"}}, NULL},
    {"chunked, shouted, with a tab after", {{"TRANSFER-ENCODING", "CHUNKED\t"}}, NULL},
    {"a tab inside a value", {{"X-Tab", "a\tb"}}, NULL},
    {"an empty value", {{"X-Empty", ""}}, NULL},
    {"two Content-Length", {{"Content-Length", "0"}, {"Content-Length", "54"}}, FRAMING_CL_MANY},
    {"two equal Content-Length",
     {{"Content-Length", "5"}, {"content-length", "5"}},
     FRAMING_CL_MANY},
    {"Content-Length list", {{"Content-Length", "5, 5"}}, FRAMING_CL_INVALID},
    {"Content-Length +5", {{"Content-Length", "+5"}}, FRAMING_CL_INVALID},
    {"Content-Length -1", {{"Content-Length", "-1"}}, FRAMING_CL_INVALID},
    {"Content-Length hex", {{"Content-Length", "0x5"}}, FRAMING_CL_INVALID},
    {"Content-Length empty", {{"Content-Length", ""}}, FRAMING_CL_INVALID},
    {"Content-Length of 20 digits",
     {{"Content-Length", "12345678901234567890"}},
     FRAMING_CL_INVALID},
    {"Content-Length of 19 digits", {{"Content-Length", "1234567890123456789"}}, NULL},
    {"space before the colon", {{"Content-Length ", "5"}}, FRAMING_NAME},
    {"tab before the colon", {{"Transfer-Encoding\t", "chunked"}}, FRAMING_NAME},
    {"a space inside a name", {{"Transfer Encoding", "chunked"}}, FRAMING_NAME},
    {"an empty name", {{"", "x"}}, FRAMING_NAME},
    {"a byte over 0x7f in a name", {{"Transf\x82r-Encoding", "chunked"}}, FRAMING_NAME},
    {"a folded Transfer-Encoding run into the name",
     {{"Transfer-Encodingchunked", ""}},
     FRAMING_NAME},
    {"a folded Content-Length run into the name", {{"Content-Length5", ""}}, FRAMING_NAME},
    {"a bare CR in a value", {{"X-A", "a\rb"}}, FRAMING_VALUE},
    {"a vertical tab in a value", {{"Transfer-Encoding", "\vchunked"}}, FRAMING_VALUE},
    {"DEL in a value", {{"X-A", "a\x7f"}}, FRAMING_VALUE},
    {"Transfer-Encoding and Content-Length",
     {{"Transfer-Encoding", "chunked"}, {"Content-Length", "4"}},
     FRAMING_TE_AND_CL},
    {"Content-Length and Transfer-Encoding",
     {{"Content-Length", "4"}, {"Transfer-Encoding", "chunked"}},
     FRAMING_TE_AND_CL},
    {"chunked not last", {{"Transfer-Encoding", "chunked, identity"}}, FRAMING_TE_NOT_CHUNKED},
    {"xchunked", {{"Transfer-Encoding", "xchunked"}}, FRAMING_TE_NOT_CHUNKED},
    {"chunk", {{"Transfer-Encoding", "chunk"}}, FRAMING_TE_NOT_CHUNKED},
    {"quoted chunked", {{"Transfer-Encoding", "\"chunked\""}}, FRAMING_TE_NOT_CHUNKED},
    {"an empty Transfer-Encoding", {{"Transfer-Encoding", ""}}, FRAMING_TE_NOT_CHUNKED},
    {"two Transfer-Encoding",
     {{"Transfer-Encoding", "identity"}, {"Transfer-Encoding", "chunked"}},
     FRAMING_TE_MANY},
    {"two chunked",
     {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}},
     FRAMING_TE_MANY},
};

static void test_cases(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                const struct framing_case *c = &cases[i];
                struct framing f;
                const char *got;

                framing_init(&f);
                for (size_t k = 0; k < 4 && c->fields[k].name; k++) {
                        struct framing_field fl = {c->fields[k].name, strlen(c->fields[k].name),
                                                   c->fields[k].value, strlen(c->fields[k].value)};
                        framing_add(&f, &fl);
                }
                got = framing_verdict(&f);
                if ((got == NULL) != (c->want == NULL) || (got && strcmp(got, c->want) != 0))
                        fail_msg("%s: got \"%s\", want \"%s\"", c->what, got ? got : "sound",
                                 c->want ? c->want : "sound");
        }
}

/* A NUL inside a value (its length says more than strlen) is a control byte too. */
static void test_nul_in_value(void **state)
{
        struct framing f;
        struct framing_field fl = {"X-A", 3, "a\0b", 3};

        (void)state;
        framing_init(&f);
        framing_add(&f, &fl);
        assert_string_equal(framing_verdict(&f), FRAMING_VALUE);
}

/* The request target's percent-decoding: what libmicrohttpd's does, but a "%00" stays as it is,
 * so that no NUL ends a path early ("/runbook%00" was served as "/runbook"). */
static void test_unescape(void **state)
{
        static const struct {
                const char *in, *out;
        } targets[] = {
            {"/metrics", "/metrics"},
            {"/run%62ook", "/runbook"},
            {"/%2D/healthy", "/-/healthy"},
            {"/a%2fb%2Fc", "/a/b/c"},
            {"/runbook%00", "/runbook%00"},
            {"/metrics%00x", "/metrics%00x"},
            {"%00", "%00"},
            {"/%2500", "/%00"}, /* an encoded '%': decoded once, not again */
            {"/%0a%7f%ff", "/\n\x7f\xff"},
            {"/%", "/%"},
            {"/%4", "/%4"},
            {"/%4g", "/%4g"},
            {"/%g4", "/%g4"},
            {"/100%", "/100%"},
            {"", ""},
        };
        (void)state;

        for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
                char buf[64];
                size_t n;

                strcpy(buf, targets[i].in);
                n = framing_unescape(buf);
                if (strcmp(buf, targets[i].out) != 0 || n != strlen(targets[i].out))
                        fail_msg("framing_unescape(\"%s\") = \"%s\" (%zu)", targets[i].in, buf, n);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cases),
            cmocka_unit_test(test_nul_in_value),
            cmocka_unit_test(test_unescape),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
