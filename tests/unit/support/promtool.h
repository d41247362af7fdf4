/* `promtool check metrics` over a rendered page, for the families that appear only after days of
 * probing (a live page of a test run never holds them). Needs cmocka's headers before it. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Returns promtool's complaints about text ("" when none; the caller frees), or NULL when no
 * promtool is on PATH (the caller says it skipped). */
static inline char *promtool_lint(const char *text)
{
        char in[] = "/tmp/diskpulse-lint-XXXXXX", cmd[128], *out;
        size_t n = 0, cap = 4096, len = strlen(text);
        FILE *p;
        int fd, status;

        if (system("command -v promtool >/dev/null 2>&1") != 0)
                return NULL;
        fd = mkstemp(in);
        assert_true(fd >= 0);
        assert_true(write(fd, text, len) == (ssize_t)len);
        close(fd);
        snprintf(cmd, sizeof cmd, "promtool check metrics <%s 2>&1", in);
        p = popen(cmd, "r");
        assert_non_null(p);
        out = malloc(cap);
        assert_non_null(out);
        while ((len = fread(out + n, 1, cap - n - 1, p)) > 0) {
                n += len;
                if (n + 1 == cap) {
                        out = realloc(out, cap *= 2);
                        assert_non_null(out);
                }
        }
        out[n] = '\0';
        status = pclose(p);
        unlink(in);
        if (n == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                free(out);
                out = strdup("promtool check metrics failed without a word");
        }
        return out;
}
