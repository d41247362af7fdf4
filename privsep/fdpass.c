/* Sending and receiving one message with a bounded number of file descriptors (SCM_RIGHTS): the
 * checks live here once, for the zygote, the helper, its workers and the client. See fdpass.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"

/* Room for one more descriptor than anyone may send, so that a peer sending too many has each
 * closed here (counted, refused) instead of the whole message looking like a truncated one;
 * beyond that the kernel truncates (MSG_CTRUNC) and closes the rest itself. */
#define FDPASS_ROOM (PRIVSEP_FDPASS_MAX + 1)

int privsep_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds, int flags)
{
        union {
                char buf[CMSG_SPACE(PRIVSEP_FDPASS_MAX * sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

        if (nfds > PRIVSEP_FDPASS_MAX || (nfds > 0 && !fds))
                return -EINVAL;
        for (size_t i = 0; i < nfds; i++)
                if (fds[i] < 0)
                        return -EBADF;
        if (nfds > 0) {
                struct cmsghdr *c;

                memset(&cbuf, 0, sizeof cbuf);
                m.msg_control = cbuf.buf;
                m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
                c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
        }
        for (;;) {
                ssize_t n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);

                if (n == (ssize_t)len)
                        return 0;
                if (n >= 0)
                        return -EMSGSIZE;
                if (errno != EINTR)
                        return -errno;
        }
}

int privsep_send_fd(int sock, const void *buf, size_t len, int fd, int flags)
{
        return privsep_send_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0, flags);
}

int privsep_recv_fds(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fds,
                     size_t max, size_t *ret_nfds)
{
        union {
                char buf[CMSG_SPACE(FDPASS_ROOM * sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = buf, .iov_len = size};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        int fds[FDPASS_ROOM];
        size_t nfds = 0;
        bool bad = false;
        ssize_t n;

        *ret_len = 0;
        if (ret_nfds)
                *ret_nfds = 0;
        if (max > PRIVSEP_FDPASS_MAX || (max > 0 && (!ret_fds || !ret_nfds)))
                return -EINVAL;
        for (size_t i = 0; i < max; i++)
                ret_fds[i] = -1;
        if (max > 0) {
                m.msg_control = cbuf.buf;
                m.msg_controllen = sizeof cbuf.buf;
        }
        n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        *ret_len = (size_t)n;
        if (max > 0) {
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
                        size_t k;

                        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                                bad = true;
                                continue;
                        }
                        k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int fd;

                                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                                if (nfds < FDPASS_ROOM)
                                        fds[nfds++] = fd;
                                else
                                        close(fd);
                                bad |= nfds > max;
                        }
                }
                bad |= (m.msg_flags & MSG_CTRUNC) != 0;
        }
        if (bad || (m.msg_flags & MSG_TRUNC)) {
                for (size_t i = 0; i < nfds; i++)
                        close(fds[i]);
                return m.msg_flags & MSG_TRUNC ? -EMSGSIZE : -EBADMSG;
        }
        for (size_t i = 0; i < nfds; i++)
                ret_fds[i] = fds[i];
        if (ret_nfds)
                *ret_nfds = nfds;
        return 0;
}

int privsep_recv_fd(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd)
{
        size_t nfds;

        return privsep_recv_fds(sock, buf, size, flags, ret_len, ret_fd, ret_fd ? 1 : 0, &nfds);
}
