/* Libraries that only an optional feature needs, loaded with dlopen() when that feature is
 * configured rather than linked, so that a daemon without the feature neither maps them nor runs
 * their constructors (systemd's way). One table per library names its symbols; the function
 * pointers are declared with the header's own prototype (__typeof__), so that the compiler still
 * checks every call against the library's header. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define DYNLIB_MAX_SYMS 64 /* symbols of one table at most */

struct dynlib_sym {
        const char *name;
        void *fn; /* the address of the function pointer to set */
};

/* One entry of a symbol table: the pointer named sym_NAME gets the symbol NAME. */
#define DYNLIB_SYM(f)                                                                              \
        {                                                                                          \
#f, &sym_##f                                                                       \
        }

struct dynlib {
        const char *soname;  /* what dlopen() is given: "libcrypt.so.1" */
        const char *package; /* the Debian package that ships it, for the message */
        const char *feature; /* what needs it, for the message: "basic_auth_users" */
        const struct dynlib_sym *syms;
        size_t n_syms;
        pthread_mutex_t lock;
        void *handle; /* NULL until loaded */
};

#define DYNLIB_INIT(so, pkg, feat, table)                                                          \
        {                                                                                          \
                .soname = (so), .package = (pkg), .feature = (feat), .syms = (table),              \
                .n_syms = sizeof(table) / sizeof((table)[0]), .lock = PTHREAD_MUTEX_INITIALIZER,   \
                .handle = NULL                                                                     \
        }

/* Loads the library and sets every pointer of its table, once; later calls return 0 at once.
 * Returns 0, or -ENOENT when the library cannot be opened and -ENOSYS when it lacks a symbol
 * (then no pointer is set and the library is closed, so that a later call tries again), with a
 * message in err that names the feature, the library, its Debian package and dlerror()'s
 * reason; -E2BIG for a table longer than DYNLIB_MAX_SYMS. Any thread. */
int dynlib_load(struct dynlib *l, char *err, size_t errsz);

/* Whether the library is loaded (its pointers set). Any thread. */
bool dynlib_loaded(struct dynlib *l);
