/* The wire format between the daemon and its privileged device-I/O helper: one SOCK_SEQPACKET
 * message per request or response, a fixed header and a length-checked payload. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devio.h"

/* Both ends are the same binary on the same host, so the layout is native (host byte order);
 * the magic catches a peer that is not ours, the version a mismatched pair. */
#define PRIVSEP_PROTO_MAGIC   0x4f495044u /* "DPIO" read as little-endian bytes */
#define PRIVSEP_PROTO_VERSION 1u

enum privsep_proto_type {
        PRIVSEP_PROTO_REQUEST = 1,     /* payload: struct devio_request, exactly */
        PRIVSEP_PROTO_RESPONSE = 2,    /* payload: see below */
        PRIVSEP_PROTO_HELLO = 3,       /* helper -> daemon, once: ready (capabilities dropped) */
        PRIVSEP_PROTO_PRIV = 4,        /* daemon -> helper: run a privileged function (see below) */
        PRIVSEP_PROTO_PRIV_ANSWER = 5, /* worker or helper -> daemon: its result and descriptors */
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
 * HELLO:    id 1, status 0, len 0.
 * PRIV:     status 0; id != 0 chosen by the client; payload: the function's name in
 *           DEVIO_NAME_MAX bytes (not empty, NUL-terminated, zero-padded), then its argument,
 *           len - DEVIO_NAME_MAX bytes (at most DEVIO_PRIV_ARG_MAX; longer is refused -EINVAL).
 * PRIV_ANSWER: the PRIV's id; status: the function's result (0 or -errno), or the helper's own
 *           -errno (-EINVAL malformed, -ENOENT no such function, -EAGAIN too many requests in
 *           flight, -EIO the worker died without answering or broke the rules, -ETIMEDOUT it was
 *           killed for running too long); payload: uint32_t nfds, then the message text
 *           (len - 4 bytes, at most DEVIO_PRIV_ERR_MAX - 1, no NUL; none with status 0).
 *           nfds <= DEVIO_MAX_FDS, 0 unless status is 0, and exactly nfds descriptors come with
 *           the message by SCM_RIGHTS (fdpass.h): the receiver checks the count and closes them
 *           all when it differs. */
struct privsep_proto_hdr {
        uint32_t magic;
        uint16_t version;
        uint16_t type;  /* enum privsep_proto_type */
        uint64_t id;    /* request id; never 0 */
        int32_t status; /* RESPONSE: 0 or -errno; REQUEST: 0 */
        uint32_t len;   /* payload bytes after the header */
};

#define PRIVSEP_PROTO_HDR_SIZE     sizeof(struct privsep_proto_hdr)
#define PRIVSEP_PROTO_REQUEST_SIZE (PRIVSEP_PROTO_HDR_SIZE + sizeof(struct devio_request))
#define PRIVSEP_PROTO_RESPONSE_MAX (PRIVSEP_PROTO_HDR_SIZE + sizeof(struct devio_response))
#define DEVIO_PRIV_ERR_MAX         256 /* a privileged function's message, its NUL included */
#define PRIVSEP_PROTO_PRIV_MAX     (PRIVSEP_PROTO_HDR_SIZE + DEVIO_NAME_MAX + DEVIO_PRIV_ARG_MAX)
#define PRIVSEP_PROTO_PRIV_ANSWER_MAX                                                              \
        (PRIVSEP_PROTO_HDR_SIZE + sizeof(uint32_t) + DEVIO_PRIV_ERR_MAX - 1)

/* A decoded PRIV. */
struct privsep_proto_priv {
        char name[DEVIO_NAME_MAX]; /* NUL-terminated */
        uint32_t len;              /* bytes of arg */
        uint8_t arg[DEVIO_PRIV_ARG_MAX];
};

/* A decoded PRIV_ANSWER (its status is the header's). */
struct privsep_proto_priv_answer {
        uint32_t nfds;                /* descriptors that must have come with it */
        char err[DEVIO_PRIV_ERR_MAX]; /* NUL-terminated; empty with status 0 */
};

/* Encodes a request into buf (at least PRIVSEP_PROTO_REQUEST_SIZE bytes). Returns the message
 * length, or -EINVAL when id is 0 or size too small (the request itself is not checked here).
 * Pure; any thread. */
int privsep_proto_encode_request(uint64_t id, const struct devio_request *req, void *buf,
                                 size_t size);

/* Encodes a response: with status 0 the first resp->n results of resp (resp->n must be at most
 * DEVIO_MAX_CMDS), with status < 0 no payload (resp may be NULL). buf holds at least
 * PRIVSEP_PROTO_RESPONSE_MAX bytes. Returns the message length or -EINVAL. Pure; any thread. */
int privsep_proto_encode_response(uint64_t id, int status, const struct devio_response *resp,
                                  void *buf, size_t size);

/* Encodes the helper's HELLO into buf (at least PRIVSEP_PROTO_HDR_SIZE bytes). Returns the message
 * length or -EINVAL. Pure; any thread. */
int privsep_proto_encode_hello(void *buf, size_t size);

/* Checks the framing of a message of len bytes: magic, version, a known type, id != 0, a payload
 * length that matches len exactly, a status that fits the type. Fills *ret_hdr on success.
 * Returns 0 or -EBADMSG (not a message of ours: nothing can be answered). Pure. */
int privsep_proto_decode_header(const void *buf, size_t len, struct privsep_proto_hdr *ret_hdr);

/* Decodes the payload of a framed REQUEST (after privsep_proto_decode_header() accepted buf) and
 * checks it with privsep_request_valid(). Returns 0 and fills *ret_req, -EBADMSG when hdr is not
 * a request of the right size, or -EINVAL for a request the helper must refuse (answer -EINVAL
 * to hdr->id). Pure. */
int privsep_proto_decode_request(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                                 struct devio_request *ret_req);

/* Decodes a framed RESPONSE. With hdr->status == 0 it checks and copies the results into
 * *ret_resp (results past n are zeroed); with a negative status it leaves *ret_resp alone.
 * Returns 0 or -EBADMSG. Pure. */
int privsep_proto_decode_response(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                                  struct devio_response *ret_resp);

/* Encodes a PRIV into buf (at least PRIVSEP_PROTO_PRIV_MAX bytes, or the message's length):
 * function name (1 to DEVIO_NAME_MAX - 1 bytes) and len bytes of arg (at most
 * DEVIO_PRIV_ARG_MAX; arg may be NULL when len is 0). Returns the message length or -EINVAL.
 * Pure; any thread. */
int privsep_proto_encode_priv(uint64_t id, const char *name, const void *arg, size_t len, void *buf,
                              size_t size);

/* Decodes a framed PRIV. Returns 0 and fills *ret, -EBADMSG when hdr is not a PRIV of len bytes,
 * or -EINVAL for one the helper must refuse (answer -EINVAL to hdr->id): a name that is empty,
 * not terminated or not zero-padded, an argument longer than DEVIO_PRIV_ARG_MAX. Pure. */
int privsep_proto_decode_priv(const struct privsep_proto_hdr *hdr, const void *buf, size_t len,
                              struct privsep_proto_priv *ret);

/* Encodes a PRIV_ANSWER into buf (at least PRIVSEP_PROTO_PRIV_ANSWER_MAX bytes): status 0 with
 * nfds <= DEVIO_MAX_FDS and no text, or status -errno (> -4096) with nfds 0 and the text of err
 * (NULL: none; cut at DEVIO_PRIV_ERR_MAX - 1 bytes). Returns the message length or -EINVAL.
 * Pure; any thread. */
int privsep_proto_encode_priv_answer(uint64_t id, int status, size_t nfds, const char *err,
                                     void *buf, size_t size);

/* Decodes a framed PRIV_ANSWER (the same rules as the encoder). Returns 0 and fills *ret, or
 * -EBADMSG. Pure. */
int privsep_proto_decode_priv_answer(const struct privsep_proto_hdr *hdr, const void *buf,
                                     size_t len, struct privsep_proto_priv_answer *ret);

/* The zygote's control socket (privsep/privsep.h) carries two fixed 16-byte messages of its own,
 * never framed by struct privsep_proto_hdr (a helper that is sent one drops it as malformed):
 *
 * SPAWN   (daemon -> zygote): magic PRIVSEP_PROTO_CTL_MAGIC, version PRIVSEP_PROTO_VERSION, type
 *         PRIVSEP_PROTO_SPAWN, status 0, pid 0. The zygote compares what it receives byte for byte
 *         with this one message (privsep_proto_is_spawn()) and ignores anything else: it parses
 *         nothing.
 * SPAWNED (zygote -> daemon, one per SPAWN, in order): type PRIVSEP_PROTO_SPAWNED; either status 0,
 *         pid > 0 (the new helper) and exactly one file descriptor attached with SCM_RIGHTS (the
 *         daemon's end of the helper's socket), or status -errno, pid 0 and no descriptor. */
#define PRIVSEP_PROTO_CTL_MAGIC 0x5a495044u /* "DPIZ" read as little-endian bytes */

enum privsep_proto_ctl_type {
        PRIVSEP_PROTO_SPAWN = 16,
        PRIVSEP_PROTO_SPAWNED = 17,
};

struct privsep_proto_ctl {
        uint32_t magic;
        uint16_t version;
        uint16_t type; /* enum privsep_proto_ctl_type */
        int32_t status;
        int32_t pid;
};

#define PRIVSEP_PROTO_CTL_SIZE sizeof(struct privsep_proto_ctl)

/* Encodes SPAWN into buf (at least PRIVSEP_PROTO_CTL_SIZE bytes). Returns the length or -EINVAL.
 * Pure; any thread. */
int privsep_proto_encode_spawn(void *buf, size_t size);

/* True when the len bytes at buf are exactly the SPAWN message. Pure. */
bool privsep_proto_is_spawn(const void *buf, size_t len);

/* Encodes SPAWNED: status 0 with pid > 0, or status -errno (> -4096) with pid 0. Returns the
 * length, or -EINVAL for any other combination or a buffer under PRIVSEP_PROTO_CTL_SIZE. Pure. */
int privsep_proto_encode_spawned(int status, int32_t pid, void *buf, size_t size);

/* Decodes SPAWNED (the same rules as the encoder). Returns 0 and fills *ret_status and *ret_pid,
 * or -EBADMSG. Pure. */
int privsep_proto_decode_spawned(const void *buf, size_t len, int *ret_status, int32_t *ret_pid);
