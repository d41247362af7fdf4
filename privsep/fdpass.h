/* One message with at most one file descriptor over a SOCK_SEQPACKET socket (SCM_RIGHTS,
 * unix(7), cmsg(3)): the only place in privsep/ that sends or receives one. The zygote sends a
 * helper's socket with it, the client receives it; the helper, the zygote and the client thread
 * receive every message through it too (taking no descriptor). Tests speak to the zygote and the
 * helper with it. */
#pragma once

#include <stddef.h>

/* Sends the len bytes at buf as one message on sock, with fd attached when fd >= 0 (the caller
 * keeps its fd). flags are send(2)'s (MSG_DONTWAIT); MSG_NOSIGNAL is always added, so a peer
 * that is gone is -EPIPE, not a signal. Retries after EINTR. Returns 0, or -errno from
 * sendmsg(2) (-EMSGSIZE as well when only part of it went, which SOCK_SEQPACKET never does).
 * Any thread. */
int privsep_send_fd(int sock, const void *buf, size_t len, int fd, int flags);

/* Receives one message of at most size bytes on sock into buf, with MSG_CMSG_CLOEXEC added to
 * flags (recv(2)'s: MSG_DONTWAIT), so a descriptor never arrives without O_CLOEXEC.
 *
 * With ret_fd NULL no descriptor is wanted: there is no room for one, so the kernel closes any
 * that comes along, and the message counts as it is. With ret_fd, *ret_fd is the one
 * descriptor that came with the message by SCM_RIGHTS at level SOL_SOCKET, or -1 for none.
 *
 * Returns 0 with *ret_len the message's length (0: EOF, or an empty message: SOCK_SEQPACKET
 * cannot tell them apart). -EMSGSIZE when the message was longer than size (MSG_TRUNC: the rest
 * is lost), -EBADMSG (only with ret_fd) when what came along was not at most one descriptor by
 * SCM_RIGHTS: more than one, another kind of control message, or control data cut short
 * (MSG_CTRUNC); then *ret_len holds the bytes received, which the caller may still look at,
 * *ret_fd is -1, and every descriptor that came is closed. Otherwise -errno from recvmsg(2)
 * (-EAGAIN, -EINTR, -ECONNRESET, ...) with *ret_len 0 and *ret_fd -1. Any thread. */
int privsep_recv_fd(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd);
