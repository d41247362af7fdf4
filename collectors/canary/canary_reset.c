/* The operator's edits of the state file while no daemon uses it: one target's reference reset,
 * one disk's records exported and imported. See canary_reset.h. */
#include "canary_reset.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "canary.h"
#include "canary_records.h"
#include "escape.h"
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

/* The sentence for a records text canary_records_parse() refused (r < 0). */
static const char *parse_error(int r, char *buf, size_t size)
{
        switch (r) {
        case -EBADMSG:
                snprintf(buf, size,
                         "it does not begin with the line \"%s %d\" (a records file begins with "
                         "\"%s VERSION\", VERSION 1 to %d, before any record; "
                         "--canary.export-records writes it so)",
                         CANARY_STATE_HEADER, CANARY_STATE_VERSION, CANARY_STATE_HEADER,
                         CANARY_STATE_VERSION);
                break;
        case -EPROTONOSUPPORT:
                snprintf(buf, size,
                         "its first line names a version this diskpulse does not read (it reads "
                         "\"%s 1\" to \"%s %d\"): written by a newer diskpulse?",
                         CANARY_STATE_HEADER, CANARY_STATE_HEADER, CANARY_STATE_VERSION);
                break;
        case -EFBIG:
                snprintf(buf, size, "it is larger than %d bytes, the most a records file holds",
                         CANARY_STATE_MAX_BYTES);
                break;
        default:
                snprintf(buf, size, "%s", strerror(-r));
        }
        return buf;
}

/* Reads and parses the state file into *ret. -ENOENT without one. edit: for an edit (a reset,
 * an import), else for the export, which only reads. */
static int read_records(int dirfd, struct canary_records *ret, bool edit, char *err, size_t errsz)
{
        _cleanup_free_ char *buf = NULL;
        char why[512];
        size_t len;
        int r = statefile_read(dirfd, CANARY_STATE_FILE, CANARY_STATE_MAX_BYTES, &buf, &len);

        if (r < 0)
                return failf(err, errsz, r, "cannot read the state file %s: %s", CANARY_STATE_FILE,
                             strerror(-r));
        r = canary_records_parse(buf, len, ret);
        if (r < 0)
                return failf(err, errsz, r,
                             "the state file %s is not usable: %s; a diskpulse start sets it "
                             "aside (canary-baselines.corrupt-TIME.N) and starts afresh",
                             CANARY_STATE_FILE, parse_error(r, why, sizeof why));
        if (ret->bad > 0) {
                unsigned bad = ret->bad, first = ret->first_bad;
                canary_records_free(ret);
                if (edit)
                        return failf(err, errsz, -EBADMSG,
                                     "the state file %s has %u bad line%s (the first: line %u), "
                                     "which the edit would lose; a diskpulse start sets a copy "
                                     "of the whole file aside and keeps the good records: edit "
                                     "after that",
                                     CANARY_STATE_FILE, bad, bad == 1 ? "" : "s", first);
                return failf(err, errsz, -EBADMSG,
                             "the state file %s has %u bad line%s (the first: line %u), so its "
                             "records are not exported (a bad line may be this disk's); the "
                             "export only reads the file and changes nothing: start diskpulse "
                             "once (systemctl restart diskpulse, or diskpulse --once with the "
                             "same --state.directory, as the service user, while none runs), "
                             "which keeps the whole file "
                             "aside as %s.corrupt-TIME.N and writes the good records back, then "
                             "export again",
                             CANARY_STATE_FILE, bad, bad == 1 ? "" : "s", first, CANARY_STATE_FILE);
        }
        return 0;
}

/* Keeps a copy of the state file under "canary-baselines.TAG-TIME.N", then writes recs in its
 * place. The copy's name into aside ("" when there was no file). Returns 0 or -errno with the
 * sentence in err. */
static int replace_file(int dirfd, const struct canary_records *recs, const char *tag,
                        char aside[NAME_MAX + 1], char *err, size_t errsz)
{
        _cleanup_free_ char *text = NULL;
        size_t tlen;
        int r = canary_records_format(recs, &text, &tlen);

        aside[0] = 0;
        if (r < 0)
                return failf(err, errsz, r, "cannot format the state file: %s", strerror(-r));
        r = statefile_set_aside(dirfd, CANARY_STATE_FILE, tag, STATEFILE_ASIDE_KEEP, aside,
                                NAME_MAX + 1);
        if (r < 0 && r != -ENOENT)
                return failf(err, errsz, r,
                             "cannot keep a copy of the state file %s, so it is not changed: %s",
                             CANARY_STATE_FILE, strerror(-r));
        if (r < 0)
                aside[0] = 0;
        r = statefile_write_atomic(dirfd, CANARY_STATE_FILE, text, tlen);
        if (r < 0)
                return failf(err, errsz, r,
                             "cannot write the state file %s, so it is not changed: %s",
                             CANARY_STATE_FILE, strerror(-r));
        return 0;
}

/* Removes the temp files a save killed half-way left, as a diskpulse start does; says so on
 * out (the edit's lines, printed once it is done). */
static void remove_stale(int dirfd, FILE *out)
{
        int n = statefile_remove_stale(dirfd, CANARY_STATE_FILE);

        if (n > 0)
                fprintf(out, "removed: %d temporary file%s of an interrupted save (.%s.tmp-*)\n", n,
                        n == 1 ? "" : "s", CANARY_STATE_FILE);
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

/* A path given on the command line in the records' form (canary_path_normalize()). Returns 0 or
 * -errno with the sentence in err; what names the flag. */
static int cli_path(const char *path, const char *what, char out[CANARY_PATH_MAX], char *err,
                    size_t errsz)
{
        int r = canary_path_normalize(path, out, CANARY_PATH_MAX);

        if (r == -ENAMETOOLONG)
                return failf(err, errsz, r,
                             "the path of %s is %zu bytes long; the state file keeps paths of up "
                             "to %d bytes (as --canary.path uses them), so no record can have it",
                             what, strlen(path), CANARY_PATH_MAX - 1);
        if (r < 0)
                return failf(err, errsz, r,
                             "the path of %s must be absolute (it begins with /): %s", what, path);
        return 0;
}

/* Whether the record's path is path as given, its trailing slashes aside (how an older
 * diskpulse took --canary.path). */
static bool same_path(const char *rec, const char *path)
{
        size_t len = strlen(path);

        while (len > 1 && path[len - 1] == '/')
                len--;
        return strlen(rec) == len && strncmp(rec, path, len) == 0;
}

int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz)
{
        struct canary_records recs = {0};
        char want[CANARY_PATH_MAX], known[768], aside[NAME_MAX + 1];
        _cleanup_close_ int lock = -1;
        _cleanup_free_ char *done = NULL;
        size_t donelen = 0;
        FILE *lines;
        int r, n = 0;

        r = cli_path(path, "--canary.reset-reference", want, err, errsz);
        if (r < 0)
                return r;
        r = lock_for_edit(dirfd, &lock, err, errsz);
        if (r < 0)
                return r;
        lines = open_memstream(&done, &donelen);
        if (!lines)
                return failf(err, errsz, -ENOMEM, "out of memory");
        remove_stale(dirfd, lines);
        r = read_records(dirfd, &recs, true, err, errsz);
        if (r < 0) {
                fclose(lines);
                return r;
        }
        for (size_t i = 0; i < recs.n; i++) {
                struct canary_record *rec = &recs.v[i];
                char was[32] = "none";

                /* the path as given too: a record an older diskpulse keyed by "/a/./b" */
                if (strcmp(rec->path, want) != 0 && !same_path(rec->path, path))
                        continue;
                if (rec->st.reference > 0)
                        snprintf(was, sizeof was, "%gs", rec->st.reference);
                canary_reference_reset(&rec->st);
                fprintf(lines, "reset: disk=%s mode=%s path=%s regime=%s (reference was %s; %s)\n",
                        rec->disk, rec->mode, rec->path, canary_regime_to_string(rec->regime), was,
                        rec->st.reference > 0 ? "the current baseline until 7 new days refine it"
                                              : "learnt again after the warm-up");
                n++;
        }
        fclose(lines);
        if (n == 0) {
                list_known(&recs, true, known, sizeof known);
                canary_records_free(&recs);
                return failf(err, errsz, 0,
                             "no record of the path %s in the state file; the paths it knows: %s",
                             want, known);
        }
        /* said only once it is done: a reset that could not be written printed nothing */
        r = replace_file(dirfd, &recs, "reset", aside, err, errsz);
        canary_records_free(&recs);
        if (r < 0)
                return r;
        fputs(done, out);
        if (aside[0])
                fprintf(out, "kept: the previous file as %s\n", aside);
        return n;
}

int canary_export_records(int dirfd, const char *disk, FILE *out, char *err, size_t errsz)
{
        struct canary_records recs = {0}, mine = {0};
        _cleanup_free_ char *text = NULL;
        char known[768];
        size_t tlen;
        int r, n;

        r = read_records(dirfd, &recs, false, err, errsz);
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

/* ISO 8601 UTC of a CLOCK_REALTIME time in microseconds, for messages. */
static const char *iso_time(usec_t t, char *buf, size_t size)
{
        time_t sec = (time_t)(t / USEC_PER_SEC);
        struct tm tm;

        if (t == 0)
                snprintf(buf, size, "never");
        else if (!gmtime_r(&sec, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "@%llu", (unsigned long long)sec);
        return buf;
}

/* The checks of the records to import that need neither the state file nor its lock: one disk,
 * on this host, each record's path (moved to want when given) a directory here on that disk,
 * and no two records left with one key. Returns 0 or -errno with the sentence in err. */
static int check_import(struct canary_records *in, const char *want,
                        const struct canary_import_host *host, char *err, size_t errsz)
{
        const char *disk = in->v[0].disk;

        for (size_t i = 0; i < in->n; i++)
                if (strcmp(in->v[i].disk, disk) != 0)
                        return failf(err, errsz, -EINVAL,
                                     "the records to import are of more than one disk (%s, %s); "
                                     "import one disk at a time",
                                     disk, in->v[i].disk);
        if (host && host->present && !host->present(host->ud, disk))
                return failf(err, errsz, -ENODEV,
                             "no disk with the identity %s on this host: the records of a disk "
                             "are imported where that disk is",
                             disk);
        for (size_t i = 0; want && i < in->n; i++) {
                struct canary_record *rec = &in->v[i];
                char esc[CANARY_PATH_MAX * 4];

                for (size_t j = 0; j < i; j++) {
                        const struct canary_record *o = &in->v[j];

                        if (o->regime != rec->regime || strcmp(o->mode, rec->mode) != 0 ||
                            strcmp(o->path, rec->path) == 0)
                                continue;
                        esc[escape_hex(o->path, esc)] = 0;
                        return failf(err, errsz, -EINVAL,
                                     "the records to import hold two targets of mode %s, %s and "
                                     "%s, which the one --canary.import-path=%s would give the "
                                     "same key (only one could be kept): import each target on "
                                     "its own, its lines with the header, e.g. grep -F -e '%s' "
                                     "-e ' path=%s ' FILE | diskpulse --canary.import-records=- "
                                     "--canary.import-path=DIR",
                                     rec->mode, o->path, rec->path, want, CANARY_STATE_HEADER, esc);
                }
        }
        for (size_t i = 0; want && i < in->n; i++)
                (void)strscpy(in->v[i].path, want, sizeof in->v[i].path);
        for (size_t i = 0; host && host->path_disk && i < in->n; i++) {
                char got[CANARY_DISK_ID_MAX] = "", dev[64] = "", why[512] = "";
                bool seen = false;
                int r;

                for (size_t j = 0; j < i && !seen; j++)
                        seen = strcmp(in->v[j].path, in->v[i].path) == 0;
                if (seen)
                        continue;
                r = host->path_disk(host->ud, in->v[i].path, got, sizeof got, dev, sizeof dev, why,
                                    sizeof why);
                if (r < 0)
                        return failf(err, errsz, r,
                                     "the records of %s cannot be used at %s: %s; nothing imported",
                                     in->v[i].path, in->v[i].path, why);
                if (strcmp(got, disk) != 0)
                        return failf(err, errsz, -EXDEV,
                                     "%s is on %s (%s) here, not on the disk of the records (%s): "
                                     "the canary there would never use them; give the directory "
                                     "where that disk's filesystem is mounted with "
                                     "--canary.import-path=DIR",
                                     in->v[i].path, dev, got, disk);
        }
        return 0;
}

/* Makes room in recs for the keys of in that it does not have, at CANARY_RECORDS_MAX: the least
 * recently updated records of disks this host does not have go, never one in replaces. Their
 * copies into *ret_gone (malloc'd, *ret_n of them). Returns 0 or -ENOSPC with the sentence in
 * err when those are too few (recs unchanged). */
static int make_room(struct canary_records *recs, const struct canary_records *in,
                     const struct canary_import_host *host, struct canary_record **ret_gone,
                     size_t *ret_n, char *err, size_t errsz)
{
        size_t fresh = 0, need, n_cand = 0, *cand;
        struct canary_record *gone;

        *ret_gone = NULL;
        *ret_n = 0;
        for (size_t i = 0; i < in->n; i++)
                fresh += !canary_records_find(recs, in->v[i].disk, in->v[i].mode, in->v[i].path,
                                              in->v[i].regime);
        if (recs->n + fresh <= CANARY_RECORDS_MAX)
                return 0;
        need = recs->n + fresh - CANARY_RECORDS_MAX;
        cand = xcalloc(recs->n, sizeof(*cand));
        for (size_t i = 0; i < recs->n; i++) {
                const struct canary_record *rec = &recs->v[i];
                bool absent = true;

                if (canary_records_find(in, rec->disk, rec->mode, rec->path, rec->regime))
                        continue;
                /* one question per disk: the records before of the same disk answered it */
                for (size_t j = 0; j < n_cand; j++)
                        if (strcmp(recs->v[cand[j]].disk, rec->disk) == 0)
                                goto take;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(recs->v[j].disk, rec->disk) == 0) {
                                absent = false; /* asked before, and present */
                                break;
                        }
                if (absent && host && host->present && host->present(host->ud, rec->disk))
                        absent = false;
                if (!absent)
                        continue;
        take:
                cand[n_cand++] = i;
        }
        if (n_cand < need) {
                free(cand);
                return failf(err, errsz, -ENOSPC,
                             "the state file holds %zu records, its limit is %d, and the import "
                             "adds %zu new ones; only %zu records of disks that are not on this "
                             "host could make room, so nothing is imported",
                             recs->n, CANARY_RECORDS_MAX, fresh, n_cand);
        }
        /* the least recently updated first (a stable order: the file's among equals) */
        for (size_t i = 1; i < n_cand; i++)
                for (size_t j = i;
                     j > 0 && recs->v[cand[j]].st.updated < recs->v[cand[j - 1]].st.updated; j--) {
                        size_t t = cand[j];
                        cand[j] = cand[j - 1];
                        cand[j - 1] = t;
                }
        gone = xcalloc(need, sizeof(*gone));
        for (size_t k = 0; k < need; k++)
                gone[k] = recs->v[cand[k]];
        /* remove them, the highest index first, so the others keep theirs */
        for (size_t k = 0; k < need; k++) {
                size_t top = 0;
                for (size_t j = 1; j < need; j++)
                        if (cand[j] != SIZE_MAX && (cand[top] == SIZE_MAX || cand[j] > cand[top]))
                                top = j;
                memmove(&recs->v[cand[top]], &recs->v[cand[top] + 1],
                        (recs->n - cand[top] - 1) * sizeof(recs->v[0]));
                recs->n--;
                cand[top] = SIZE_MAX;
        }
        free(cand);
        *ret_gone = gone;
        *ret_n = need;
        return 0;
}

int canary_import_records(int dirfd, const char *text, size_t len, const char *path,
                          const struct canary_import_host *host, FILE *out, char *err, size_t errsz)
{
        struct canary_records in = {0}, recs = {0};
        struct canary_record *gone = NULL;
        char want[CANARY_PATH_MAX] = "", why[512], aside[NAME_MAX + 1] = "", when[48];
        _cleanup_close_ int lock = -1;
        _cleanup_free_ char *done = NULL;
        size_t donelen = 0, n_gone = 0;
        FILE *lines = NULL;
        int r;

        if (path) {
                r = cli_path(path, "--canary.import-path", want, err, errsz);
                if (r < 0)
                        return r;
        }
        r = canary_records_parse(text, len, &in);
        if (r < 0)
                return failf(err, errsz, r, "the records to import are not a records file: %s",
                             parse_error(r, why, sizeof why));
        if (in.bad > 0 || in.n == 0) {
                unsigned bad = in.bad, first = in.first_bad;
                canary_records_free(&in);
                if (bad == 0)
                        return failf(err, errsz, -EBADMSG,
                                     "no record to import: the file has the header line and "
                                     "nothing else");
                return failf(err, errsz, -EBADMSG,
                             "the records to import have %u bad line%s (the first: line %u); "
                             "nothing imported",
                             bad, bad == 1 ? "" : "s", first);
        }
        r = check_import(&in, path ? want : NULL, host, err, errsz);
        if (r == 0)
                r = lock_for_edit(dirfd, &lock, err, errsz);
        if (r == 0 && !(lines = open_memstream(&done, &donelen)))
                r = failf(err, errsz, -ENOMEM, "out of memory");
        if (r == 0) {
                remove_stale(dirfd, lines);
                r = read_records(dirfd, &recs, true, err, errsz);
                if (r == -ENOENT)
                        r = 0;
        }
        if (r == 0)
                r = make_room(&recs, &in, host, &gone, &n_gone, err, errsz);
        for (size_t i = 0; r == 0 && i < in.n; i++) {
                struct canary_record *rec = &in.v[i];
                bool had = canary_records_find(&recs, rec->disk, rec->mode, rec->path, rec->regime);

                r = canary_records_put_evict(&recs, rec, NULL);
                if (r > 0) /* make_room() left room: never */
                        r = failf(err, errsz, -ENOSPC, "no room for an imported record");
                else if (r < 0)
                        r = failf(err, errsz, r, "an imported record is not valid");
                else
                        fprintf(lines, "imported: disk=%s mode=%s path=%s regime=%s%s\n", rec->disk,
                                rec->mode, rec->path, canary_regime_to_string(rec->regime),
                                had ? " (replaces the record this host had)" : "");
        }
        if (lines)
                fclose(lines);
        /* said only once it is done */
        if (r == 0)
                r = replace_file(dirfd, &recs, "import", aside, err, errsz);
        if (r == 0) {
                fputs(done, out);
                if (aside[0])
                        fprintf(out, "kept: the previous file as %s\n", aside);
                for (size_t k = 0; k < n_gone; k++)
                        fprintf(out,
                                "dropped: disk=%s mode=%s path=%s regime=%s (the state file's "
                                "limit is %d records: the least recently updated of a disk not "
                                "on this host, last updated %s; %s still has it)\n",
                                gone[k].disk, gone[k].mode, gone[k].path,
                                canary_regime_to_string(gone[k].regime), CANARY_RECORDS_MAX,
                                iso_time(gone[k].st.updated, when, sizeof when), aside);
        }
        r = r < 0 ? r : (int)in.n;
        free(gone);
        canary_records_free(&recs);
        canary_records_free(&in);
        return r;
}
