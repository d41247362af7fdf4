/* Fuzz target of the decoders at both ends of the helper protocol: the helper's request decoder
 * (any bytes from the unprivileged side must be refused or decode to a request that
 * privsep_request_valid() accepts and that encodes back to the same bytes), the client's decoders
 * of responses and HELLO, and the zygote's control messages (16 bytes: the zygote takes only the
 * exact SPAWN; the client's SPAWNED decoder accepts only what the encoder makes). The client's
 * handling of whole conversations over real sockets is fuzz_privsep_client.c. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devio.h"
#include "devio_linux.h"
#include "devio_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t out[DEVIO_PROTO_RESPONSE_MAX];
        static struct devio_response resp;
        struct devio_proto_hdr h;
        struct devio_request req;
        int r, len;

        if (size == DEVIO_PROTO_CTL_SIZE) {
                uint8_t ctl[DEVIO_PROTO_CTL_SIZE];
                int32_t pid;
                int status;

                check(privsep_proto_encode_spawn(ctl, sizeof ctl) == (int)sizeof ctl);
                check(privsep_proto_is_spawn(data, size) == (memcmp(ctl, data, size) == 0));
                if (privsep_proto_decode_spawned(data, size, &status, &pid) == 0) {
                        check(status == 0 ? pid > 0 : status < 0 && status >= -4095 && pid == 0);
                        len = privsep_proto_encode_spawned(status, pid, ctl, sizeof ctl);
                        check(len == (int)size && memcmp(ctl, data, size) == 0);
                }
        }
        check(!privsep_proto_is_spawn(data, size) || size == DEVIO_PROTO_CTL_SIZE);
        if (privsep_proto_decode_header(data, size, &h) < 0)
                return 0;
        check(h.magic == DEVIO_PROTO_MAGIC && h.id != 0);
        check(size == DEVIO_PROTO_HDR_SIZE + h.len);
        switch (h.type) {
        case DEVIO_PROTO_REQUEST:
                r = privsep_proto_decode_request(&h, data, size, &req);
                check(r == 0 || r == -EINVAL);
                if (r < 0)
                        break;
                check(privsep_request_valid(&req) == 0);
                check(req.n >= 1 && req.n <= DEVIO_MAX_CMDS);
                check(memchr(req.name, '\0', sizeof req.name) != NULL);
                check(strchr(req.name, '/') == NULL && strchr(req.name, '.') == NULL);
                len = privsep_proto_encode_request(h.id, &req, out, sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        case DEVIO_PROTO_RESPONSE:
                r = privsep_proto_decode_response(&h, data, size, &resp);
                check(r == 0 || r == -EBADMSG);
                if (r < 0 || h.status < 0)
                        break;
                check(resp.n <= DEVIO_MAX_CMDS);
                for (uint32_t i = 0; i < resp.n; i++)
                        check(resp.r[i].len <= DEVIO_DATA_MAX &&
                              resp.r[i].sense_len <= DEVIO_SENSE_MAX && resp.r[i].err <= 0);
                len = privsep_proto_encode_response(h.id, 0, &resp, out, sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        case DEVIO_PROTO_HELLO:
                len = privsep_proto_encode_hello(out, sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        default:
                abort(); /* the header decoder lets no other type through */
        }
        return 0;
}
