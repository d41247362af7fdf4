/* What each process that privsep starts (the zygote, every helper) does first to its inherited
 * state: signal dispositions back to the default, its socket onto fd 3, stdio to /dev/null, every
 * other descriptor closed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "privsep_internal.h"

void privsep_child_signals(void)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};

        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP)
                        (void)sigaction(s, &sa, NULL);
}

/* The socket to fd 3, stdin and stdout to /dev/null, everything above 3 closed; stderr stays (the
 * daemon's log: journald or the terminal) unless the socket itself was there. Returns the
 * socket's new fd or -errno. */
int privsep_child_fds(int fd)
{
        int null;

        if (fd != 3) {
                if (dup3(fd, 3, O_CLOEXEC) < 0)
                        return -errno;
        }
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                for (int i = 0; i <= 2; i++)
                        if (i != null && (i < 2 || fd == 2))
                                (void)dup2(null, i);
                if (null > 3)
                        close(null);
        }
        if (close_range(4, ~0U, 0) < 0)
                for (int i = 4; i < 65536; i++)
                        (void)close(i);
        return 3;
}
