/* The wire format between the daemon and its privileged device-I/O helper: one SOCK_SEQPACKET
 * message per request or response, a fixed header and a length-checked payload. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devio.h"

/* Both ends are the same binary on the same host, so the layout is native (host byte order);
 * the magic catches a peer that is not ours, the version a mismatched pair. */
#define DEVIO_PROTO_MAGIC   0x4f495044u /* "DPIO" read as little-endian bytes */
#define DEVIO_PROTO_VERSION 1u

enum devio_proto_type {
        DEVIO_PROTO_REQUEST = 1,  /* payload: struct devio_request, exactly */
        DEVIO_PROTO_RESPONSE = 2, /* payload: see below */
        DEVIO_PROTO_HELLO = 3,    /* helper -> daemon, once: ready (capabilities dropped) */
};

/* Every message starts with this header (24 bytes, no padding).
 *
 * REQUEST:  status 0; len = sizeof(struct devio_request); id != 0 chosen by the client.
 * RESPONSE: the request's id. status 0: the commands ran and the payload is the first
 *           offsetof(struct devio_response, r) + n * sizeof(struct devio_result) bytes of a
 *           struct devio_response (n <= DEVIO_MAX_CMDS, each result's len <= DEVIO_DATA_MAX,
 *           sense_len <= DEVIO_SENSE_MAX, err <= 0). status -errno (> -4096): the request did
 *           not run (-EINVAL malformed, -EAGAIN too many requests in flight, -EIO the worker died
 *           without answering, -ETIMEDOUT the worker was killed for running too long); len 0.
 * HELLO:    id 1, status 0, len 0. */
struct devio_proto_hdr {
        uint32_t magic;
        uint16_t version;
        uint16_t type;  /* enum devio_proto_type */
        uint64_t id;    /* request id; never 0 */
        int32_t status; /* RESPONSE: 0 or -errno; REQUEST: 0 */
        uint32_t len;   /* payload bytes after the header */
};

#define DEVIO_PROTO_HDR_SIZE     sizeof(struct devio_proto_hdr)
#define DEVIO_PROTO_REQUEST_SIZE (DEVIO_PROTO_HDR_SIZE + sizeof(struct devio_request))
#define DEVIO_PROTO_RESPONSE_MAX (DEVIO_PROTO_HDR_SIZE + sizeof(struct devio_response))

/* Encodes a request into buf (at least DEVIO_PROTO_REQUEST_SIZE bytes). Returns the message
 * length, or -EINVAL when id is 0 or size too small (the request itself is not checked here).
 * Pure; any thread. */
int privsep_proto_encode_request(uint64_t id, const struct devio_request *req, void *buf,
                                 size_t size);

/* Encodes a response: with status 0 the first resp->n results of resp (resp->n must be at most
 * DEVIO_MAX_CMDS), with status < 0 no payload (resp may be NULL). buf holds at least
 * DEVIO_PROTO_RESPONSE_MAX bytes. Returns the message length or -EINVAL. Pure; any thread. */
int privsep_proto_encode_response(uint64_t id, int status, const struct devio_response *resp,
                                  void *buf, size_t size);

/* Encodes the helper's HELLO into buf (at least DEVIO_PROTO_HDR_SIZE bytes). Returns the message
 * length or -EINVAL. Pure; any thread. */
int privsep_proto_encode_hello(void *buf, size_t size);

/* Checks the framing of a message of len bytes: magic, version, a known type, id != 0, a payload
 * length that matches len exactly, a status that fits the type. Fills *ret_hdr on success.
 * Returns 0 or -EBADMSG (not a message of ours: nothing can be answered). Pure. */
int privsep_proto_decode_header(const void *buf, size_t len, struct devio_proto_hdr *ret_hdr);

/* Decodes the payload of a framed REQUEST (after privsep_proto_decode_header() accepted buf) and
 * checks it with privsep_request_valid(). Returns 0 and fills *ret_req, -EBADMSG when hdr is not
 * a request of the right size, or -EINVAL for a request the helper must refuse (answer -EINVAL
 * to hdr->id). Pure. */
int privsep_proto_decode_request(const struct devio_proto_hdr *hdr, const void *buf, size_t len,
                                 struct devio_request *ret_req);

/* Decodes a framed RESPONSE. With hdr->status == 0 it checks and copies the results into
 * *ret_resp (results past n are zeroed); with a negative status it leaves *ret_resp alone.
 * Returns 0 or -EBADMSG. Pure. */
int privsep_proto_decode_response(const struct devio_proto_hdr *hdr, const void *buf, size_t len,
                                  struct devio_response *ret_resp);

/* The zygote's control socket (privsep/privsep.h) carries two fixed 16-byte messages of its own,
 * never framed by struct devio_proto_hdr (a helper that is sent one drops it as malformed):
 *
 * SPAWN   (daemon -> zygote): magic DEVIO_PROTO_CTL_MAGIC, version DEVIO_PROTO_VERSION, type
 *         DEVIO_PROTO_SPAWN, status 0, pid 0. The zygote compares what it receives byte for byte
 *         with this one message (privsep_proto_is_spawn()) and ignores anything else: it parses
 *         nothing.
 * SPAWNED (zygote -> daemon, one per SPAWN, in order): type DEVIO_PROTO_SPAWNED; either status 0,
 *         pid > 0 (the new helper) and exactly one file descriptor attached with SCM_RIGHTS (the
 *         daemon's end of the helper's socket), or status -errno, pid 0 and no descriptor. */
#define DEVIO_PROTO_CTL_MAGIC 0x5a495044u /* "DPIZ" read as little-endian bytes */

enum devio_proto_ctl_type {
        DEVIO_PROTO_SPAWN = 16,
        DEVIO_PROTO_SPAWNED = 17,
};

struct devio_proto_ctl {
        uint32_t magic;
        uint16_t version;
        uint16_t type; /* enum devio_proto_ctl_type */
        int32_t status;
        int32_t pid;
};

#define DEVIO_PROTO_CTL_SIZE sizeof(struct devio_proto_ctl)

/* Encodes SPAWN into buf (at least DEVIO_PROTO_CTL_SIZE bytes). Returns the length or -EINVAL.
 * Pure; any thread. */
int privsep_proto_encode_spawn(void *buf, size_t size);

/* True when the len bytes at buf are exactly the SPAWN message. Pure. */
bool privsep_proto_is_spawn(const void *buf, size_t len);

/* Encodes SPAWNED: status 0 with pid > 0, or status -errno (> -4096) with pid 0. Returns the
 * length, or -EINVAL for any other combination or a buffer under DEVIO_PROTO_CTL_SIZE. Pure. */
int privsep_proto_encode_spawned(int status, int32_t pid, void *buf, size_t size);

/* Decodes SPAWNED (the same rules as the encoder). Returns 0 and fills *ret_status and *ret_pid,
 * or -EBADMSG. Pure. */
int privsep_proto_decode_spawned(const void *buf, size_t len, int *ret_status, int32_t *ret_pid);
