/* The operator's edits of the state file while no daemon uses it: one target's reference reset,
 * one disk's records exported and imported. See canary_reset.h. */
#include "canary_reset.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "canary.h"
#include "canary_records.h"
#include "statefile.h"

static int failf(char *err, size_t errsz, int r, const char *fmt, ...) _printf_(4, 5);
static int failf(char *err, size_t errsz, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
        return r;
}

/* Locks the state directory dirfd for an edit, through a descriptor of its own (*ret_fd, which
 * the caller closes to unlock). Returns 0 or -errno with the sentence in err. */
static int lock_for_edit(int dirfd, int *ret_fd, char *err, size_t errsz)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r, pid;
        char who[48] = "";

        if (fd < 0)
                return failf(err, errsz, -errno, "cannot open the state directory: %s",
                             strerror(errno));
        r = statefile_lock(fd);
        if (r < 0)
                close(fd);
        else
                *ret_fd = fd;
        if (r == -EBUSY) {
                pid = statefile_lock_holder(dirfd);
                if (pid > 0)
                        snprintf(who, sizeof who, " (pid %d)", pid);
                return failf(err, errsz, r,
                             "another process%s uses this state directory: a running or starting "
                             "diskpulse (it would write its records back over the edit) or "
                             "another edit; stop diskpulse and its socket (systemctl stop "
                             "diskpulse.socket diskpulse), then try again",
                             who);
        }
        if (r < 0)
                return failf(err, errsz, r, "cannot lock the state directory: %s", strerror(-r));
        return 0;
}

/* Reads and parses the state file into *ret. -ENOENT without one. */
static int read_records(int dirfd, struct canary_records *ret, char *err, size_t errsz)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = statefile_read(dirfd, CANARY_STATE_FILE, CANARY_STATE_MAX_BYTES, &buf, &len);

        if (r < 0)
                return failf(err, errsz, r, "cannot read the state file %s: %s", CANARY_STATE_FILE,
                             strerror(-r));
        r = canary_records_parse(buf, len, ret);
        if (r < 0)
                return failf(err, errsz, r, "the state file %s is not usable: %s",
                             CANARY_STATE_FILE, strerror(-r));
        if (ret->bad > 0) {
                unsigned bad = ret->bad;
                canary_records_free(ret);
                return failf(err, errsz, -EBADMSG,
                             "the state file %s has %u bad line%s; a diskpulse start sets a copy "
                             "aside and keeps the good records: edit after that",
                             CANARY_STATE_FILE, bad, bad == 1 ? "" : "s");
        }
        return 0;
}

/* Keeps a copy of the state file under "canary-baselines.TAG-TIME", then writes recs in its
 * place. Prints the copy's name. Returns 0 or -errno with the sentence in err. */
static int replace_file(int dirfd, const struct canary_records *recs, const char *tag, FILE *out,
                        char *err, size_t errsz)
{
        _cleanup_free_ char *text = NULL;
        char aside[NAME_MAX + 1];
        size_t tlen;
        int r = canary_records_format(recs, &text, &tlen);

        if (r < 0)
                return failf(err, errsz, r, "cannot format the state file: %s", strerror(-r));
        r = statefile_set_aside(dirfd, CANARY_STATE_FILE, tag, STATEFILE_ASIDE_KEEP, aside,
                                sizeof aside);
        if (r == 0)
                fprintf(out, "kept: the previous file as %s\n", aside);
        else if (r != -ENOENT)
                return failf(err, errsz, r,
                             "cannot keep a copy of the state file %s, so it is not changed: %s",
                             CANARY_STATE_FILE, strerror(-r));
        r = statefile_write_atomic(dirfd, CANARY_STATE_FILE, text, tlen);
        if (r < 0)
                return failf(err, errsz, r, "cannot write the state file %s: %s", CANARY_STATE_FILE,
                             strerror(-r));
        return 0;
}

/* path into out without trailing slashes ("DIR/" is "DIR", as --canary.path takes it). Returns
 * false when it does not fit. */
static bool clean_path(const char *path, char out[CANARY_PATH_MAX])
{
        size_t len;

        if (!strscpy(out, path, CANARY_PATH_MAX))
                return false;
        len = strlen(out);
        while (len > 1 && out[len - 1] == '/')
                out[--len] = 0;
        return true;
}

/* "/a, /b and /c" of the distinct values of recs' field (path or disk) into buf. */
static void list_known(const struct canary_records *recs, bool paths, char *buf, size_t size)
{
        size_t used = 0;

        buf[0] = 0;
        for (size_t i = 0; i < recs->n; i++) {
                const char *v = paths ? recs->v[i].path : recs->v[i].disk;
                bool seen = false;
                int k;

                for (size_t j = 0; j < i && !seen; j++)
                        seen = strcmp(v, paths ? recs->v[j].path : recs->v[j].disk) == 0;
                if (seen)
                        continue;
                k = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", v);
                if (k < 0 || (size_t)k >= size - used) {
                        if (size > 5)
                                strcpy(buf + size - 5, " ...");
                        return;
                }
                used += (size_t)k;
        }
        if (used == 0)
                snprintf(buf, size, "none");
}

int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz)
{
        struct canary_records recs = {0};
        char want[CANARY_PATH_MAX], known[768];
        _cleanup_close_ int lock = -1;
        int r, n = 0;

        if (!clean_path(path, want))
                return failf(err, errsz, -ENAMETOOLONG, "the path is too long");
        r = lock_for_edit(dirfd, &lock, err, errsz);
        if (r < 0)
                return r;
        r = read_records(dirfd, &recs, err, errsz);
        if (r < 0)
                return r;
        for (size_t i = 0; i < recs.n; i++) {
                struct canary_record *rec = &recs.v[i];
                char was[32] = "none";

                if (strcmp(rec->path, want) != 0)
                        continue;
                if (rec->st.reference > 0)
                        snprintf(was, sizeof was, "%gs", rec->st.reference);
                canary_reference_reset(&rec->st);
                fprintf(out, "reset: disk=%s mode=%s path=%s regime=%s (reference was %s; %s)\n",
                        rec->disk, rec->mode, rec->path, canary_regime_to_string(rec->regime), was,
                        rec->st.reference > 0 ? "the current baseline until 7 new days refine it"
                                              : "learnt again after the warm-up");
                n++;
        }
        if (n == 0) {
                list_known(&recs, true, known, sizeof known);
                canary_records_free(&recs);
                return failf(err, errsz, 0,
                             "no record of the path %s in the state file; the paths it knows: %s",
                             want, known);
        }
        r = replace_file(dirfd, &recs, "reset", out, err, errsz);
        canary_records_free(&recs);
        return r < 0 ? r : n;
}

int canary_export_records(int dirfd, const char *disk, FILE *out, char *err, size_t errsz)
{
        struct canary_records recs = {0}, mine = {0};
        _cleanup_free_ char *text = NULL;
        char known[768];
        size_t tlen;
        int r, n;

        r = read_records(dirfd, &recs, err, errsz);
        if (r < 0)
                return r;
        for (size_t i = 0; i < recs.n; i++)
                if (strcmp(recs.v[i].disk, disk) == 0)
                        (void)canary_records_put(&mine, &recs.v[i]);
        if (mine.n == 0) {
                list_known(&recs, false, known, sizeof known);
                canary_records_free(&recs);
                return failf(err, errsz, 0,
                             "no record of the disk %s in the state file; the disks it knows: %s",
                             disk, known);
        }
        canary_records_free(&recs);
        n = (int)mine.n;
        r = canary_records_format(&mine, &text, &tlen);
        canary_records_free(&mine);
        if (r < 0)
                return failf(err, errsz, r, "cannot format the records: %s", strerror(-r));
        if (fwrite(text, 1, tlen, out) != tlen || fflush(out) != 0)
                return failf(err, errsz, -EIO, "cannot write the records: %s", strerror(errno));
        return n;
}

int canary_import_records(int dirfd, const char *text, size_t len, const char *path,
                          bool (*present)(void *ud, const char *disk), void *ud, FILE *out,
                          char *err, size_t errsz)
{
        struct canary_records in = {0}, recs = {0};
        char want[CANARY_PATH_MAX] = "";
        _cleanup_close_ int lock = -1;
        int r;

        r = canary_records_parse(text, len, &in);
        if (r < 0)
                return failf(err, errsz, r, "the records to import are not a state file: %s",
                             strerror(-r));
        if (in.bad > 0 || in.n == 0) {
                unsigned bad = in.bad;
                canary_records_free(&in);
                if (bad == 0)
                        return failf(err, errsz, -EBADMSG, "no record to import");
                return failf(err, errsz, -EBADMSG,
                             "the records to import have %u bad line%s; nothing imported", bad,
                             bad == 1 ? "" : "s");
        }
        for (size_t i = 0; i < in.n; i++)
                if (strcmp(in.v[i].disk, in.v[0].disk) != 0) {
                        r = failf(err, errsz, -EINVAL,
                                  "the records to import are of more than one disk (%s, %s); "
                                  "import one disk at a time",
                                  in.v[0].disk, in.v[i].disk);
                        canary_records_free(&in);
                        return r;
                }
        if (present && !present(ud, in.v[0].disk)) {
                r = failf(err, errsz, -ENODEV,
                          "no disk with the identity %s on this host: the records of a disk are "
                          "imported where that disk is",
                          in.v[0].disk);
                canary_records_free(&in);
                return r;
        }
        if (path) {
                if (!clean_path(path, want) || want[0] != '/') {
                        canary_records_free(&in);
                        return failf(err, errsz, -EINVAL,
                                     "the path of the imported records must be absolute");
                }
        }
        r = lock_for_edit(dirfd, &lock, err, errsz);
        if (r == 0) {
                r = read_records(dirfd, &recs, err, errsz);
                if (r == -ENOENT)
                        r = 0;
        }
        for (size_t i = 0; r == 0 && i < in.n; i++) {
                struct canary_record *rec = &in.v[i];
                bool had;

                if (want[0])
                        (void)strscpy(rec->path, want, sizeof rec->path);
                had = canary_records_find(&recs, rec->disk, rec->mode, rec->path, rec->regime);
                r = canary_records_put(&recs, rec);
                if (r < 0)
                        r = failf(err, errsz, r, "an imported record is not valid");
                else
                        fprintf(out, "imported: disk=%s mode=%s path=%s regime=%s%s\n", rec->disk,
                                rec->mode, rec->path, canary_regime_to_string(rec->regime),
                                had ? " (replaces the record this host had)" : "");
        }
        if (r == 0)
                r = replace_file(dirfd, &recs, "import", out, err, errsz);
        r = r < 0 ? r : (int)in.n;
        canary_records_free(&recs);
        canary_records_free(&in);
        return r;
}
