/* Pure parsers of SCSI sense, INQUIRY/VPD, LOG SENSE pages and READ DEFECT DATA (T10 SPC, SBC). */
#include "smart_scsi.h"
#include "smart_text.h"

#include <errno.h>
#include <string.h>

static uint16_t be16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int scsi_parse_sense(const uint8_t *sense, size_t len, struct scsi_sense *ret)
{
        struct scsi_sense s;
        uint8_t code;

        if (!sense || !ret || len < 1)
                return -EINVAL;
        memset(&s, 0, sizeof(s));
        code = sense[0] & 0x7f;
        s.response_code = code;
        if (code == 0x70 || code == 0x71) {
                size_t n;

                if (len < 3)
                        return -EINVAL;
                /* The additional length (byte 7) bounds the data; a short buffer just ends it. */
                n = len >= 8 && 8 + (size_t)sense[7] < len ? 8 + (size_t)sense[7] : len;
                s.deferred = code == 0x71;
                s.key = sense[2] & 0xf;
                if (n >= 7) {
                        s.valid = sense[0] & 0x80;
                        s.information = be32(sense + 3);
                }
                if (n > 12)
                        s.asc = sense[12];
                if (n > 13)
                        s.ascq = sense[13];
        } else if (code == 0x72 || code == 0x73) {
                size_t n;

                if (len < 4)
                        return -EINVAL;
                s.descriptor = true;
                s.deferred = code == 0x73;
                s.key = sense[1] & 0xf;
                s.asc = sense[2];
                s.ascq = sense[3];
                n = len >= 8 && 8 + (size_t)sense[7] < len ? 8 + (size_t)sense[7] : len;
                for (size_t off = 8; off + 2 <= n;) {
                        size_t dlen = 2 + (size_t)sense[off + 1];
                        if (off + dlen > n)
                                break;
                        /* Information descriptor: type 00h, length 0Ah, VALID in byte 2. */
                        if (sense[off] == 0x00 && sense[off + 1] == 0x0a) {
                                uint64_t v = 0;
                                for (size_t k = 0; k < 8; k++)
                                        v = v << 8 | sense[off + 4 + k];
                                s.valid = sense[off + 2] & 0x80;
                                s.information = v;
                                break;
                        }
                        off += dlen;
                }
        } else
                return -EINVAL;

        *ret = s;
        return 0;
}

bool scsi_sense_unsupported(const struct scsi_sense *s)
{
        return s && s->key == SCSI_SK_ILLEGAL_REQUEST && (s->asc == 0x20 || s->asc == 0x24);
}

int scsi_parse_inquiry(const uint8_t *buf, size_t len, struct scsi_inquiry *ret)
{
        struct scsi_inquiry q;

        if (!buf || !ret || len < 36)
                return -EINVAL;
        if ((buf[0] >> 5) == 3)
                return -ENODATA;
        memset(&q, 0, sizeof(q));
        q.qualifier = buf[0] >> 5;
        q.device_type = buf[0] & 0x1f;
        q.removable = buf[1] & 0x80;
        q.version = buf[2];
        smart_text_copy(q.vendor, buf + 8, 8);
        smart_text_copy(q.product, buf + 16, 16);
        smart_text_copy(q.revision, buf + 32, 4);
        *ret = q;
        return 0;
}

/* Checks a VPD page header (byte 1 page code, bytes 2-3 page length). Returns 0 and the page
 * length, -EINVAL when truncated, -EBADMSG for another page. */
static int vpd_open(const uint8_t *buf, size_t len, uint8_t page, size_t *ret_len)
{
        size_t plen;

        if (!buf || len < 4)
                return -EINVAL;
        if (buf[1] != page)
                return -EBADMSG;
        plen = be16(buf + 2);
        if (4 + plen > len)
                return -EINVAL;
        *ret_len = plen;
        return 0;
}

int scsi_parse_vpd_serial(const uint8_t *buf, size_t len, char *out, size_t size)
{
        size_t plen, b, e;
        int r;

        if (!out)
                return -EINVAL;
        r = vpd_open(buf, len, 0x80, &plen);
        if (r < 0)
                return r;
        smart_text_span(buf + 4, plen, &b, &e);
        if (e == b)
                return -ENODATA;
        if (e - b >= size)
                return -ENOBUFS;
        smart_text_copy_span(out, buf + 4, b, e);
        return 0;
}

int scsi_parse_vpd_rotation(const uint8_t *buf, size_t len, uint16_t *rpm)
{
        size_t plen;
        uint16_t v;
        int r;

        if (!rpm)
                return -EINVAL;
        r = vpd_open(buf, len, 0xb1, &plen);
        if (r < 0)
                return r;
        if (plen < 2)
                return -EINVAL;
        v = be16(buf + 4);
        *rpm = (v == 1 || (v >= 0x0401 && v != 0xffff)) ? v : 0;
        return 0;
}

int scsi_parse_vpd_wwn(const uint8_t *buf, size_t len, char *out, size_t size)
{
        static const char hex[] = "0123456789abcdef";
        size_t plen, off;
        int r;

        if (!out)
                return -EINVAL;
        r = vpd_open(buf, len, 0x83, &plen);
        if (r < 0)
                return r;
        for (off = 4; off + 4 <= 4 + plen;) {
                const uint8_t *d = buf + off;
                size_t dlen = d[3];
                uint8_t naa;

                if (off + 4 + dlen > 4 + plen)
                        return -EINVAL;
                off += 4 + dlen;
                /* code set 1 (binary), association 0 (logical unit), type 3 (NAA) */
                if ((d[0] & 0x0f) != 1 || (d[1] & 0x30) != 0 || (d[1] & 0x0f) != 3 || dlen < 8)
                        continue;
                naa = d[4] >> 4;
                if (naa == 2 || naa == 3 || naa == 5)
                        dlen = 8;
                else if (naa == 6 && dlen >= 16)
                        dlen = 16;
                else
                        continue;
                if (2 * dlen >= size)
                        return -ENOBUFS;
                for (size_t i = 0; i < dlen; i++) {
                        out[2 * i] = hex[d[4 + i] >> 4];
                        out[2 * i + 1] = hex[d[4 + i] & 0xf];
                }
                out[2 * dlen] = 0;
                return 0;
        }
        return -ENODATA;
}

int scsi_log_page_open(const uint8_t *buf, size_t len, uint8_t page, uint8_t subpage,
                       struct scsi_log_iter *ret)
{
        size_t plen;

        if (!buf || !ret || len < 4)
                return -EINVAL;
        /* Byte 0: DS bit 7, SPF bit 6, page code 5:0. Without SPF the subpage is 0. */
        if ((buf[0] & 0x3f) != page || buf[1] != subpage)
                return -EBADMSG;
        plen = be16(buf + 2);
        ret->p = buf + 4;
        ret->truncated = 4 + plen > len;
        ret->left = ret->truncated ? len - 4 : plen;
        return 0;
}

int scsi_log_next(struct scsi_log_iter *it, struct scsi_log_param *ret)
{
        size_t vlen;

        if (!it || !ret)
                return -EINVAL;
        if (it->left == 0)
                return 0;
        if (it->left < 4 || 4 + (size_t)it->p[3] > it->left) {
                /* cut by the buffer: the end of what we have; past the page length: broken */
                it->left = 0;
                return it->truncated ? 0 : -EINVAL;
        }
        vlen = it->p[3];
        ret->code = be16(it->p);
        ret->control = it->p[2];
        ret->len = (uint8_t)vlen;
        ret->value = it->p + 4;
        it->p += 4 + vlen;
        it->left -= 4 + vlen;
        return 1;
}

uint64_t scsi_log_param_u64(const struct scsi_log_param *p)
{
        uint64_t v = 0;
        size_t i = 0;

        if (!p)
                return 0;
        for (; p->len > 8 && i < (size_t)p->len - 8; i++)
                if (p->value[i])
                        return UINT64_MAX;
        for (; i < p->len; i++)
                v = v << 8 | p->value[i];
        return v;
}

int scsi_parse_supported_pages(const uint8_t *buf, size_t len, uint8_t *pages, size_t max,
                               size_t *n)
{
        struct scsi_log_iter it;
        size_t count = 0;
        uint8_t subpage;
        int r;

        if (!buf || !n || (!pages && max) || len < 2)
                return -EINVAL;
        subpage = buf[1] == 0xff ? 0xff : 0;
        r = scsi_log_page_open(buf, len, 0x00, subpage, &it);
        if (r < 0)
                return r;
        /* The list is not a parameter list: one byte per page, or page/subpage pairs. */
        if (subpage == 0xff) {
                for (size_t i = 0; i + 1 < it.left; i += 2) {
                        uint8_t page = it.p[i] & 0x3f;
                        bool dup = false;
                        if (it.p[i + 1] != 0)
                                continue;
                        for (size_t k = 0; k < count; k++)
                                dup = dup || pages[k] == page;
                        if (!dup && count < max)
                                pages[count++] = page;
                }
        } else {
                for (size_t i = 0; i < it.left && count < max; i++)
                        pages[count++] = it.p[i] & 0x3f;
        }
        *n = count;
        return 0;
}

int scsi_parse_temperature(const uint8_t *buf, size_t len, struct scsi_temperature *ret)
{
        struct scsi_temperature t;
        struct scsi_log_iter it;
        struct scsi_log_param p;
        int r;

        if (!ret)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x0d, 0, &it);
        if (r < 0)
                return r;
        memset(&t, 0, sizeof(t));
        while ((r = scsi_log_next(&it, &p)) > 0) {
                if (p.len < 2 || p.value[1] == 0xff)
                        continue;
                if (p.code == 0x0000 && !t.has_current) {
                        t.has_current = true;
                        t.current_c = p.value[1];
                } else if (p.code == 0x0001 && !t.has_reference) {
                        t.has_reference = true;
                        t.reference_c = p.value[1];
                }
        }
        if (r < 0)
                return r;
        if (!t.has_current && !t.has_reference)
                return -ENODATA;
        *ret = t;
        return 0;
}

int scsi_parse_background_scan(const uint8_t *buf, size_t len, struct scsi_background_scan *ret)
{
        struct scsi_background_scan bs;
        struct scsi_log_iter it;
        struct scsi_log_param p;
        bool found = false;
        int r;

        if (!ret)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x15, 0, &it);
        if (r < 0)
                return r;
        memset(&bs, 0, sizeof(bs));
        /* Parameter 0000h comes first; the scan results after it can fill kilobytes. */
        while (!found && (r = scsi_log_next(&it, &p)) > 0) {
                if (p.code != 0x0000 || p.len < 12)
                        continue;
                found = true;
                bs.power_on_minutes = be32(p.value);
                bs.status = p.value[5];
                bs.scans = be16(p.value + 6);
                bs.progress = be16(p.value + 8);
                bs.medium_scans = be16(p.value + 10);
        }
        if (r < 0)
                return r;
        if (!found)
                return -ENODATA;
        *ret = bs;
        return 0;
}

int scsi_parse_ie(const uint8_t *buf, size_t len, struct scsi_ie *ret)
{
        struct scsi_log_iter it;
        struct scsi_log_param p;
        struct scsi_ie ie;
        bool found = false;
        int r;

        if (!ret)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x2f, 0, &it);
        if (r < 0)
                return r;
        memset(&ie, 0, sizeof(ie));
        while ((r = scsi_log_next(&it, &p)) > 0) {
                if (p.code != 0x0000 || p.len < 2 || found)
                        continue;
                found = true;
                ie.asc = p.value[0];
                ie.ascq = p.value[1];
                ie.failure_predicted = ie.asc == 0x5d;
                if (p.len >= 3 && p.value[2] != 0xff) {
                        ie.has_temperature = true;
                        ie.temperature_c = p.value[2];
                }
        }
        if (r < 0)
                return r;
        if (!found)
                return -ENODATA;
        *ret = ie;
        return 0;
}

int scsi_parse_error_counters(const uint8_t *buf, size_t len, uint8_t page,
                              struct scsi_error_counters *ret)
{
        struct scsi_error_counters c;
        struct scsi_log_iter it;
        struct scsi_log_param p;
        int r;

        if (!ret || (page != 0x02 && page != 0x03 && page != 0x05))
                return -EINVAL;
        r = scsi_log_page_open(buf, len, page, 0, &it);
        if (r < 0)
                return r;
        memset(&c, 0, sizeof(c));
        while ((r = scsi_log_next(&it, &p)) > 0) {
                if (p.code >= SCSI_ERR_COUNTERS || (c.present & (1u << p.code)))
                        continue;
                c.present |= 1u << p.code;
                c.v[p.code] = scsi_log_param_u64(&p);
        }
        if (r < 0)
                return r;
        if (!c.present)
                return -ENODATA;
        *ret = c;
        return 0;
}

int scsi_parse_nonmedium_errors(const uint8_t *buf, size_t len, uint64_t *count)
{
        struct scsi_log_iter it;
        struct scsi_log_param p;
        bool found = false;
        uint64_t v = 0;
        int r;

        if (!count)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x06, 0, &it);
        if (r < 0)
                return r;
        while ((r = scsi_log_next(&it, &p)) > 0)
                if (p.code == 0x0000 && !found) {
                        found = true;
                        v = scsi_log_param_u64(&p);
                }
        if (r < 0)
                return r;
        if (!found)
                return -ENODATA;
        *count = v;
        return 0;
}

int scsi_parse_start_stop(const uint8_t *buf, size_t len, struct scsi_start_stop *ret)
{
        struct scsi_start_stop s;
        struct scsi_log_iter it;
        struct scsi_log_param p;
        int r;

        if (!ret)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x0e, 0, &it);
        if (r < 0)
                return r;
        memset(&s, 0, sizeof(s));
        while ((r = scsi_log_next(&it, &p)) > 0) {
                bool *has;
                uint32_t *v;

                if (p.len != 4)
                        continue;
                switch (p.code) {
                case 0x0003:
                        has = &s.has_specified_cycles, v = &s.specified_cycles;
                        break;
                case 0x0004:
                        has = &s.has_accumulated_cycles, v = &s.accumulated_cycles;
                        break;
                case 0x0005:
                        has = &s.has_specified_load_unload, v = &s.specified_load_unload;
                        break;
                case 0x0006:
                        has = &s.has_accumulated_load_unload, v = &s.accumulated_load_unload;
                        break;
                default:
                        continue;
                }
                if (!*has) {
                        *has = true;
                        *v = be32(p.value);
                }
        }
        if (r < 0)
                return r;
        if (!s.has_specified_cycles && !s.has_accumulated_cycles && !s.has_specified_load_unload &&
            !s.has_accumulated_load_unload)
                return -ENODATA;
        *ret = s;
        return 0;
}

int scsi_parse_ssd(const uint8_t *buf, size_t len, uint8_t *percent_used)
{
        struct scsi_log_iter it;
        struct scsi_log_param p;
        bool found = false;
        uint8_t v = 0;
        int r;

        if (!percent_used)
                return -EINVAL;
        r = scsi_log_page_open(buf, len, 0x11, 0, &it);
        if (r < 0)
                return r;
        while ((r = scsi_log_next(&it, &p)) > 0)
                if (p.code == 0x0001 && p.len >= 4 && !found) {
                        found = true;
                        v = p.value[3];
                }
        if (r < 0)
                return r;
        if (!found)
                return -ENODATA;
        *percent_used = v;
        return 0;
}

int scsi_parse_defect_count(const uint8_t *buf, size_t len, uint32_t *grown)
{
        unsigned size;

        if (!buf || !grown || len < 4)
                return -EINVAL;
        if (!(buf[1] & 0x08))
                return -ENODATA;
        switch (buf[1] & 0x07) {
        case 0: /* short block */
                size = 4;
                break;
        case 1: /* extended bytes from index */
        case 2: /* extended physical sector */
        case 3: /* long block */
        case 4: /* bytes from index */
        case 5: /* physical sector */
                size = 8;
                break;
        default: /* 6 vendor specific, 7 reserved */
                return -EBADMSG;
        }
        *grown = be16(buf + 2) / size;
        return 0;
}
