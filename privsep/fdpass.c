/* Sending and receiving one message with at most one file descriptor (SCM_RIGHTS): the checks
 * live here once, for the zygote, the helper and the client. See fdpass.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"

/* Room for a few descriptors, so that a peer sending more than one has each closed here instead
 * of the whole message looking like a truncated one. */
#define FDPASS_MAX 4

int privsep_send_fd(int sock, const void *buf, size_t len, int fd, int flags)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

        if (fd >= 0) {
                struct cmsghdr *c;

                memset(&cbuf, 0, sizeof cbuf);
                m.msg_control = cbuf.buf;
                m.msg_controllen = sizeof cbuf.buf;
                c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof fd);
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

int privsep_recv_fd(int sock, void *buf, size_t size, int flags, size_t *ret_len, int *ret_fd)
{
        union {
                char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = buf, .iov_len = size};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        int fds[FDPASS_MAX], nfds = 0;
        bool bad = false;
        ssize_t n;

        *ret_len = 0;
        if (ret_fd) {
                *ret_fd = -1;
                m.msg_control = cbuf.buf;
                m.msg_controllen = sizeof cbuf.buf;
        }
        n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        *ret_len = (size_t)n;
        if (ret_fd) {
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
                                if (nfds < FDPASS_MAX)
                                        fds[nfds++] = fd;
                                else
                                        close(fd);
                                bad |= nfds > 1;
                        }
                }
                bad |= (m.msg_flags & MSG_CTRUNC) != 0;
        }
        if (bad || (m.msg_flags & MSG_TRUNC)) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return m.msg_flags & MSG_TRUNC ? -EMSGSIZE : -EBADMSG;
        }
        if (ret_fd && nfds == 1)
                *ret_fd = fds[0];
        return 0;
}
