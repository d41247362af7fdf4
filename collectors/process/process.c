/* The standard process_* metrics, from /proc/self (proc(5)). */
#include "process.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int process_parse_stat(const char *buf, uint64_t *ret_ticks, uint64_t *ret_vsize,
                       uint64_t *ret_rss_pages)
{
        /* "pid (comm) state ..." — comm may hold spaces and parentheses: skip to the last ')'. */
        const char *p = strrchr(buf, ')');
        unsigned long long utime, stime, vsize;
        long long rss;

        if (!p)
                return -EINVAL;
        /* fields from 3 (state): state ppid pgrp session tty_nr tpgid flags minflt cminflt
         * majflt cmajflt utime(14) stime(15) cutime cstime priority nice num_threads
         * itrealvalue starttime(22) vsize(23) rss(24) */
        if (sscanf(p + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                   "%*u %llu %lld",
                   &utime, &stime, &vsize, &rss) != 4)
                return -EINVAL;
        *ret_ticks = utime + stime;
        *ret_vsize = vsize;
        *ret_rss_pages = rss < 0 ? 0 : (uint64_t)rss;
        return 0;
}

long process_fds_listed(void)
{
        struct dirent *e;
        long n = 0;
        DIR *d = opendir("/proc/self/fd");

        if (!d)
                return -1;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n ? n - 1 : 0; /* the directory's own fd */
}

/* The open file descriptors: the size stat(2) gives /proc/self/fd (Linux 6.2 and later), else
 * the listing. Every scrape asks: a listing costs a lookup per descriptor, the size one call. */
static long open_fds(void)
{
        struct stat st;

        if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
                return (long)st.st_size;
        return process_fds_listed();
}

/* /proc/self/stat into buf (NUL-terminated): the file is opened once and read again from its
 * start every scrape (procfs makes it anew for each read at offset 0), which spares the lookup
 * of /proc/self and its entry every time. -1 if it cannot be read. Main thread. */
static ssize_t read_self_stat(char *buf, size_t size)
{
        static int fd = -1;
        ssize_t n;

        if (fd < 0)
                fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -1;
        n = pread(fd, buf, size - 1, 0);
        if (n <= 0) {
                close(fd); /* opened again next time */
                fd = -1;
                return -1;
        }
        buf[n] = '\0';
        return n;
}

void process_export(struct mset *out, usec_t start_time)
{
        static long hz, page;
        char buf[1024];
        uint64_t ticks, vsize, rss;
        struct rlimit rl;
        long n;

        if (!hz) {
                hz = sysconf(_SC_CLK_TCK);
                page = sysconf(_SC_PAGESIZE);
        }
        if (read_self_stat(buf, sizeof buf) > 0 &&
            process_parse_stat(buf, &ticks, &vsize, &rss) == 0) {
                struct mfamily *f =
                    mset_family(out, "process_cpu_seconds_total",
                                "Total user and system CPU time spent in seconds.", MT_COUNTER);
                mfamily_add(out, f, "", (double)ticks / (double)(hz > 0 ? hz : 100), NULL);
                mset_gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                           (double)vsize, NULL);
                mset_gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
                           (double)rss * (double)(page > 0 ? page : 4096), NULL);
        }
        n = open_fds();
        if (n >= 0)
                mset_gauge(out, "process_open_fds", "Number of open file descriptors.", (double)n,
                           NULL);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
                mset_gauge(out, "process_max_fds", "Maximum number of open file descriptors.",
                           rl.rlim_cur == RLIM_INFINITY ? 1.0 / 0.0 : (double)rl.rlim_cur, NULL);
        mset_gauge(out, "process_start_time_seconds",
                   "Start time of the process since unix epoch in seconds.",
                   (double)(start_time / USEC_PER_SEC), NULL);
}
