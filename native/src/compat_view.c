/* Where the compatibility library (ipufs_compat.c) looks up paths under
 * /sys/bus/pci/devices: the mount's sysfs view (docs/compat.md, the view
 * itself is docs/sysfs.md), and how a path found there is shown again. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

static const char SYSFS[] = "/sys/bus/pci/devices";
#define SYSFS_LEN (sizeof SYSFS - 1)

static char view[PATH_MAX]; /* empty: nothing to redirect */
static size_t view_len;

__attribute__((constructor)) static void find_view(void)
{
    const char *env = getenv("IPUFS_SYSFS");
    char link[PATH_MAX];
    if (env && *env) {
        snprintf(view, sizeof view, "%s", env);
    } else {
        /* The mount the daemon linked /dev/ipu0 to. */
        ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/dev/ipu0", link, sizeof link - 1);
        if (n <= 0 || link[0] != '/')
            return;
        link[n] = '\0';
        *strrchr(link, '/') = '\0';
        if (strlen(link) + SYSFS_LEN >= sizeof view)
            return;
        strcpy(view, link);
        strcat(view, SYSFS);
        struct stat st;
        if (syscall(SYS_newfstatat, AT_FDCWD, view, &st, 0) != 0 || !S_ISDIR(st.st_mode)) {
            view[0] = '\0';
            return;
        }
    }
    view_len = strlen(view);
    while (view_len > 1 && view[view_len - 1] == '/')
        view[--view_len] = '\0';
    if (strcmp(view, SYSFS) == 0) /* already bound there (ipufs run, containers) */
        view_len = 0;
    if (view_len == 0)
        view[0] = '\0';
}

/* Takes the next component of a path at *p: 1 for a name (*name, *n),
 * -1 for "..", 0 for "." or an empty one; *p moves past it. */
static int next_component(const char **p, const char **name, size_t *n)
{
    while (**p == '/')
        (*p)++;
    *name = *p;
    *p = strchrnul(*p, '/');
    *n = (size_t)(*p - *name);
    if (*n == 2 && (*name)[0] == '.' && (*name)[1] == '.')
        return -1;
    return !(*n == 0 || (*n == 1 && (*name)[0] == '.'));
}

/* Whether the ".." of ``rest`` (what follows /sys/bus/pci/devices) climb
 * above /sys/bus/pci/devices, taken lexically. */
static int climbs_out(const char *rest)
{
    long depth = 0;
    const char *name;
    size_t n;
    while (*rest)
        if ((depth += next_component(&rest, &name, &n)) < 0)
            return 1;
    return 0;
}

/* ``path`` with "//", "." and ".." taken lexically, into ``out``; 0 when
 * it does not fit. */
static size_t lexical(const char *path, char *out)
{
    size_t len = 0, n;
    const char *name;
    while (*path) {
        int kind = next_component(&path, &name, &n);
        if (kind < 0) {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--;
        } else if (kind > 0) {
            if (len + 1 + n >= PATH_MAX)
                return 0;
            out[len++] = '/';
            memcpy(out + len, name, n);
            len += n;
        }
    }
    if (len == 0)
        out[len++] = '/';
    out[len] = '\0';
    return len;
}

/* ``path`` itself, or its place in the view when it lies under
 * /sys/bus/pci/devices (written into ``buf``). A path whose ".." climb
 * out of /sys/bus/pci/devices is taken lexically, and redirected only if
 * it ends up under it again: /sys/bus/pci/devices/../../../class is the
 * host's /sys/class. Below that, the view's own entries resolve ".."
 * (where they are links, as sysfs's are). */
const char *in_view(const char *path, char *buf)
{
    if (!view_len || !path || path[0] != '/' || path[1] != 's' || strncmp(path, SYSFS, SYSFS_LEN) != 0)
        return path;
    const char *rest = path + SYSFS_LEN;
    if (*rest != '\0' && *rest != '/')
        return path;
    size_t rest_len;
    if (climbs_out(rest)) {
        size_t len = lexical(path, buf);
        if (len < SYSFS_LEN || memcmp(buf, SYSFS, SYSFS_LEN) != 0
            || (buf[SYSFS_LEN] != '\0' && buf[SYSFS_LEN] != '/'))
            return path; /* outside the view: the host's */
        rest_len = len - SYSFS_LEN;
        if (view_len + rest_len >= PATH_MAX)
            return path;
        memmove(buf + view_len, buf + SYSFS_LEN, rest_len + 1);
    } else {
        rest_len = strlen(rest);
        if (view_len + rest_len >= PATH_MAX)
            return path;
        memcpy(buf + view_len, rest, rest_len + 1);
    }
    memcpy(buf, view, view_len);
    return buf;
}

/* ``real``, a path realpath found, as the client should see it: a path in
 * the view under /sys/bus/pci/devices (written into ``buf``). */
const char *as_shown(const char *real, char *buf)
{
    if (!view_len || strncmp(real, view, view_len) != 0 || (real[view_len] != '\0' && real[view_len] != '/')
        || SYSFS_LEN + strlen(real + view_len) >= PATH_MAX)
        return real;
    memcpy(buf, SYSFS, SYSFS_LEN);
    strcpy(buf + SYSFS_LEN, real + view_len);
    return buf;
}
