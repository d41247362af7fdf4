/* Fuzz target of the Accept-Encoding and Accept list parser (HTTP input: the metrics page's
 * forms and coding, the landing page's HTML or text) and the gzip encoder: no crash, the
 * decisions ignore letter case (but for the protobuf parameters' values, which compare exactly)
 * and empty list elements around the value (as when the server joins field lines), protobuf is
 * only chosen when named, HTML only when a text range is, and every input survives a gzip round
 * trip. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "encoding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *v = malloc(size + 1), *up = malloc(size + 1), *wrapped = malloc(size + 5);
        void *gz;
        size_t gz_len;

        memcpy(v, data, size);
        v[size] = 0;
        for (size_t i = 0; i <= size; i++)
                up[i] = (char)toupper((unsigned char)v[i]);
        if (encoding_accept_gzip(v) != encoding_accept_gzip(up) ||
            encoding_accept_openmetrics(v) != encoding_accept_openmetrics(up) ||
            encoding_accept_html(v) != encoding_accept_html(up))
                abort();
        memcpy(wrapped, ", ", 2);
        memcpy(wrapped + 2, data, size);
        memcpy(wrapped + 2 + size, " ,", 3);
        if (encoding_accept_gzip(v) != encoding_accept_gzip(wrapped) ||
            encoding_accept_openmetrics(v) != encoding_accept_openmetrics(wrapped) ||
            encoding_accept_protobuf(v) != encoding_accept_protobuf(wrapped) ||
            encoding_accept_html(v) != encoding_accept_html(wrapped))
                abort();
        /* HTML only when text/html (or the text range) is named: any type alone gives text */
        if (encoding_accept_html(v) && !strcasestr(v, "text/"))
                abort();
        if ((encoding_accept_protobuf(v) && !strcasestr(v, "application/vnd.google.protobuf")) ||
            (encoding_accept_protobuf(up) && !strstr(up, "APPLICATION/VND.GOOGLE.PROTOBUF")))
                abort();

        if (encoding_gzip_compress(data, size, 1, &gz, &gz_len) != 0)
                abort();
        {
                unsigned char *out = malloc(size + 1);
                z_stream z;
                memset(&z, 0, sizeof z);
                if (inflateInit2(&z, 15 + 16) != Z_OK)
                        abort();
                z.next_in = gz;
                z.avail_in = (uInt)gz_len;
                z.next_out = out;
                z.avail_out = (uInt)(size + 1);
                if (inflate(&z, Z_FINISH) != Z_STREAM_END || z.total_out != size ||
                    memcmp(out, data, size) != 0)
                        abort();
                inflateEnd(&z);
                free(out);
        }
        free(gz);
        free(v);
        free(up);
        free(wrapped);
        return 0;
}
