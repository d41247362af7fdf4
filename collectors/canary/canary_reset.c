/* The operator's reset of one target's reference: see canary_reset.h. */
#include "canary_reset.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>

#include "canary.h"
#include "canary_records.h"
#include "statefile.h"

int canary_state_dir_lock(int dirfd)
{
        return flock(dirfd, LOCK_SH | LOCK_NB) < 0 ? -errno : 0;
}

static int failf(char *err, size_t errsz, int r, const char *fmt, ...) _printf_(4, 5);
static int failf(char *err, size_t errsz, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
        return r;
}

int canary_reset_reference(int dirfd, const char *path, FILE *out, char *err, size_t errsz)
{
        _cleanup_free_ char *buf = NULL, *text = NULL;
        struct canary_records recs;
        size_t len, tlen;
        int r, n = 0;

        if (flock(dirfd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return failf(err, errsz, -EBUSY,
                                     "a running diskpulse uses this state directory and would "
                                     "write its records back over the reset: stop it, reset, "
                                     "start it again");
                return failf(err, errsz, -errno, "cannot lock the state directory: %s",
                             strerror(errno));
        }
        r = statefile_read(dirfd, CANARY_STATE_FILE, CANARY_STATE_MAX_BYTES, &buf, &len);
        if (r < 0)
                return failf(err, errsz, r, "cannot read the state file %s: %s", CANARY_STATE_FILE,
                             strerror(-r));
        r = canary_records_parse(buf, len, &recs);
        if (r < 0)
                return failf(err, errsz, r, "the state file %s is not usable: %s",
                             CANARY_STATE_FILE, strerror(-r));
        for (size_t i = 0; i < recs.n; i++) {
                struct canary_record *rec = &recs.v[i];
                char was[32] = "none";

                if (strcmp(rec->path, path) != 0)
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
                canary_records_free(&recs);
                return failf(err, errsz, 0, "no record of the path %s in the state file", path);
        }
        r = canary_records_format(&recs, &text, &tlen);
        canary_records_free(&recs);
        if (r < 0)
                return failf(err, errsz, r, "cannot format the state file: %s", strerror(-r));
        r = statefile_write_atomic(dirfd, CANARY_STATE_FILE, text, tlen);
        if (r < 0)
                return failf(err, errsz, r, "cannot write the state file %s: %s", CANARY_STATE_FILE,
                             strerror(-r));
        return n;
}
