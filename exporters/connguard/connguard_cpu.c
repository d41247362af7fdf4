/* The HTTP front's two threads on one CPU while its load is light.
 *
 * A scrape's first byte wakes both libmicrohttpd's thread (to read the request) and the guard's
 * (to time it from that byte). Left to the scheduler, each wakes on the CPU it last ran on, so
 * an idle host has two CPUs woken from idle for every scrape, where waking one costs several
 * times the scrape's own work (measured on a virtual machine at a 15 s scrape: the guard's part
 * of a scrape 0.55 ms of CPU apart, 0.11 ms beside libmicrohttpd's thread, and the whole daemon
 * 1.96 ms against 1.43 ms). So while at most SHARE_CPU_MAX connections are open, both threads are
 * kept on the CPU libmicrohttpd's thread finished its last response on; a connection beyond
 * that gives them back every CPU the process may use, so that a flood is met by both CPUs. The
 * main thread, whose rounds come at their own times, is left to the scheduler.
 *
 * Only the two threads' own affinity is set, never the process's: the mask they are given back
 * is the main thread's, whatever systemd (CPUAffinity=) or a cpuset allows at that moment. If the
 * system refuses (a seccomp filter without sched_setaffinity), nothing changes and the guard does
 * not ask again. */
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "connguard_internal.h"
#include "log.h"

static void give_up(struct connguard *g, int err)
{
        g->cpu_refused = true;
        log_errno(LOG_LEVEL_DEBUG, -err, "cannot keep the HTTP threads on one CPU", NULL);
}

/* Caller holds the lock; libmicrohttpd's thread, a response just sent. */
void connguard_share_cpu(struct connguard *g)
{
        cpu_set_t one;
        int cpu;

        if (g->shared_cpu >= 0 || g->cpu_refused || g->live > SHARE_CPU_MAX || g->guard_tid <= 0)
                return;
        cpu = sched_getcpu();
        if (cpu < 0 || cpu >= CPU_SETSIZE)
                return;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) < 0) {
                give_up(g, errno);
                return;
        }
        if (sched_setaffinity(g->guard_tid, sizeof one, &one) < 0) {
                int e = errno;
                (void)cpus_of_main_thread(0);
                give_up(g, e);
                return;
        }
        g->mhd_tid = gettid();
        g->shared_cpu = cpu;
}

/* Caller holds the lock. Any thread. */
void connguard_release_cpu(struct connguard *g)
{
        if (g->shared_cpu < 0 || g->live <= SHARE_CPU_MAX)
                return;
        g->shared_cpu = -1;
        (void)cpus_of_main_thread(g->mhd_tid);
        (void)cpus_of_main_thread(g->guard_tid);
}
