/* What the parts of the compatibility library (libipufs-compat.so) share:
 * ipufs_compat.c, the functions it stands in for; compat_nodes.c, which
 * files are ipufs nodes; compat_view.c, the sysfs view. Nothing here is
 * exported from the library (-fvisibility=hidden). */
#ifndef IPUFS_COMPAT_H
#define IPUFS_COMPAT_H

#include <sys/types.h>

/* What the daemon promises (ipufs/driver/nodes.py): a regular file of an
 * ipufs mount whose inode number is below 2**32 (where the sysfs view's
 * start) is the node 2 + 4 N + kind, N below MAX_IPUS (compat_nodes.c). */
#define FIRST_NODE_INO 2ull
#define CHAR_MAJOR 240
/* statx's unique mount id (Linux 6.8+), which glibc 2.36 does not name. */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

/* The cheap checks: a regular file with a node's inode number on an
 * anonymous device. Only such a file's mount is asked about. */
int may_be_node(dev_t dev, mode_t mode, ino_t ino);

/* Whether the file a stat call of (dirfd, path, flags) described as (dev,
 * mode, ino) is an ipufs node; errno is left as it was. */
int is_node_at(int dirfd, const char *path, int flags, dev_t dev, mode_t mode, ino_t ino);

/* The same for a file a statx answer describes whose mask holds
 * STATX_MNT_ID_UNIQUE: that answer names its mount, so nothing is asked
 * again. */
struct statx;
int is_node_statx(const struct statx *stx);

/* ``path`` itself, or its place in the sysfs view when it lies under
 * /sys/bus/pci/devices (written into ``buf``, PATH_MAX bytes). */
const char *in_view(const char *path, char *buf);

/* A path realpath found in the view, as it is shown under
 * /sys/bus/pci/devices (written into ``buf``), or ``real`` itself. */
const char *as_shown(const char *real, char *buf);

#endif
