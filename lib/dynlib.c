/* dlopen() of the libraries of optional features: dynlib.h. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dynlib.h"

static void set_all(const struct dynlib *l, void *const *values)
{
        for (size_t i = 0; i < l->n_syms; i++)
                /* POSIX: a function pointer has the representation of the void * dlsym gives. */
                memcpy(l->syms[i].fn, &values[i], sizeof(void *));
}

static int load_locked(struct dynlib *l, char *err, size_t errsz)
{
        void *values[DYNLIB_MAX_SYMS];
        void *h;

        if (l->handle)
                return 0;
        if (l->n_syms > DYNLIB_MAX_SYMS) {
                snprintf(err, errsz, "%s: %zu symbols, more than %d", l->soname, l->n_syms,
                         DYNLIB_MAX_SYMS);
                return -E2BIG;
        }
        h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                snprintf(err, errsz, "%s needs %s (Debian package %s), which cannot be loaded: %s",
                         l->feature, l->soname, l->package, dlerror());
                return -ENOENT;
        }
        for (size_t i = 0; i < l->n_syms; i++) {
                (void)dlerror();
                values[i] = dlsym(h, l->syms[i].name);
                if (!values[i]) {
                        const char *why = dlerror();

                        snprintf(err, errsz,
                                 "%s needs %s (Debian package %s), which has no symbol %s: %s",
                                 l->feature, l->soname, l->package, l->syms[i].name,
                                 why ? why : "its value is NULL");
                        dlclose(h);
                        return -ENOSYS;
                }
        }
        set_all(l, values);
        __atomic_store_n(&l->handle, h, __ATOMIC_RELEASE);
        return 0;
}

int dynlib_load(struct dynlib *l, char *err, size_t errsz)
{
        int r;

        if (__atomic_load_n(&l->handle, __ATOMIC_ACQUIRE))
                return 0;
        pthread_mutex_lock(&l->lock);
        r = load_locked(l, err, errsz);
        pthread_mutex_unlock(&l->lock);
        return r;
}

bool dynlib_loaded(struct dynlib *l)
{
        return __atomic_load_n(&l->handle, __ATOMIC_ACQUIRE) != NULL;
}
