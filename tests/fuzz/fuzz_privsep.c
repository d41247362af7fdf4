/* Fuzz target of the decoders at both ends of the helper protocol: the helper's request decoder
 * (any bytes from the unprivileged side must be refused or decode to a request that
 * privsep_request_valid() accepts and that encodes back to the same bytes), the client's decoders
 * of responses and HELLO, and the zygote's control messages (16 bytes: the zygote takes only the
 * exact SPAWN; the client's SPAWNED decoder accepts only what the encoder makes), and the
 * privileged functions' PRIV (the helper's decoder: a terminated, zero-padded name and at most
 * DEVIO_PRIV_ARG_MAX bytes of argument, or -EINVAL) and PRIV_ANSWER (the client's: at most
 * DEVIO_MAX_FDS descriptors and only with status 0, a message without NUL and only with an
 * error); whatever a decoder accepts encodes back to the same bytes. The client's
 * handling of whole conversations over real sockets is fuzz_privsep_client.c. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devio.h"
#include "devio_linux.h"
#include "privsep_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t out[PRIVSEP_PROTO_RESPONSE_MAX];
        static struct devio_response resp;
        static struct privsep_proto_priv pr;
        struct privsep_proto_priv_answer pa;
        struct privsep_proto_hdr h;
        struct devio_request req;
        int r, len;

        if (size == PRIVSEP_PROTO_CTL_SIZE) {
                uint8_t ctl[PRIVSEP_PROTO_CTL_SIZE];
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
        check(!privsep_proto_is_spawn(data, size) || size == PRIVSEP_PROTO_CTL_SIZE);
        if (privsep_proto_decode_header(data, size, &h) < 0)
                return 0;
        check(h.magic == PRIVSEP_PROTO_MAGIC && h.id != 0);
        check(size == PRIVSEP_PROTO_HDR_SIZE + h.len);
        switch (h.type) {
        case PRIVSEP_PROTO_REQUEST:
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
        case PRIVSEP_PROTO_RESPONSE:
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
        case PRIVSEP_PROTO_HELLO:
                len = privsep_proto_encode_hello(out, sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        case PRIVSEP_PROTO_PRIV:
                r = privsep_proto_decode_priv(&h, data, size, &pr);
                check(r == 0 || r == -EINVAL);
                if (r < 0)
                        break;
                check(pr.len <= DEVIO_PRIV_ARG_MAX && size <= PRIVSEP_PROTO_PRIV_MAX);
                check(pr.name[0] != '\0' && memchr(pr.name, '\0', sizeof pr.name) != NULL);
                len = privsep_proto_encode_priv(h.id, pr.name, pr.arg, pr.len, out, sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        case PRIVSEP_PROTO_PRIV_ANSWER:
                r = privsep_proto_decode_priv_answer(&h, data, size, &pa);
                check(r == 0 || r == -EBADMSG);
                if (r < 0)
                        break;
                check(pa.nfds <= DEVIO_MAX_FDS && (h.status == 0 || pa.nfds == 0));
                check(memchr(pa.err, '\0', sizeof pa.err) != NULL);
                check(h.status < 0 || pa.err[0] == '\0');
                check(size <= PRIVSEP_PROTO_PRIV_ANSWER_MAX);
                len = privsep_proto_encode_priv_answer(h.id, h.status, pa.nfds, pa.err, out,
                                                       sizeof out);
                check(len == (int)size && memcmp(out, data, size) == 0);
                break;
        default:
                abort(); /* the header decoder lets no other type through */
        }
        return 0;
}
