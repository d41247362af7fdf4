/* What the connection guard's files share: the guard and connection structs under the guard's
 * one lock, the limits and deadlines, and the calls between the accept thread and admission
 * (connguard.c), the connection table and its eviction (connguard_table.c), the hang-up watch
 * (connguard_hangup.c), the deadlines (connguard_deadline.c) and libmicrohttpd's callbacks
 * (connguard_mhd.c). */
#pragma once

#include <linux/tcp.h> /* tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "addrmap.h"
#include "connguard.h"

/* epoll data of the guard's own descriptors (a listening socket's is its index); a socket in the
 * hang-up watch has HUP_TAG | seq << 32 | fd. */
#define STOP_TAG     UINT64_MAX
#define HUP_TAG      (UINT64_C(1) << 62)
#define HUP_SET      (UINT64_MAX - 1)
#define WAKE_TAG     (UINT64_MAX - 2)
#define HUP_SEQ_MASK ((uint32_t)((HUP_TAG - 1) >> 32))
/* How often deadlines are checked while a connection is busy (its request arriving or being
 * answered, its response not yet read by its peer, not started, or not watched): the precision of
 * those timeouts. While every connection is idle between requests, its socket watched for its
 * next first byte, the guard sleeps until the earliest idle deadline instead. */
#define SWEEP_INTERVAL (250 * USEC_PER_MSEC)
/* A connection handed to libmicrohttpd that it never started (it failed to set one up, and
 * closed the socket) is forgotten after this. */
#define PENDING_MAX_AGE (10 * USEC_PER_SEC)
/* At a limit a connection waiting for its request this long may always make room: a real client
 * sends its request at once. Younger ones only make room for an address holding fewer. */
#define EVICT_MIN_AGE (1 * USEC_PER_SEC)
/* A connection accepted this recently whose request has not arrived is the last to make room: a
 * client sends its request within milliseconds of its connect, so it has had no chance to yet.
 * (Under a flood from many addresses, the rule "an address holding more gives one up" would
 * otherwise pick a scraper's connection the moment after it was accepted, its address holding
 * one like each attacker's, and a request still arriving goes before an idle connection.) */
#define EVICT_GRACE (200 * USEC_PER_MSEC)
/* Evicted connections take a moment to close; beyond the limit plus this many, refuse. */
#define EVICT_SLACK(max) ((max) / 8 + 8)
/* The write deadline: a connection with data waiting for its peer (unsent or unacknowledged)
 * whose peer has acknowledged fewer than WRITE_PROGRESS bytes in WRITE_TIMEOUT is closed, so a
 * slot is never held by a reader slower than 16 KiB in 5 s (3.2 KiB/s); a real scraper, even
 * across a slow link, reads a page far faster. At a limit such a connection may make room once
 * it has stalled for EVICT_MIN_AGE. */
#define WRITE_TIMEOUT  (5 * USEC_PER_SEC)
#define WRITE_PROGRESS (16 * 1024)
/* Connections accepted from one socket before looking at the others and the clock. */
#define ACCEPT_BATCH 64
/* After EMFILE and the like, accepting pauses this long (the backlog keeps the rest). */
#define ACCEPT_PAUSE (100 * USEC_PER_MSEC)
/* Connections handed to libmicrohttpd and not yet started, beyond which accepting waits. */
#define PENDING_LIMIT 32
/* While libmicrohttpd catches up (too many handed over and not started, or the slack full of
 * connections it has still to close), accepting pauses this long at a time, so that the
 * kernel's backlog, first come first served, keeps the newcomers instead of a reset; after
 * THROTTLE_MAX of that without a break, newcomers are accepted and refused again. */
#define THROTTLE_PAUSE (1 * USEC_PER_MSEC)
#define THROTTLE_MAX   (100 * USEC_PER_MSEC)
/* Connections at most in the waiting room (see enum verdict); beyond, refused at once. */
#define WAITING_MAX 16
/* While at most this many connections are open, libmicrohttpd's thread and the guard's share one
 * CPU (see connguard_cpu.c): a scraper or two, a pair of Prometheus servers, someone's curl. */
#define SHARE_CPU_MAX 4
/* Summary of refusals and closes in the log, at most this often. */
#define LOG_INTERVAL (60 * USEC_PER_SEC)

/* Time from t to now; 0 if t is later (stamped by another thread after now was read). */
static inline usec_t connguard_elapsed(usec_t now, usec_t t)
{
        return now > t ? now - t : 0;
}

enum phase {
        PHASE_HEADERS,  /* a request is arriving (or expected, right after accept) */
        PHASE_HANDLING, /* its headers are complete: the response is being made and sent */
        PHASE_IDLE,     /* kept alive, between requests */
};

struct gconn {
        int fd;
        bool started;  /* libmicrohttpd has started it (else: handed over, not yet started) */
        bool in_table; /* byfd[fd] points here */
        bool closing;  /* shut down by the guard; libmicrohttpd will close it */
        bool keyed;    /* counted in the per-address map (IP clients) */
        enum phase phase;
        usec_t accepted;
        usec_t since;       /* start of the current request, or of the idle wait */
        uint64_t rx_mark;   /* bytes received by the end of the last response */
        uint32_t segs_mark; /* segments with data received by then */
        uint64_t ack_mark;  /* bytes the peer had acknowledged at stall_since */
        usec_t stall_since; /* data waits for the peer since (no progress); 0: none waits */
        bool hup;           /* its peer has hung up or reset it (the hang-up watch said so) */
        bool watched;       /* its socket is in the hang-up watch */
        bool armed;         /* ... and the watch reports its next request's first byte (EPOLLIN):
                               while idle between requests */
        uint32_t seq;       /* tells its hang-up events from those of an earlier socket */
        struct netaddr addr;
        struct addrkey key;
};

/* A connection accepted and neither admitted nor refused yet. */
struct waiting {
        int fd;
        socklen_t len;
        usec_t since; /* accepted */
        struct sockaddr_storage ss;
};

struct connguard {
        pthread_mutex_t lock;
        struct connguard_config cfg;
        struct cidr *allow; /* cfg.allow points here */
        struct MHD_Daemon *mhd;
        int *fds;
        size_t nfds;
        int epfd, stopfd;
        int hupfd;    /* the hang-up watch: every admitted socket, EPOLLRDHUP | EPOLLET */
        int wakefd;   /* eventfd: libmicrohttpd's thread wakes a sleeping guard (connguard_busy) */
        uint32_t seq; /* of the last admitted connection */
        struct waiting waiting[WAITING_MAX]; /* the waiting room (see enum verdict); the guard's */
        size_t nwaiting;                     /* thread only */
        pthread_t thread;
        bool running;
        bool paused;
        usec_t paused_until;

        struct gconn **byfd;
        size_t nbyfd;
        struct addrmap addrs;
        unsigned live;          /* in the table or started: counted against the limit */
        unsigned closing;       /* of those, shut down and about to go */
        unsigned unkeyed;       /* of those, unix-domain clients (no address) */
        unsigned pending;       /* of those, handed to libmicrohttpd and not yet started */
        usec_t throttled_since; /* accepting has waited for libmicrohttpd since (0: not) */
        usec_t last_sweep;
        bool busy;       /* a connection needs sweeps every SWEEP_INTERVAL (see there) */
        usec_t idle_due; /* else the next sweep is due then (the earliest idle deadline) */

        pid_t guard_tid, mhd_tid; /* the two threads (mhd_tid: once they share a CPU) */
        int shared_cpu;           /* the CPU they share, or -1 (see connguard_cpu.c) */
        bool cpu_refused;         /* the system does not let them: not asked again */

        struct connguard_stats st;
        struct connguard_stats logged;
        usec_t last_log;
};

/* tcp_info's tcpi_state values (the kernel's TCP_ESTABLISHED and TCP_CLOSE_WAIT, which
 * <linux/tcp.h> does not define and <netinet/tcp.h>, which does, cannot be included beside it).
 * Any other state of an accepted socket means it is closing: the peer has reset it, or one
 * side or both have sent their FIN. */
#define TCPI_STATE_ESTABLISHED 1
#define TCPI_STATE_CLOSE_WAIT  8 /* only the peer's FIN has arrived */

/* ---- connguard_table.c: the kernel's view of a socket, the table, eviction ---- */

/* The kernel's view of a TCP socket; false for other sockets or kernels before 4.6. */
bool connguard_tcp_view(int fd, struct tcp_info *ti);
/* Bytes and segments with data the kernel has received on a TCP socket; 0 for other sockets or
 * old kernels. */
uint64_t connguard_rx_bytes(int fd, uint32_t *ret_segs);
/* Bytes of a next request received since mark (the peer's FIN not counted). */
uint64_t connguard_request_bytes(const struct tcp_info *ti, uint64_t mark);
/* Caller holds the lock. Forgets c's counts; the table slot and memory are the caller's. */
void connguard_uncount(struct connguard *g, struct gconn *c);
/* Caller holds the lock. A connection needs sweeps: wakes the guard's thread if it sleeps. */
void connguard_busy(struct connguard *g);
/* Caller holds the lock. Drops a record libmicrohttpd never started. */
void connguard_drop_pending(struct connguard *g, struct gconn *c);
/* Caller holds the lock. Puts c into the table at its fd (a stale record there goes). */
void connguard_table_put(struct connguard *g, struct gconn *c);
/* Caller holds the lock. A new record for fd, counted (per address when ip). */
struct gconn *connguard_conn_new(struct connguard *g, int fd, const struct netaddr *a, bool ip,
                                 usec_t now);
/* Caller holds the lock; c is started and in the table. Shuts c down, counted in *counter unless
 * counter is NULL. */
void connguard_shut(struct connguard *g, struct gconn *c, uint64_t *counter);
/* Caller holds the lock. The connection to close to make room, or NULL (see connguard_table.c). */
struct gconn *connguard_pick_victim(struct connguard *g, usec_t now, usec_t min_age,
                                    const struct addrkey *key, uint32_t above);

/* ---- connguard_cpu.c: one CPU for both threads while the load is light ---- */
/* Caller holds the lock; libmicrohttpd's thread. Puts both threads on this thread's CPU if at
 * most SHARE_CPU_MAX connections are open and they are not there yet. */
void connguard_share_cpu(struct connguard *g);
/* Caller holds the lock. Gives both threads the process's CPUs again if more than SHARE_CPU_MAX
 * connections are open and they share one. */
void connguard_release_cpu(struct connguard *g);

/* ---- connguard_hangup.c: the hang-up watch ---- */

/* Caller holds the lock. Marks the connections the hang-up watch reports. */
void connguard_take_hangups(struct connguard *g);
/* Caller holds the lock. Shuts idle connections (of key's address when not NULL) whose client
 * has gone; true if there was one. */
bool connguard_reap_hung_up(struct connguard *g, const struct addrkey *key);
/* Caller holds the lock. Whether a connection being answered (of key's address when not NULL) is
 * about to go by itself. */
bool connguard_closing_soon(struct connguard *g, const struct addrkey *key);
/* Caller holds the lock. Puts a socket not yet handed over into the hang-up watch. */
void connguard_watch_hangup(struct connguard *g, struct gconn *c);
/* Caller holds the lock. Whether the watch reports c's next request's first byte (on: c is idle
 * between requests) or only its hang-up. */
void connguard_arm(struct connguard *g, struct gconn *c, bool on);

/* Caller holds the lock. c's next request has begun: its first byte came now (seen: the watch
 * reported it), or at a time read from the kernel (see there). */
void connguard_begin_request(struct connguard *g, struct gconn *c, usec_t now, bool seen);

/* ---- connguard_deadline.c ---- */

/* Caller holds the lock. Deadlines of every connection; pending records never started. */
void connguard_sweep(struct connguard *g, usec_t now);
