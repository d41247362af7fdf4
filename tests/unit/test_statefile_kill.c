/* lib/statefile.c under SIGKILL at every step of a save: the real statefile_write_atomic_flags()
 * (O_TMPFILE + linkat, and the named temp file) runs in a child traced with ptrace, stopped at
 * every system call's entry and exit, and killed at the Nth stop for N = 1, 2, ... until a run
 * completes. After each kill the file is the old content before the rename and the new one
 * after it, complete, mode 0600; a leftover temp file is what statefile_remove_stale() (called
 * at every start by the canary's loading) removes, and nothing else in the directory changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmptree.h"
#include "fsroot.h"
#include "statefile.h"
#include "util.h"

#define NAME     "canary-baselines"
#define OTHER    "other"
#define TMP_PFX  "." NAME ".tmp-"
#define MAX_STOP 4096

/* What one traced run did. */
struct run {
        bool completed;   /* exited by itself (exit status in status) */
        bool skipped;     /* the child could not be traced (EPERM: a seccomp filter, Yama) */
        int status;       /* exit status when completed */
        int stops;        /* syscall stops seen (entries and exits) */
        int rename_done;  /* the stop at the rename's exit (0: not reached) */
        int first, last;  /* the stops of the save's first and last syscall (the directory's
                             open, its fsync) */
        int nr[MAX_STOP]; /* syscall number at each entry stop, -1 at exits */
};

static char old_data[3000], new_data[9000];

static void fill(char *buf, size_t len, int version)
{
        for (size_t i = 0; i < len; i++)
                buf[i] = (i + 1) % 80 == 0 ? '\n' : (char)('a' + (i / 80 + (size_t)version) % 26);
}

static int setup_dir(void **state)
{
        struct tmpdir *d = calloc(1, sizeof(*d));

        if (!d || test_tmpdir_new(d, "test_statefile_kill") < 0) {
                free(d);
                return -1;
        }
        fill(old_data, sizeof old_data, 0);
        fill(new_data, sizeof new_data, 1);
        *state = d;
        return 0;
}

static int teardown_dir(void **state)
{
        struct tmpdir *d = *state;
        int r = test_tmpdir_free(d);

        free(d);
        return r;
}

static bool is_rename(long nr)
{
#ifdef SYS_renameat
        if (nr == SYS_renameat)
                return true;
#endif
#ifdef SYS_rename
        if (nr == SYS_rename)
                return true;
#endif
        return nr == SYS_renameat2;
}

static const char *syscall_name(int nr)
{
        static char buf[16];

        if (nr == SYS_openat)
                return "openat";
        if (nr == SYS_fchmod)
                return "fchmod";
        if (nr == SYS_write)
                return "write";
        if (nr == SYS_fsync)
                return "fsync";
        if (nr == SYS_linkat)
                return "linkat";
        if (is_rename(nr))
                return "rename";
        if (nr == SYS_close)
                return "close";
        if (nr == SYS_getrandom)
                return "getrandom";
        if (nr == SYS_unlinkat)
                return "unlinkat";
        if (nr == SYS_exit_group)
                return "exit_group";
        snprintf(buf, sizeof buf, "#%d", nr);
        return buf;
}

/* What a traced child runs: the save of new_data. */
static int save_new(int dirfd, unsigned flags)
{
        return statefile_write_atomic_flags(dirfd, NAME, new_data, sizeof new_data, flags);
}

/* Runs op (the save of new_data, or another step) in a traced child, killed with SIGKILL at
 * syscall stop kill_at (0: never). The child stops itself before op, so the stops counted are
 * those of op and of the child's few calls around it (the end of raise(), exit_group). */
static void traced_op(int (*op)(int dirfd, unsigned flags), int dirfd, unsigned flags, int kill_at,
                      struct run *ret)
{
        int st, sig = 0;
        pid_t pid;

        memset(ret, 0, sizeof *ret);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int r;

                if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
                        _exit(77);
                raise(SIGSTOP);
                r = op(dirfd, flags);
                _exit(r == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
                ret->skipped = true;
                return;
        }
        assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
        assert_int_equal(ptrace(PTRACE_SETOPTIONS, pid, NULL,
                                (void *)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
                         0);
        for (;;) {
                struct __ptrace_syscall_info info;

                assert_int_equal(ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(intptr_t)sig), 0);
                sig = 0;
                assert_int_equal(waitpid(pid, &st, 0), pid);
                if (WIFEXITED(st)) {
                        ret->completed = true;
                        ret->status = WEXITSTATUS(st);
                        return;
                }
                assert_false(WIFSIGNALED(st));
                if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
                        sig = WSTOPSIG(st); /* a signal for the child: deliver it */
                        continue;
                }
                assert_true(ret->stops < MAX_STOP);
                ret->stops++;
                assert_true(ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof info, &info) > 0);
                if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
                        ret->nr[ret->stops] = (int)info.entry.nr;
                        if (info.entry.nr == SYS_openat && ret->first == 0)
                                ret->first = ret->stops;
                        if (info.entry.nr == SYS_fsync)
                                ret->last = ret->stops + 1;
                } else {
                        ret->nr[ret->stops] = -1;
                        if (is_rename(ret->nr[ret->stops - 1]) && !info.exit.is_error)
                                ret->rename_done = ret->stops;
                }
                if (ret->stops == kill_at) {
                        assert_int_equal(kill(pid, SIGKILL), 0);
                        assert_int_equal(waitpid(pid, &st, 0), pid);
                        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
                        return;
                }
        }
}

/* The directory's names, sorted, joined by spaces; *ret_temps: how many are temp files. */
static void list_dir(int dirfd, char *out, size_t size, int *ret_temps)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *names[32];
        size_t n = 0, o = 0;
        struct dirent *e;
        DIR *dir;

        assert_true(fd >= 0);
        dir = fdopendir(fd);
        assert_non_null(dir);
        *ret_temps = 0;
        while ((e = readdir(dir)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                        assert_true(n < ARRAY_SIZE(names));
                        *ret_temps += strncmp(e->d_name, TMP_PFX, strlen(TMP_PFX)) == 0;
                        names[n++] = strdup(e->d_name);
                }
        closedir(dir);
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++)
                        if (strcmp(names[j], names[i]) < 0) {
                                char *t = names[i];
                                names[i] = names[j];
                                names[j] = t;
                        }
        out[0] = 0;
        for (size_t i = 0; i < n; i++) {
                o += (size_t)snprintf(out + o, size - o, "%s%s", i ? " " : "", names[i]);
                free(names[i]);
        }
}

static bool content_is(int dirfd, const char *name, const char *want, size_t want_len)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        return statefile_read(dirfd, name, 1 << 20, &buf, &len) == 0 && len == want_len &&
               memcmp(buf, want, len) == 0;
}

/* After a run killed at stop n: old or new complete as the rename says, temp files removed as
 * at a start, nothing else touched. Returns how many temp files were left. */
static int check_after(int dirfd, int n, int rename_done)
{
        char names[1024];
        struct stat st;
        int temps, left;
        bool renamed = rename_done > 0 && n >= rename_done;

        if (renamed ? !content_is(dirfd, NAME, new_data, sizeof new_data)
                    : !content_is(dirfd, NAME, old_data, sizeof old_data))
                fail_msg("killed at stop %d (the rename done at stop %d): %s is not the %s content",
                         n, rename_done, NAME, renamed ? "new" : "old");
        assert_int_equal(fstatat(dirfd, NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_mode & 07777, STATEFILE_MODE);
        assert_int_equal(st.st_nlink, 1);
        assert_true(content_is(dirfd, OTHER, "other\n", 6));
        list_dir(dirfd, names, sizeof names, &temps);
        if (temps > 1)
                fail_msg("killed at stop %d: more than one temp file: %s", n, names);
        assert_int_equal(statefile_remove_stale(dirfd, NAME), temps);
        list_dir(dirfd, names, sizeof names, &left);
        assert_string_equal(names, NAME " " OTHER);
        return temps;
}

/* Kills the save at every stop of one variant; returns how many kill points were checked. */
static int kill_everywhere(struct tmpdir *d, unsigned flags, const char *what)
{
        struct run full, *r = malloc(sizeof *r);
        char seq[2048];
        size_t o = 0;
        int points = 0, stale = 0, fsyncs = 0, links = 0;

        assert_non_null(r);
        /* The complete run first: how many stops, where the rename and the save are. */
        assert_int_equal(statefile_write_atomic(d->fd, NAME, old_data, sizeof old_data), 0);
        traced_op(save_new, d->fd, flags, 0, &full);
        if (full.skipped) {
                free(r);
                print_message("cannot ptrace a child here (a seccomp filter or Yama): skipped\n");
                skip();
        }
        assert_true(full.completed);
        assert_int_equal(full.status, 0);
        assert_true(full.rename_done > 0);
        assert_true(full.first > 0 && full.last > full.first);
        (void)check_after(d->fd, full.stops + 1, full.rename_done);
        for (int i = full.first; i <= full.last; i++)
                if (full.nr[i] >= 0) {
                        o += (size_t)snprintf(seq + o, sizeof seq - o, "%s%s", o ? " " : "",
                                              syscall_name(full.nr[i]));
                        fsyncs += full.nr[i] == SYS_fsync;
                        links += full.nr[i] == SYS_linkat;
                }
        assert_int_equal(fsyncs, 2); /* the temp file's and the directory's */
        if (flags & STATEFILE_NO_TMPFILE)
                assert_int_equal(links, 0);
        else if (links == 0)
                print_message("%s: no O_TMPFILE here (the fallback ran)\n", what);

        /* Then a kill at each stop, before and after each syscall. */
        for (int n = 1;; n++) {
                assert_int_equal(statefile_write_atomic(d->fd, NAME, old_data, sizeof old_data), 0);
                traced_op(save_new, d->fd, flags, n, r);
                if (r->completed) {
                        assert_int_equal(r->status, 0);
                        assert_true(n > full.stops);
                        break;
                }
                assert_int_equal(r->stops, n);
                /* the same path as the complete run (the syscalls do not depend on timing) */
                assert_int_equal(r->rename_done, n >= full.rename_done ? full.rename_done : 0);
                stale += check_after(d->fd, n, full.rename_done) > 0;
                points++;
        }
        print_message("%s: %d kill points (%d syscall stops, the save's syscalls: %s; the rename "
                      "done at stop %d); %d left a temp file, removed as at a start\n",
                      what, points, full.stops, seq, full.rename_done, stale);
        assert_true(points >= 2 * 7);
        if (!(flags & STATEFILE_NO_TMPFILE) && links == 0)
                assert_int_equal(stale, 0);
        else
                assert_true(stale > 0);
        free(r);
        return points;
}

static void test_kill_at_every_syscall(void **state)
{
        struct tmpdir *d = *state;
        _cleanup_close_ int dir = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd, total;

        assert_true(dir >= 0);
        fd = openat(dir, OTHER, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "other\n", 6), 6);
        close(fd);
        total = kill_everywhere(d, 0, "O_TMPFILE + linkat");
        total += kill_everywhere(d, STATEFILE_NO_TMPFILE, "named temp file");
        print_message("kill points checked: %d\n", total);
}

#define ASIDE_PFX NAME ".reset-"
#define FIRST     ASIDE_PFX "20260101T000001Z"

/* What a traced child runs: the copy a reset keeps before it writes. */
static int keep_copy(int dirfd, unsigned flags)
{
        (void)flags;
        return statefile_set_aside(dirfd, NAME, "reset", STATEFILE_ASIDE_KEEP, NULL, 0);
}

/* The state file and STATEFILE_ASIDE_MAX copies (of the form before the ".N" numbers, so the
 * oldest is FIRST), nothing else. */
static void aside_scene(int dirfd)
{
        struct dirent *e;
        DIR *dir;
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        assert_true(fd >= 0);
        dir = fdopendir(fd);
        assert_non_null(dir);
        while ((e = readdir(dir)))
                if (e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..") != 0))
                        assert_int_equal(unlinkat(dirfd, e->d_name, 0), 0);
        closedir(dir);
        for (int k = 0; k <= STATEFILE_ASIDE_MAX; k++) {
                char name[64], text[16];
                int f;

                if (k == 0)
                        snprintf(name, sizeof name, "%s", NAME);
                else
                        snprintf(name, sizeof name, ASIDE_PFX "20260101T0000%02dZ", k);
                snprintf(text, sizeof text, "copy %d\n", k);
                f = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                assert_true(f >= 0);
                assert_int_equal(write(f, text, strlen(text)), (ssize_t)strlen(text));
                close(f);
        }
}

/* The copies there are (names that begin like one); *ret_new: those aside_scene() did not
 * make. */
static int count_copies(int dirfd, char *names, size_t size, int *ret_new)
{
        int n = 0, temps;
        char *p;

        list_dir(dirfd, names, size, &temps);
        *ret_new = 0;
        for (p = names; (p = strstr(p, ASIDE_PFX)); p++) {
                n++;
                *ret_new += strncmp(p, ASIDE_PFX "20260101T0000", strlen(ASIDE_PFX) + 13) != 0;
        }
        return n;
}

/* A set-aside killed at every system call: at rest no more than STATEFILE_ASIDE_MAX copies are
 * ever left (room is made before the copy, not after), the state file is untouched, and the
 * oldest copy, the first of its kind, is never the one that goes. */
static void test_aside_bound_under_kill(void **state)
{
        struct tmpdir *d = *state;
        struct run full, *r = malloc(sizeof *r);
        char names[2048];
        int points = 0, made = 0, fresh;

        assert_non_null(r);
        aside_scene(d->fd);
        traced_op(keep_copy, d->fd, 0, 0, &full);
        if (full.skipped) {
                free(r);
                print_message("cannot ptrace a child here (a seccomp filter or Yama): skipped\n");
                skip();
        }
        assert_true(full.completed);
        assert_int_equal(full.status, 0);
        assert_int_equal(count_copies(d->fd, names, sizeof names, &fresh), STATEFILE_ASIDE_MAX);
        assert_int_equal(fresh, 1);
        for (int n = 1;; n++) {
                int copies;

                aside_scene(d->fd);
                traced_op(keep_copy, d->fd, 0, n, r);
                if (r->completed) {
                        assert_int_equal(r->status, 0);
                        break;
                }
                copies = count_copies(d->fd, names, sizeof names, &fresh);
                if (copies > STATEFILE_ASIDE_MAX)
                        fail_msg("killed at stop %d: %d copies left: %s", n, copies, names);
                assert_true(content_is(d->fd, NAME, "copy 0\n", 7));
                if (!content_is(d->fd, FIRST, "copy 1\n", 7))
                        fail_msg("killed at stop %d: the first copy went: %s", n, names);
                made += fresh > 0; /* the new copy is there */
                points++;
        }
        print_message("set aside: %d kill points (%d syscall stops), the new copy made at %d of "
                      "them, never more than %d copies\n",
                      points, full.stops, made, STATEFILE_ASIDE_MAX);
        assert_true(points >= 10 && made > 0);
        free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_kill_at_every_syscall, setup_dir, teardown_dir),
            cmocka_unit_test_setup_teardown(test_aside_bound_under_kill, setup_dir, teardown_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
