/* The ASCII fields of device answers (NVMe Identify, SCSI INQUIRY and VPD pages), shown the way
 * smartctl shows them: leading spaces skipped, cut at the first NUL, trailing spaces dropped,
 * bytes outside ' '..'~' replaced by '?'. Pure. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The part of src[0, n) that is shown: [*b_out, *e_out), with *e_out <= n. */
void smart_text_span(const uint8_t *src, size_t n, size_t *b_out, size_t *e_out);

/* Copies src[b, e) into dst (room for e - b + 1 bytes), cleaned as above, NUL-terminated. */
void smart_text_copy_span(char *dst, const uint8_t *src, size_t b, size_t e);

/* Copies the shown part of the n-byte field src into dst (size > n). */
void smart_text_copy(char *dst, const uint8_t *src, size_t n);
