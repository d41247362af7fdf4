/* Every option: the daemon's table with each collector's fragment in place (options_entry()),
 * and what is done to a whole options struct over them: defaults, freeing, comparing, the
 * reload. Each value through lib's value engine (option.h). */
#include "options.h"

#include <string.h>

/* Every option (options_entry()): the daemon's table with each OPT_FRAGMENT replaced by the
 * entries of its collector, whose values are in that collector's options blob (owner: its
 * registry id; -1: the daemon's own, in struct dp_options). d is first: an opt_def of this
 * array tells its entry. */
struct entry {
        struct opt_def d;
        int owner;
};

/* Process-wide, built at the first use (entries_init(): the options are read on the main thread
 * before any other starts) and never changed after. Not const: a fragment's entries are copies of
 * its collector's with the collector's part added, and the switches' names and defaults come
 * from the registry, which a constant initializer cannot reach across files. Passing the table
 * would thread it through every caller of the options (cli, prestart, reload, the tests) for the
 * same immutable value. */
static struct entry *entries;
static size_t n_entries;
/* The collectors' switches: OPT_COLLECTORS's subs. */
static const char *switch_names[REGISTRY_MAX + 1];

static const struct collector_def *fragment_of(const struct opt_def *d, int *id)
{
        for (int c = 0; c < (int)registry_count(); c++)
                if (strcmp(collector_defs[c]->name, d->name) == 0) {
                        *id = c;
                        return collector_defs[c];
                }
        return NULL;
}

/* The options of collector id, or (cmd) its one-shot commands' flags. */
static void add_fragment(int id, int cmd)
{
        const struct collector_def *c = collector_defs[id];
        size_t n = cmd ? c->n_command_options : c->n_options;

        for (size_t k = 0; k < n; k++) {
                struct entry *e = &entries[n_entries++];
                *e = (struct entry){.d = cmd ? c->command_options[k] : c->options[k], .owner = id};
                if (e->d.reload == OPT_RELOAD)
                        e->d.parts |= OPT_PART_COLLECTOR(id);
        }
}

/* Built once, at the first use (main thread, before any other). A collector whose fragment has
 * no mark in the table gets its options before the collectors' switches (its commands' flags,
 * marked by an OPT_CLI_ONLY fragment, before those). */
static void entries_init(void)
{
        /* [1]: the commands' flags; 1: the table marks them, 2: placed */
        unsigned char mark[2][REGISTRY_MAX] = {{0}};
        size_t n = options_table_size;
        int id;

        if (entries)
                return;
        for (size_t c = 0; c < registry_count(); c++)
                n += collector_defs[c]->n_options + collector_defs[c]->n_command_options;
        entries = xcalloc(n, sizeof(*entries));
        for (size_t i = 0; i < options_table_size; i++)
                if (options_table[i].type == OPT_FRAGMENT && fragment_of(&options_table[i], &id))
                        mark[!!(options_table[i].flags & OPT_CLI_ONLY)][id] = 1;
        for (size_t i = 0; i < options_table_size; i++) {
                const struct opt_def *d = &options_table[i];
                int cmd = !!(d->flags & OPT_CLI_ONLY);

                if (d->type == OPT_COLLECTORS) {
                        struct entry *e;

                        for (int k = 1; k >= 0; k--)
                                for (int c = 0; c < (int)registry_count(); c++)
                                        if (!mark[k][c]) {
                                                add_fragment(c, k);
                                                mark[k][c] = 2;
                                        }
                        /* a switch per collector, its default the collector's */
                        e = &entries[n_entries++];
                        *e = (struct entry){.d = *d, .owner = -1};
                        e->d.subs = switch_names;
                        for (int c = 0; c < (int)registry_count(); c++) {
                                switch_names[c] = collector_defs[c]->name;
                                e->d.def |= (uint64_t)collector_defs[c]->default_enabled << c;
                        }
                } else if (d->type != OPT_FRAGMENT)
                        entries[n_entries++] = (struct entry){.d = *d, .owner = -1};
                else if (fragment_of(d, &id) && mark[cmd][id] == 1) {
                        add_fragment(id, cmd);
                        mark[cmd][id] = 2;
                }
        }
}

size_t options_count(void)
{
        entries_init();
        return n_entries;
}

const struct opt_def *options_entry(size_t i)
{
        entries_init();
        return &entries[i].d;
}

void *options_base(const struct dp_options *o, const struct opt_def *d)
{
        const struct entry *e = (const struct entry *)d;

        return e->owner < 0 ? (void *)o : o->collector_opts[e->owner];
}

bool options_equal(const struct opt_def *d, const struct dp_options *a, const struct dp_options *b)
{
        return opt_equal(d, options_base(a, d), options_base(b, d));
}

bool options_same(const struct dp_options *a, const struct dp_options *b, unsigned flags)
{
        entries_init();
        for (size_t i = 0; i < n_entries; i++)
                if ((entries[i].d.flags & flags) == flags && !options_equal(&entries[i].d, a, b))
                        return false;
        return true;
}

size_t options_reload(struct dp_options *cur, const struct dp_options *next, unsigned *ret_parts)
{
        unsigned parts = 0;
        size_t restart = 0;

        entries_init();

        for (size_t i = 0; i < n_entries; i++) {
                const struct opt_def *d = &entries[i].d;

                if (options_equal(d, cur, next))
                        continue;
                if (d->reload == OPT_RELOAD) {
                        opt_copy(d, options_base(cur, d), options_base(next, d));
                        parts |= d->parts;
                } else if (d->reload == OPT_RESTART) {
                        restart++;
                }
        }
        if (ret_parts)
                *ret_parts = parts;
        return restart;
}

void options_defaults(struct dp_options *o)
{
        entries_init();
        memset(o, 0, sizeof(*o));
        for (size_t c = 0; c < registry_count(); c++)
                if (collector_defs[c]->options_size)
                        o->collector_opts[c] = xcalloc(1, collector_defs[c]->options_size);
        /* canary.path has none: the state directory, in the canary's complete() */
        for (size_t i = 0; i < n_entries; i++)
                opt_set_default(&entries[i].d, options_base(o, &entries[i].d));
}

void options_free(struct dp_options *o)
{
        entries_init();
        for (size_t i = 0; i < n_entries; i++)
                if (options_base(o, &entries[i].d))
                        opt_clear(&entries[i].d, options_base(o, &entries[i].d));
        for (size_t c = 0; c < registry_count(); c++)
                free(o->collector_opts[c]);
        memset(o, 0, sizeof(*o));
}
