/* Replays a fuzz target's corpus without libFuzzer, so every corpus is a regression test. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a whole regular file into a malloc'd buffer of exactly its size (so that ASan catches a
 * target that reads one byte too far). Returns 0 or -errno. */
static int read_all(int dirfd, const char *name, uint8_t **ret, size_t *ret_len)
{
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        cap = cap ? cap * 2 : 4096;
                        uint8_t *nb = realloc(buf, cap);
                        if (!nb) {
                                free(buf);
                                close(fd);
                                return -ENOMEM;
                        }
                        buf = nb;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        int r = -errno;
                        if (errno == EINTR)
                                continue;
                        free(buf);
                        close(fd);
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        /* An exact-size copy: malloc(0) may return NULL, so allocate at least one byte but
         * hand the target only len. */
        uint8_t *exact = malloc(len ? len : 1);
        if (!exact) {
                free(buf);
                return -ENOMEM;
        }
        if (len)
                memcpy(exact, buf, len);
        free(buf);
        *ret = exact;
        *ret_len = len;
        return 0;
}

int main(int argc, char **argv)
{
        char **names = NULL;
        size_t n = 0, cap = 0, ran = 0;
        struct dirent *e;
        DIR *d;
        int dfd;

        if (argc != 2) {
                fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
                return 2;
        }
        d = opendir(argv[1]);
        if (!d) {
                fprintf(stderr, "%s: cannot open corpus directory %s: %s\n", argv[0], argv[1],
                        strerror(errno));
                return 1;
        }
        dfd = dirfd(d);
        while ((e = readdir(d))) {
                struct stat st;

                if (e->d_name[0] == '.')
                        continue;
                if (fstatat(dfd, e->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        names = realloc(names, cap * sizeof(*names));
                        if (!names)
                                abort();
                }
                names[n] = strdup(e->d_name);
                if (!names[n])
                        abort();
                n++;
        }
        /* A fixed order keeps a failure reproducible. */
        qsort(names, n, sizeof(*names), name_cmp);
        for (size_t i = 0; i < n; i++) {
                uint8_t *buf = NULL;
                size_t len = 0;
                int r = read_all(dfd, names[i], &buf, &len);

                if (r < 0) {
                        fprintf(stderr, "%s: cannot read %s/%s: %s\n", argv[0], argv[1], names[i],
                                strerror(-r));
                        for (size_t k = i; k < n; k++)
                                free(names[k]);
                        free(names);
                        closedir(d);
                        return 1;
                }
                (void)LLVMFuzzerTestOneInput(buf, len);
                free(buf);
                free(names[i]);
                ran++;
        }
        free(names);
        closedir(d);
        printf("%s: ran %zu inputs from %s\n", argv[0], ran, argv[1]);
        if (ran == 0) {
                fprintf(stderr, "%s: corpus directory %s is empty\n", argv[0], argv[1]);
                return 1;
        }
        return 0;
}
