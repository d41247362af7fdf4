/* Test support: fixture files and a minimal reader of smartctl's JSON output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture_json.h"

/* Reads FIXTURES/smart/name into buf; returns its size (fails the test if missing or larger). */
size_t fixture_load(const char *name, void *buf, size_t size)
{
        char path[512];
        size_t n;
        FILE *f;

        snprintf(path, sizeof(path), "%s/smart/%s", FIXTURES, name);
        f = fopen(path, "rb");
        if (!f)
                fail_msg("cannot open fixture %s", path);
        n = fread(buf, 1, size, f);
        if (!feof(f) && fgetc(f) != EOF)
                fail_msg("fixture %s larger than %zu bytes", path, size);
        fclose(f);
        if (n < size)
                ((char *)buf)[n] = 0;
        return n;
}

static const char *js_ws(const char *p)
{
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
                p++;
        return p;
}

/* Returns the end of the JSON value at p. */
static const char *js_skip(const char *p)
{
        int depth = 0;

        p = js_ws(p);
        do {
                if (*p == '"') {
                        for (p++; *p && *p != '"'; p++)
                                if (*p == '\\' && p[1])
                                        p++;
                        if (*p)
                                p++;
                } else if (*p == '{' || *p == '[') {
                        depth++;
                        p++;
                } else if (*p == '}' || *p == ']') {
                        depth--;
                        p++;
                } else if (depth > 0) {
                        p++;
                } else {
                        while (*p && !strchr(",}] \n\r\t", *p))
                                p++;
                }
        } while (depth > 0 && *p);
        return p;
}

/* Finds the value at path ("a.b[2].c") in the JSON text; NULL when absent. */
const char *js_find(const char *json, const char *path)
{
        const char *p = js_ws(json);

        while (*path) {
                if (*path == '.')
                        path++;
                if (*path == '[') {
                        long idx = strtol(path + 1, (char **)&path, 10);
                        path++; /* ']' */
                        if (*p != '[')
                                return NULL;
                        p = js_ws(p + 1);
                        for (; idx > 0; idx--) {
                                p = js_ws(js_skip(p));
                                if (*p != ',')
                                        return NULL;
                                p = js_ws(p + 1);
                        }
                        if (*p == ']')
                                return NULL;
                } else {
                        size_t klen = strcspn(path, ".[");
                        bool found = false;

                        if (*p != '{')
                                return NULL;
                        p = js_ws(p + 1);
                        while (*p == '"' && !found) {
                                const char *k = p + 1, *v;
                                v = js_ws(js_skip(p));
                                if (*v != ':')
                                        return NULL;
                                v = js_ws(v + 1);
                                if ((size_t)(strchr(k, '"') - k) == klen &&
                                    strncmp(k, path, klen) == 0) {
                                        p = v;
                                        found = true;
                                        break;
                                }
                                p = js_ws(js_skip(v));
                                if (*p == ',')
                                        p = js_ws(p + 1);
                        }
                        if (!found)
                                return NULL;
                        path += klen;
                }
        }
        return p;
}

uint64_t js_u64(const char *json, const char *path)
{
        const char *v = js_find(json, path);

        if (!v || !strchr("0123456789", *v))
                fail_msg("smartctl JSON has no number at %s", path);
        return strtoull(v, NULL, 10);
}

const char *js_str(const char *json, const char *path, char *out, size_t size)
{
        const char *v = js_find(json, path);
        size_t n;

        if (!v || *v != '"')
                fail_msg("smartctl JSON has no string at %s", path);
        n = strcspn(v + 1, "\"");
        if (n >= size)
                fail_msg("string at %s too long", path);
        memcpy(out, v + 1, n);
        out[n] = 0;
        return out;
}

bool js_bool(const char *json, const char *path)
{
        const char *v = js_find(json, path);

        if (!v || (strncmp(v, "true", 4) && strncmp(v, "false", 5)))
                fail_msg("smartctl JSON has no boolean at %s", path);
        return *v == 't';
}
