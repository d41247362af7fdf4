/* The canary's persistence: each target's baselines as records of the state file, keyed by disk
 * identity; loading at creation, saves from the prober threads, what a stop or a removal writes. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "canary_internal.h"
#include "statefile.h"

/* Builds this target's records under t->lock: the idle regime's always (it records the disk),
 * the busy regime's once it learnt something (bursts may be off). Returns how many (0 to
 * _CANARY_REGIME_MAX) or -errno. */
static int target_records(struct ctarget *t, struct canary_record rec[_CANARY_REGIME_MAX])
{
        int n = 0;

        if (!t->has_key)
                return -ENOENT;
        for (int g = 0; g < _CANARY_REGIME_MAX; g++) {
                const struct canary_baseline_state *st = &t->stats[g].baseline.st;
                int r;

                if (g != CANARY_REGIME_IDLE && st->updates == 0)
                        continue;
                r = canary_record_init(&rec[n], t->key, canary_mode_to_string(t->mode), t->path);
                if (r < 0)
                        return r;
                rec[n].regime = (enum canary_regime)g;
                rec[n++].st = *st;
        }
        return n;
}

/* ISO 8601 UTC of a CLOCK_REALTIME time in microseconds, for messages. */
static const char *iso_time(usec_t t, char *buf, size_t size)
{
        time_t s = (time_t)(t / USEC_PER_SEC);
        struct tm tm;

        if (!gmtime_r(&s, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "@%llu", (unsigned long long)(t / USEC_PER_SEC));
        return buf;
}

/* A record that made room for a new one in records at CANARY_RECORDS_MAX: the file as it is
 * (it holds the record) kept aside once per batch (*kept), the record logged at warning. Under
 * c->state_lock. */
static void evicted(struct canary *c, const struct canary_record *gone, bool *kept)
{
        char aside[NAME_MAX + 1] = "-", when[48], ref[32], lim[16];

        if (!*kept && c->state_dir_fd >= 0 && c->state_frozen == 0 &&
            statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE, "evict", STATEFILE_ASIDE_KEEP,
                                aside, sizeof aside) < 0)
                snprintf(aside, sizeof aside, "-");
        *kept = true;
        snprintf(ref, sizeof ref, "%g", gone->st.reference);
        snprintf(lim, sizeof lim, "%d", CANARY_RECORDS_MAX);
        log_warn("canary baselines file at its limit of records: the least recently updated one "
                 "made room for a new target (the file before is kept aside)",
                 "limit", lim, "disk", gone->disk, "mode", gone->mode, "path", gone->path, "regime",
                 canary_regime_to_string(gone->regime), "updated",
                 gone->st.updated ? iso_time(gone->st.updated, when, sizeof when) : "never",
                 "reference", ref, "set_aside", aside);
}

/* Puts n records into c's records, saying which one made room for a new one. Under
 * c->state_lock. Returns 0 or -errno. */
static int put_records(struct canary *c, const struct canary_record *rec, int n)
{
        bool kept = false;

        for (int i = 0; i < n; i++) {
                struct canary_record gone;
                int r = canary_records_put_evict(&c->records, &rec[i], &gone);

                if (r < 0)
                        return r;
                if (r > 0)
                        evicted(c, &gone, &kept);
        }
        return 0;
}

/* Writes the records. Under c->state_lock. Returns 0 or -errno. */
int canary_write_records(struct canary *c)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        if (c->state_dir_fd < 0)
                return 0;
        r = c->state_frozen;
        if (r == 0)
                r = canary_records_format(&c->records, &buf, &len);
        if (r == 0)
                r = statefile_write_atomic(c->state_dir_fd, CANARY_STATE_FILE, buf, len);
        if (r < 0)
                atomic_fetch_add(&c->state_write_errors, 1);
        return r;
}

/* Saves this target's baseline when it changed, at most once per CANARY_SAVE_INTERVAL; never
 * waits for another thread's save (tries again later). Prober thread. */
void canary_maybe_save(struct ctarget *t, usec_t now)
{
        struct canary *c = t->c;
        struct canary_record rec[_CANARY_REGIME_MAX];
        bool stale = atomic_load(&c->file_stale);
        int r, n;

        pthread_mutex_lock(&t->lock);
        if (c->state_dir_fd < 0 || (t->saved && now - t->last_save < CANARY_SAVE_INTERVAL) ||
            !((t->save_pending && t->has_key) || stale)) {
                pthread_mutex_unlock(&t->lock);
                return;
        }
        n = t->save_pending && t->has_key ? target_records(t, rec) : 0;
        if (n > 0)
                t->save_pending = false;
        pthread_mutex_unlock(&t->lock);
        if (n < 0)
                return;
        if (pthread_mutex_trylock(&c->state_lock) != 0) {
                if (n > 0) {
                        pthread_mutex_lock(&t->lock);
                        t->save_pending = true;
                        pthread_mutex_unlock(&t->lock);
                }
                return;
        }
        r = put_records(c, rec, n);
        if (r >= 0)
                r = canary_write_records(c);
        /* A failed write leaves the file behind the records: the next save (the next hourly
         * observation) includes them, and the shutdown tries once more; not for a file this
         * process must leave alone (state_frozen: never written until a restart). */
        c->records_dirty = r < 0 && c->state_frozen == 0;
        if (r >= 0)
                atomic_store(&c->file_stale, false);
        pthread_mutex_unlock(&c->state_lock);
        t->last_save = now;
        t->saved = true;
        if (r < 0)
                canary_target_log_error(t, "cannot save the canary baselines", -r, now);
}

/* Finds the disk identity of the backing device and restores its baseline (a different disk
 * starts afresh). Prober thread, t->lock not held. */
void canary_update_key(struct ctarget *t, const struct canary_backing *b)
{
        struct canary *c = t->c;
        char key[CANARY_DISK_ID_MAX] = "";
        bool has = false;
        struct canary_record *rec[_CANARY_REGIME_MAX];

        if (b && c->disk_id) {
                has =
                    c->disk_id(c->disk_id_ud, canary_backing_key_device(b), key, sizeof key) == 0 &&
                    key[0];
        }
        pthread_mutex_lock(&t->lock);
        if (!has) {
                /* Unknown disk: keep learning in memory, persist nothing. */
                t->has_key = false;
                pthread_mutex_unlock(&t->lock);
                t->key_loaded = true;
                return;
        }
        if (t->has_key && strcmp(t->key, key) == 0 && t->key_loaded) {
                pthread_mutex_unlock(&t->lock);
                return;
        }
        pthread_mutex_unlock(&t->lock);

        if (pthread_mutex_trylock(&c->state_lock) != 0) {
                t->key_loaded = false; /* a save is running: try at the next cycle */
                return;
        }
        for (int g = 0; g < _CANARY_REGIME_MAX; g++)
                rec[g] = canary_records_find(&c->records, key, canary_mode_to_string(t->mode),
                                             t->path, (enum canary_regime)g);
        pthread_mutex_lock(&t->lock);
        for (int g = 0; g < _CANARY_REGIME_MAX; g++) {
                struct canary_baseline *bl = &t->stats[g].baseline;

                if (!t->has_key || strcmp(t->key, key) != 0) {
                        /* Another disk (or the first one we know): its own baselines, or fresh
                         * ones. */
                        canary_baseline_init(bl);
                        t->save_pending = false;
                }
                if (rec[g] && canary_baseline_restore(bl, &rec[g]->st) < 0)
                        canary_baseline_init(bl);
                canary_baseline_set_period(bl, c->baseline_period); /* init resets it */
        }
        /* A disk the file does not know yet is recorded by the next save of this thread, not
         * left to the shutdown (which writes only what no save has written). */
        if (!rec[CANARY_REGIME_IDLE])
                t->save_pending = true;
        strscpy(t->key, key, sizeof t->key);
        t->has_key = true;
        pthread_mutex_unlock(&t->lock);
        pthread_mutex_unlock(&c->state_lock);
        t->key_loaded = true;
}

/* Puts a target's record into the records (for the next write) when it holds something no
 * write has included yet (save_pending). Returns whether it did. Under c->state_lock. */
bool canary_target_put_record(struct canary *c, struct ctarget *t)
{
        struct canary_record rec[_CANARY_REGIME_MAX];
        int n;

        pthread_mutex_lock(&t->lock);
        n = t->save_pending ? target_records(t, rec) : -ENODATA;
        t->save_pending = false;
        pthread_mutex_unlock(&t->lock);
        return n > 0 && put_records(c, rec, n) == 0;
}

/* Read errors that say the file itself is bad (no header, another version, too big, not a
 * regular file, a symlink), as opposed to a failing disk or a lack of memory or permission. */
static bool state_corrupt(int r)
{
        return r == -EBADMSG || r == -EPROTONOSUPPORT || r == -EFBIG || r == -EINVAL ||
               r == -ELOOP || r == -ENXIO;
}

/* Times from a clock gone wrong (canary_baseline_state_clock()): the file kept aside as it was,
 * the future or unordered days dropped from use (the next save writes the records without them),
 * each record logged. Returns whether anything changed. Under no lock (start). */
static bool clock_check(struct canary *c)
{
        usec_t now = c->ops.realtime(c->ops.ud);
        char aside[NAME_MAX + 1] = "", latest[48], nowb[48], fb[16], ub[16];
        bool any = false;

        for (size_t i = 0; i < c->records.n; i++) {
                struct canary_record *rec = &c->records.v[i];
                struct canary_baseline_state st = rec->st;
                struct canary_clock_fix fix;

                if (!canary_baseline_state_clock(&st, now, CANARY_CLOCK_TOLERANCE, &fix))
                        continue;
                if (!any && statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE, "clock",
                                                STATEFILE_ASIDE_KEEP, aside, sizeof aside) < 0) {
                        /* no copy, no change: the days stay in the file and out of the trend's
                         * way only as far as canary_trend_fit() keeps them */
                        log_warn("canary baselines hold times from a wrong clock and cannot be "
                                 "kept aside; the file is used as it is",
                                 "file", CANARY_STATE_FILE);
                        return false;
                }
                any = true;
                rec->st = st;
                snprintf(fb, sizeof fb, "%u", fix.future_days);
                snprintf(ub, sizeof ub, "%u", fix.unordered_days);
                log_warn("canary baselines: times ahead of the clock or out of order are not used "
                         "(a clock that was wrong when they were written, or is wrong now); the "
                         "reference is kept, the whole file is kept aside",
                         "disk", rec->disk, "path", rec->path, "regime",
                         canary_regime_to_string(rec->regime), "future_days", fb, "unordered_days",
                         ub, "latest",
                         fix.latest ? iso_time(fix.latest, latest, sizeof latest) : "-", "now",
                         iso_time(now, nowb, sizeof nowb), "set_aside", aside);
        }
        if (any)
                atomic_store(&c->file_stale, true);
        return any;
}

/* Loads the records. Nothing is ever lost: a file that is bad as a whole is renamed aside
 * (learning starts afresh); one with bad lines keeps its good records in use and a copy of all
 * of it aside; one that cannot be read (EACCES, EIO) or set aside is left alone and not
 * written by this process (state_frozen), rather than replaced by fewer records. */
void canary_load_records(struct canary *c)
{
        _cleanup_free_ char *buf = NULL;
        char aside[NAME_MAX + 1], eb[16], nb[16];
        size_t len;
        int r, s;

        if (c->state_dir_fd < 0)
                return;
        (void)statefile_remove_stale(c->state_dir_fd, CANARY_STATE_FILE);
        r = statefile_read(c->state_dir_fd, CANARY_STATE_FILE, CANARY_STATE_MAX_BYTES, &buf, &len);
        if (r == -ENOENT)
                return;
        if (r >= 0)
                r = canary_records_parse(buf, len, &c->records);
        if (r >= 0 && c->records.bad == 0) {
                (void)statefile_restrict_mode(c->state_dir_fd, CANARY_STATE_FILE);
                (void)clock_check(c);
                if (c->records.version < CANARY_STATE_VERSION &&
                    statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE, "oldversion",
                                        STATEFILE_ASIDE_KEEP, aside, sizeof aside) == 0) {
                        /* a downgrade reads the copy; the file is the new version from now on,
                         * written at once so that the next start does not migrate it again */
                        log_info("canary baselines of an older version migrated: each baseline is "
                                 "its disk's reference; the old file is kept aside",
                                 "file", CANARY_STATE_FILE, "set_aside", aside);
                        pthread_mutex_lock(&c->state_lock);
                        (void)canary_write_records(c);
                        pthread_mutex_unlock(&c->state_lock);
                }
                return;
        }
        if (r < 0 && !state_corrupt(r)) {
                c->state_frozen = r;
                log_error("cannot read the canary baselines; the file is left as it is and not "
                          "written until a restart",
                          "file", CANARY_STATE_FILE, "errno", canary_errno_name(-r, eb, sizeof eb));
                return;
        }
        s = statefile_set_aside(c->state_dir_fd, CANARY_STATE_FILE,
                                r == -EPROTONOSUPPORT ? "unsupported" : "corrupt",
                                r < 0 ? 0 : STATEFILE_ASIDE_KEEP, aside, sizeof aside);
        if (s < 0) {
                c->state_frozen = s;
                log_error("cannot set the bad canary baselines file aside; it is left as it is "
                          "and not written until a restart",
                          "file", CANARY_STATE_FILE, "errno", canary_errno_name(-s, eb, sizeof eb));
                return;
        }
        if (r < 0) {
                log_warn("canary baselines file unusable, set aside; learning starts afresh",
                         "file", CANARY_STATE_FILE, "set_aside", aside, "errno",
                         canary_errno_name(-r, eb, sizeof eb));
                return;
        }
        snprintf(nb, sizeof nb, "%u", c->records.bad);
        log_warn("bad lines in the canary baselines skipped; the other disks' records are used, "
                 "the whole file is kept aside",
                 "file", CANARY_STATE_FILE, "bad_lines", nb, "set_aside", aside);
        (void)statefile_restrict_mode(c->state_dir_fd, CANARY_STATE_FILE);
        (void)clock_check(c);
        atomic_store(&c->file_stale, true);
}
