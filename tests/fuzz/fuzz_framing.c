/* Fuzz target of the request framing checks: the input is header lines ("name:value", split at
 * the first colon, lines at LF). Whatever the verdict, it is one of the known reasons, and a
 * request let through has, by an independent reading of the same fields, at most one
 * Content-Length of digits only, no Transfer-Encoding beside it, at most one Transfer-Encoding
 * ending in chunked, token names and no control bytes but HTAB in values. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "framing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_tchar(unsigned char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const reasons[] = {
            FRAMING_NAME,      FRAMING_VALUE,   FRAMING_CL_MANY,       FRAMING_CL_INVALID,
            FRAMING_TE_AND_CL, FRAMING_TE_MANY, FRAMING_TE_NOT_CHUNKED};
        const char *text = (const char *)data, *why;
        struct framing f;
        unsigned cl = 0, te = 0;
        bool sound = true;
        size_t pos = 0;

        framing_init(&f);
        while (pos < size) {
                const char *nl = memchr(text + pos, '\n', size - pos);
                size_t end = nl ? (size_t)(nl - text) : size;
                const char *colon = memchr(text + pos, ':', end - pos);
                struct framing_field fl;

                if (colon) {
                        fl.name = text + pos;
                        fl.name_len = (size_t)(colon - fl.name);
                        fl.value = colon + 1;
                        fl.value_len = end - (size_t)(colon + 1 - text);
                        framing_add(&f, &fl);
                        /* the oracle */
                        for (size_t i = 0; i < fl.name_len; i++)
                                sound &= is_tchar((unsigned char)fl.name[i]);
                        sound &= fl.name_len > 0;
                        for (size_t i = 0; i < fl.value_len; i++) {
                                unsigned char c = (unsigned char)fl.value[i];
                                sound &= !((c < 0x20 && c != '\t') || c == 0x7f);
                        }
                        if (fl.name_len == 14 && !strncasecmp(fl.name, "content-length", 14)) {
                                cl++;
                                sound &= fl.value_len > 0 && fl.value_len <= 19;
                                for (size_t i = 0; i < fl.value_len; i++)
                                        sound &= fl.value[i] >= '0' && fl.value[i] <= '9';
                        } else if (fl.name_len == 17 &&
                                   !strncasecmp(fl.name, "transfer-encoding", 17)) {
                                size_t e = fl.value_len;
                                te++;
                                while (e && (fl.value[e - 1] == ' ' || fl.value[e - 1] == '\t'))
                                        e--;
                                sound &= e >= 7 && !strncasecmp(fl.value + e - 7, "chunked", 7);
                        }
                }
                pos = end + 1;
        }
        why = framing_verdict(&f);
        if (why) {
                bool known = false;
                for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
                        known |= strcmp(why, reasons[i]) == 0;
                if (!known)
                        abort();
        } else if (!sound || cl > 1 || te > 1 || (cl && te)) {
                abort();
        }
        return 0;
}
