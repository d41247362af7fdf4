/* The landing page `/`: the latest snapshot's status summary (lib/summary.h) as plain text for a
 * terminal or as HTML for a browser, chosen by the request's Accept header. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "summary.h"

/* The page of sum (NULL: no collection has finished yet) for a client whose Accept header is
 * accept (NULL: none): HTML when it prefers text/html to text/plain (encoding_accept_html()),
 * plain text otherwise. version and revision are shown at the top. Returns a malloc'd
 * NUL-terminated page (the caller frees), its length in *ret_len and its content type in
 * *ret_type (static). Any thread. */
char *http_index_page(const struct summary *sum, const char *accept, const char *version,
                      const char *revision, size_t *ret_len, const char **ret_type);
