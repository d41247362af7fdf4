/* One message with a bounded number of file descriptors (at most PRIVSEP_FDPASS_MAX, none for
 * most) over a SOCK_SEQPACKET socket (SCM_RIGHTS, unix(7), cmsg(3)): the only place in privsep/
 * that sends or receives a message, with descriptors or without. The zygote sends a helper's socket with it (one), a worker the descriptors of a
 * privileged function (up to DEVIO_MAX_FDS, in its one answer), the client receives them; the
 * helper, the zygote and the client thread receive every message through it. Tests speak to the
 * zygote and the helper with it.
 *
 * Several descriptors travel in the one message they belong to, never in a series of messages:
 * the helper's workers share its socket and write to it concurrently, and one SOCK_SEQPACKET
 * message (data and control together) is atomic, so an answer and its descriptors cannot be
 * interleaved with another worker's, and the receiver never keeps half an answer. */
#pragma once

#include <stddef.h>

#define PRIVSEP_FDPASS_MAX 4 /* descriptors in one message, at most (DEVIO_MAX_FDS) */

/* Sends the len bytes at buf as one message on sock, with the nfds descriptors fds[] attached
 * (at most PRIVSEP_FDPASS_MAX, each >= 0; the caller keeps its fds). flags are send(2)'s
 * (MSG_DONTWAIT); MSG_NOSIGNAL is always added, so a peer that is gone is -EPIPE, not a signal.
 * Retries after EINTR. Returns 0, -EINVAL for more than PRIVSEP_FDPASS_MAX, -EBADF for a
 * negative one, or -errno from sendmsg(2) (-EMSGSIZE as well when only part of it went, which
 * SOCK_SEQPACKET never does). Any thread. */
int privsep_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds, int flags);

/* privsep_send_fds() with fd attached when fd >= 0, none otherwise. */
int privsep_send_fd(int sock, const void *buf, size_t len, int fd, int flags);

/* Receives one message of at most size bytes on sock into buf, with MSG_CMSG_CLOEXEC added to
 * flags (recv(2)'s: MSG_DONTWAIT), so a descriptor never arrives without O_CLOEXEC.
 *
 * max is how many descriptors the caller accepts (0 to PRIVSEP_FDPASS_MAX). With max 0 no
 * descriptor is wanted: there is no room for one, so the kernel closes any that comes along, and
 * the message counts as it is. Otherwise ret_fds[0..max) are set to -1 and the descriptors that
 * came with the message by SCM_RIGHTS at level SOL_SOCKET fill ret_fds[0..*ret_nfds).
 *
 * Returns 0 with *ret_len the message's length (0: EOF, or an empty message: SOCK_SEQPACKET
 * cannot tell them apart). -EMSGSIZE when the message was longer than size (MSG_TRUNC: the rest
 * is lost), -EBADMSG (only with max > 0) when what came along was not at most max descriptors by
 * SCM_RIGHTS: more, another kind of control message, or control data cut short (MSG_CTRUNC);
 * then *ret_len holds the bytes received, which the caller may still look at. On every error
 * *ret_nfds is 0, ret_fds[] are -1 and every descriptor that came is closed. -EINVAL for max over
 * PRIVSEP_FDPASS_MAX (nothing received). Otherwise -errno from recvmsg(2) (-EAGAIN, -EINTR,
 * -ECONNRESET, ...) with *ret_len 0. Any thread. */
int privsep_recv_fds(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fds,
                     size_t max, size_t *ret_nfds);

/* privsep_recv_fds() for at most one descriptor: with ret_fd NULL none is wanted (max 0); with
 * ret_fd, *ret_fd is the one that came, or -1. The same returns (-EBADMSG: more than one). */
int privsep_recv_fd(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd);
