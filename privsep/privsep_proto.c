/* Encoding and strict decoding of the daemon <-> helper messages (see privsep_proto.h). */
#include <errno.h>
#include <string.h>

#include "privsep_proto.h"
#include "devio_linux.h"

_Static_assert(sizeof(struct privsep_proto_hdr) == 24, "header without padding");
_Static_assert(offsetof(struct devio_response, r) == 4, "response: n, then the results");
_Static_assert(sizeof(struct privsep_proto_ctl) == 16, "control message without padding");

/* The largest errno the kernel hands out (include/linux/err.h MAX_ERRNO). */
#define ERRNO_MAX 4095

static size_t response_payload(uint32_t n)
{
        return offsetof(struct devio_response, r) + (size_t)n * sizeof(struct devio_result);
}

static void put_header(void *buf, uint16_t type, uint64_t id, int32_t status, uint32_t len)
{
        struct privsep_proto_hdr h = {
            .magic = PRIVSEP_PROTO_MAGIC,
            .version = PRIVSEP_PROTO_VERSION,
            .type = type,
            .id = id,
            .status = status,
            .len = len,
        };

        memcpy(buf, &h, sizeof h);
}

int privsep_proto_encode_request(uint64_t id, const struct devio_request *req, void *buf,
                                 size_t size)
{
        if (id == 0 || !req || !buf || size < PRIVSEP_PROTO_REQUEST_SIZE)
                return -EINVAL;
        put_header(buf, PRIVSEP_PROTO_REQUEST, id, 0, sizeof *req);
        memcpy((uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE, req, sizeof *req);
        return (int)PRIVSEP_PROTO_REQUEST_SIZE;
}

int privsep_proto_encode_response(uint64_t id, int status, const struct devio_response *resp,
                                  void *buf, size_t size)
{
        size_t payload = 0;

        if (id == 0 || !buf || status > 0 || status < -ERRNO_MAX)
                return -EINVAL;
        if (status == 0) {
                if (!resp || resp->n > DEVIO_MAX_CMDS)
                        return -EINVAL;
                payload = response_payload(resp->n);
        }
        if (size < PRIVSEP_PROTO_HDR_SIZE + payload)
                return -EINVAL;
        put_header(buf, PRIVSEP_PROTO_RESPONSE, id, status, (uint32_t)payload);
        if (payload)
                memcpy((uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE, resp, payload);
        return (int)(PRIVSEP_PROTO_HDR_SIZE + payload);
}

int privsep_proto_encode_hello(void *buf, size_t size)
{
        if (!buf || size < PRIVSEP_PROTO_HDR_SIZE)
                return -EINVAL;
        put_header(buf, PRIVSEP_PROTO_HELLO, 1, 0, 0);
        return (int)PRIVSEP_PROTO_HDR_SIZE;
}

int privsep_proto_decode_header(const void *buf, size_t len, struct privsep_proto_hdr *ret_hdr)
{
        struct privsep_proto_hdr h;

        if (!buf || len < PRIVSEP_PROTO_HDR_SIZE || len > PRIVSEP_PROTO_RESPONSE_MAX)
                return -EBADMSG;
        memcpy(&h, buf, sizeof h);
        if (h.magic != PRIVSEP_PROTO_MAGIC || h.version != PRIVSEP_PROTO_VERSION || h.id == 0)
                return -EBADMSG;
        if (h.len != len - PRIVSEP_PROTO_HDR_SIZE)
                return -EBADMSG;
        switch (h.type) {
        case PRIVSEP_PROTO_REQUEST:
                if (h.status != 0 || h.len != sizeof(struct devio_request))
                        return -EBADMSG;
                break;
        case PRIVSEP_PROTO_RESPONSE:
                if (h.status > 0 || h.status < -ERRNO_MAX)
                        return -EBADMSG;
                if (h.status < 0 && h.len != 0)
                        return -EBADMSG;
                break;
        case PRIVSEP_PROTO_HELLO:
                if (h.id != 1 || h.status != 0 || h.len != 0)
                        return -EBADMSG;
                break;
        case PRIVSEP_PROTO_PRIV:
                /* An argument too long is still framed: the helper answers it -EINVAL. */
                if (h.status != 0 || h.len < DEVIO_NAME_MAX)
                        return -EBADMSG;
                break;
        case PRIVSEP_PROTO_PRIV_ANSWER:
                if (h.status > 0 || h.status < -ERRNO_MAX || h.len < sizeof(uint32_t) ||
                    h.len > PRIVSEP_PROTO_PRIV_ANSWER_MAX - PRIVSEP_PROTO_HDR_SIZE)
                        return -EBADMSG;
                break;
        default:
                return -EBADMSG;
        }
        *ret_hdr = h;
        return 0;
}

int privsep_proto_decode_request(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                                 struct devio_request *ret_req)
{
        struct devio_request req;

        if (!hdr || !buf || hdr->type != PRIVSEP_PROTO_REQUEST ||
            hdr->len != sizeof(struct devio_request) || len != PRIVSEP_PROTO_REQUEST_SIZE)
                return -EBADMSG;
        memcpy(&req, (const uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE, sizeof req);
        if (privsep_request_valid(&req) < 0)
                return -EINVAL;
        *ret_req = req;
        return 0;
}

int privsep_proto_decode_response(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                                  struct devio_response *ret_resp)
{
        const uint8_t *p;
        uint32_t n;

        if (!hdr || !buf || hdr->type != PRIVSEP_PROTO_RESPONSE ||
            len != PRIVSEP_PROTO_HDR_SIZE + hdr->len)
                return -EBADMSG;
        if (hdr->status < 0)
                return hdr->len == 0 ? 0 : -EBADMSG;
        if (hdr->len < offsetof(struct devio_response, r))
                return -EBADMSG;
        p = (const uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE;
        memcpy(&n, p, sizeof n);
        if (n > DEVIO_MAX_CMDS || hdr->len != response_payload(n))
                return -EBADMSG;
        for (uint32_t i = 0; i < n; i++) {
                struct devio_result r;

                memcpy(&r, p + response_payload(i), sizeof r);
                if (r.err > 0 || r.err < -ERRNO_MAX || r.len > DEVIO_DATA_MAX ||
                    r.sense_len > DEVIO_SENSE_MAX)
                        return -EBADMSG;
        }
        memset(ret_resp, 0, sizeof *ret_resp);
        memcpy(ret_resp, p, hdr->len);
        return 0;
}

int privsep_proto_encode_priv(uint64_t id, const char *name, const void *arg, size_t len, void *buf,
                              size_t size)
{
        uint8_t *p = buf;
        size_t nlen;

        if (id == 0 || !name || !buf || len > DEVIO_PRIV_ARG_MAX || (len > 0 && !arg))
                return -EINVAL;
        nlen = strnlen(name, DEVIO_NAME_MAX);
        if (nlen == 0 || nlen >= DEVIO_NAME_MAX ||
            size < PRIVSEP_PROTO_HDR_SIZE + DEVIO_NAME_MAX + len)
                return -EINVAL;
        put_header(buf, PRIVSEP_PROTO_PRIV, id, 0, (uint32_t)(DEVIO_NAME_MAX + len));
        p += PRIVSEP_PROTO_HDR_SIZE;
        memset(p, 0, DEVIO_NAME_MAX);
        memcpy(p, name, nlen);
        if (len)
                memcpy(p + DEVIO_NAME_MAX, arg, len);
        return (int)(PRIVSEP_PROTO_HDR_SIZE + DEVIO_NAME_MAX + len);
}

int privsep_proto_decode_priv(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                              struct privsep_proto_priv *ret)
{
        const uint8_t *p;
        size_t nlen, alen;

        if (!hdr || !buf || !ret || hdr->type != PRIVSEP_PROTO_PRIV || hdr->status != 0 ||
            hdr->len < DEVIO_NAME_MAX || len != PRIVSEP_PROTO_HDR_SIZE + hdr->len)
                return -EBADMSG;
        p = (const uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE;
        alen = hdr->len - DEVIO_NAME_MAX;
        nlen = strnlen((const char *)p, DEVIO_NAME_MAX);
        if (alen > DEVIO_PRIV_ARG_MAX || nlen == 0 || nlen >= DEVIO_NAME_MAX)
                return -EINVAL;
        for (size_t i = nlen; i < DEVIO_NAME_MAX; i++)
                if (p[i] != 0)
                        return -EINVAL;
        memset(ret, 0, sizeof *ret);
        memcpy(ret->name, p, nlen);
        ret->len = (uint32_t)alen;
        if (alen)
                memcpy(ret->arg, p + DEVIO_NAME_MAX, alen);
        return 0;
}

int privsep_proto_encode_priv_answer(uint64_t id, int status, size_t nfds, const char *err,
                                     void *buf, size_t size)
{
        uint32_t n = (uint32_t)nfds;
        size_t tlen = 0;

        if (id == 0 || !buf || status > 0 || status < -ERRNO_MAX || nfds > DEVIO_MAX_FDS ||
            (status < 0 && nfds != 0))
                return -EINVAL;
        if (status < 0 && err)
                tlen = strnlen(err, DEVIO_PRIV_ERR_MAX - 1);
        if (size < PRIVSEP_PROTO_HDR_SIZE + sizeof n + tlen)
                return -EINVAL;
        put_header(buf, PRIVSEP_PROTO_PRIV_ANSWER, id, status, (uint32_t)(sizeof n + tlen));
        memcpy((uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE, &n, sizeof n);
        if (tlen)
                memcpy((uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE + sizeof n, err, tlen);
        return (int)(PRIVSEP_PROTO_HDR_SIZE + sizeof n + tlen);
}

int privsep_proto_decode_priv_answer(const struct privsep_proto_hdr *hdr, const void *buf,
                                     size_t len, struct privsep_proto_priv_answer *ret)
{
        const uint8_t *p;
        uint32_t n;
        size_t tlen;

        if (!hdr || !buf || !ret || hdr->type != PRIVSEP_PROTO_PRIV_ANSWER || hdr->status > 0 ||
            hdr->status < -ERRNO_MAX || hdr->len < sizeof n ||
            hdr->len > PRIVSEP_PROTO_PRIV_ANSWER_MAX - PRIVSEP_PROTO_HDR_SIZE ||
            len != PRIVSEP_PROTO_HDR_SIZE + hdr->len)
                return -EBADMSG;
        p = (const uint8_t *)buf + PRIVSEP_PROTO_HDR_SIZE;
        memcpy(&n, p, sizeof n);
        tlen = hdr->len - sizeof n;
        if (n > DEVIO_MAX_FDS || (hdr->status < 0 && n != 0) || (hdr->status == 0 && tlen != 0) ||
            memchr(p + sizeof n, 0, tlen))
                return -EBADMSG;
        memset(ret, 0, sizeof *ret);
        ret->nfds = n;
        memcpy(ret->err, p + sizeof n, tlen);
        return 0;
}

static void put_ctl(void *buf, uint16_t type, int32_t status, int32_t pid)
{
        struct privsep_proto_ctl c = {
            .magic = PRIVSEP_PROTO_CTL_MAGIC,
            .version = PRIVSEP_PROTO_VERSION,
            .type = type,
            .status = status,
            .pid = pid,
        };

        memcpy(buf, &c, sizeof c);
}

int privsep_proto_encode_spawn(void *buf, size_t size)
{
        if (!buf || size < PRIVSEP_PROTO_CTL_SIZE)
                return -EINVAL;
        put_ctl(buf, PRIVSEP_PROTO_SPAWN, 0, 0);
        return (int)PRIVSEP_PROTO_CTL_SIZE;
}

bool privsep_proto_is_spawn(const void *buf, size_t len)
{
        uint8_t want[PRIVSEP_PROTO_CTL_SIZE];

        if (!buf || len != PRIVSEP_PROTO_CTL_SIZE)
                return false;
        put_ctl(want, PRIVSEP_PROTO_SPAWN, 0, 0);
        return memcmp(buf, want, sizeof want) == 0;
}

static bool spawned_valid(int status, int32_t pid)
{
        return status == 0 ? pid > 0 : status < 0 && status >= -ERRNO_MAX && pid == 0;
}

int privsep_proto_encode_spawned(int status, int32_t pid, void *buf, size_t size)
{
        if (!buf || size < PRIVSEP_PROTO_CTL_SIZE || !spawned_valid(status, pid))
                return -EINVAL;
        put_ctl(buf, PRIVSEP_PROTO_SPAWNED, status, pid);
        return (int)PRIVSEP_PROTO_CTL_SIZE;
}

int privsep_proto_decode_spawned(const void *buf, size_t len, int *ret_status, int32_t *ret_pid)
{
        struct privsep_proto_ctl c;

        if (!buf || len != PRIVSEP_PROTO_CTL_SIZE)
                return -EBADMSG;
        memcpy(&c, buf, sizeof c);
        if (c.magic != PRIVSEP_PROTO_CTL_MAGIC || c.version != PRIVSEP_PROTO_VERSION ||
            c.type != PRIVSEP_PROTO_SPAWNED || !spawned_valid(c.status, c.pid))
                return -EBADMSG;
        *ret_status = c.status;
        *ret_pid = c.pid;
        return 0;
}
