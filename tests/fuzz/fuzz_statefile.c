/* Fuzz target of the canary baseline state file parser: what it accepts is valid, formats and
 * parses back to the same records and text, and restores into a baseline that keeps working;
 * its bad lines are counted with the first one's number. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "canary_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_record(const struct canary_record *r)
{
        if (!r->disk[0] || !r->mode[0] || !r->path[0])
                abort();
        if (strnlen(r->disk, sizeof r->disk) >= sizeof r->disk ||
            strnlen(r->mode, sizeof r->mode) >= sizeof r->mode ||
            strnlen(r->path, sizeof r->path) >= sizeof r->path)
                abort();
        if (canary_baseline_state_check(&r->st) != 0 || !canary_regime_to_string(r->regime))
                abort();
        if (signbit(r->st.value))
                abort();
}

static bool same_record(const struct canary_record *a, const struct canary_record *b)
{
        if (strcmp(a->disk, b->disk) || strcmp(a->mode, b->mode) || strcmp(a->path, b->path) ||
            a->regime != b->regime)
                return false;
        if (memcmp(&a->st.value, &b->st.value, sizeof(double)) != 0 ||
            a->st.updates != b->st.updates || a->st.updated != b->st.updated)
                return false;
        if (memcmp(&a->st.reference, &b->st.reference, sizeof(double)) != 0 ||
            a->st.ref_final != b->st.ref_final || a->st.n_refdays != b->st.n_refdays ||
            a->st.n_dayobs != b->st.n_dayobs || a->st.n_days != b->st.n_days)
                return false;
        if (memcmp(a->st.refdays, b->st.refdays, a->st.n_refdays * sizeof(double)) != 0 ||
            memcmp(a->st.dayobs, b->st.dayobs, a->st.n_dayobs * sizeof(double)) != 0)
                return false;
        for (unsigned i = 0; i < a->st.n_days; i++)
                if (a->st.days[i].t != b->st.days[i].t ||
                    memcmp(&a->st.days[i].v, &b->st.days[i].v, sizeof(double)) != 0)
                        return false;
        return true;
}

/* A clock check at a fixed "now" leaves a valid state whose days are in order and not ahead,
 * and a second check finds nothing. */
static void clock_check(const struct canary_baseline_state *in)
{
        const usec_t now = UINT64_C(1764900000) * 1000000;
        struct canary_baseline_state st = *in;
        struct canary_clock_fix fix;

        (void)canary_baseline_state_clock(&st, now, CANARY_CLOCK_TOLERANCE, &fix);
        if (canary_baseline_state_check(&st) != 0 || st.n_days > in->n_days ||
            st.n_days + fix.future_days + fix.unordered_days != in->n_days)
                abort();
        for (unsigned i = 0; i < st.n_days; i++)
                if (st.days[i].t > now + CANARY_CLOCK_TOLERANCE ||
                    (i > 0 && st.days[i].t <= st.days[i - 1].t))
                        abort();
        if (canary_baseline_state_clock(&st, now, CANARY_CLOCK_TOLERANCE, &fix))
                abort();
}

/* The restored baseline takes observations and stays valid and finite; a warm-up ends when its
 * day does (CANARY_BASELINE_WARMUP observations in all, those restored included). */
static void exercise(const struct canary_baseline_state *st)
{
        static struct canary_baseline b;
        double v;

        clock_check(st);
        if (canary_baseline_restore(&b, st) != 0)
                abort();
        for (int i = 0; i < 2 * CANARY_DAY_OBS; i++) { /* a day closes whatever was restored */
                if (st->value == 0 && canary_baseline_get(&b, &v) !=
                                          (i >= CANARY_BASELINE_WARMUP - (int)st->n_dayobs))
                        abort();
                double m = i % 2 ? st->value * 3 + 1e-6 : st->value / 3 + 1e-3;
                if (m > CANARY_MAX_SECONDS)
                        m = CANARY_MAX_SECONDS;
                if (canary_baseline_observe(&b, m, (usec_t)i) != 0)
                        abort();
                if (canary_baseline_state_check(&b.st) != 0)
                        abort();
                if (canary_baseline_get(&b, &v) && (!isfinite(v) || v <= 0))
                        abort();
                if (canary_reference_get(&b, &v) && (!isfinite(v) || v <= 0))
                        abort();
                unsigned days;
                if (canary_trend_get(&b, &v, &days) && (!isfinite(v) || v < 0 || days < 3))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct canary_records recs, again;
        struct canary_record one;
        char *text = NULL, *text2 = NULL;
        size_t len = 0, len2 = 0;
        int r;

        /* one line on its own */
        r = canary_record_parse_line((const char *)data, size, &one);
        if (r == 0)
                check_record(&one);
        else if (r != -EINVAL && r != -ERANGE)
                abort();

        r = canary_records_parse((const char *)data, size, &recs);
        if (r == -EFBIG || r == -EBADMSG || r == -EPROTONOSUPPORT)
                return 0;
        if (r != 0 || recs.n > CANARY_RECORDS_MAX)
                abort();
        /* the first bad line is named (a line number within the input) exactly when there is one */
        if ((recs.bad > 0) != (recs.first_bad > 0) || recs.first_bad > size + 1)
                abort();
        for (size_t i = 0; i < recs.n; i++) {
                check_record(&recs.v[i]);
                if (canary_records_find(&recs, recs.v[i].disk, recs.v[i].mode, recs.v[i].path,
                                        recs.v[i].regime) != &recs.v[i])
                        abort(); /* keys are unique */
                exercise(&recs.v[i].st);
        }

        /* format -> parse gives the same records, format again the same bytes */
        if (canary_records_format(&recs, &text, &len) != 0)
                abort();
        if (strlen(text) != len)
                abort();
        if (canary_records_parse(text, len, &again) != 0)
                abort();
        if (again.bad != 0 || again.n != recs.n)
                abort();
        for (size_t i = 0; i < recs.n; i++)
                if (!same_record(&recs.v[i], &again.v[i]))
                        abort();
        if (canary_records_format(&again, &text2, &len2) != 0)
                abort();
        if (len2 != len || memcmp(text, text2, len) != 0)
                abort();

        free(text);
        free(text2);
        canary_records_free(&again);
        canary_records_free(&recs);
        return 0;
}
