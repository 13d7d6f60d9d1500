/* fuse_baseline: the C yardstick for ipufs's control path. A libfuse3
 * low-level server with one regular file, "ipu0", whose only job is to
 * answer every 0xED ioctl at once (zeroed output, result 0). By default one
 * thread serves (fuse_session_loop, like ipufs's classic loop); with --mt,
 * libfuse's multi-threaded loop (fuse_session_loop_mt) with clone_fd=1: each
 * worker reads its own clone of the connection, and libfuse starts workers
 * as requests find none idle, up to its default of 10. Idle workers are
 * never stopped (max_idle_threads unlimited, libfuse 3.12's default; the
 * older API this file uses would otherwise keep only 10 idle).
 * benchmarks/run.py measures the same clients against both forms and
 * against ipufs in the same run.
 *
 * Build: cc -O2 $(pkg-config --cflags fuse3) -o fuse_baseline fuse_baseline.c $(pkg-config --libs fuse3)
 * Run:   fuse_baseline [--mt] MOUNTPOINT   (as root; unmounts on SIGINT/SIGTERM) */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_INO 2
#define FILE_SIZE (1 << 20)
static const char *name = "ipu0";

static void attr_of(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    } else {
        st->st_mode = S_IFREG | 0660;
        st->st_nlink = 1;
        st->st_size = FILE_SIZE;
    }
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *n)
{
    if (parent != FUSE_ROOT_ID || strcmp(n, name) != 0) { fuse_reply_err(req, ENOENT); return; }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = FILE_INO;
    e.attr_timeout = 1.0;
    e.entry_timeout = 1.0;
    attr_of(FILE_INO, &e.attr);
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != FUSE_ROOT_ID && ino != FILE_INO) { fuse_reply_err(req, ENOENT); return; }
    struct stat st;
    attr_of(ino, &st);
    fuse_reply_attr(req, &st, 1.0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino != FILE_INO) { fuse_reply_err(req, EISDIR); return; }
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, int cmd, void *arg, struct fuse_file_info *fi,
                     unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
    (void)ino; (void)arg; (void)fi; (void)flags; (void)in_buf; (void)in_bufsz;
    if ((((unsigned)cmd >> 8) & 0xff) != 0xED) { fuse_reply_err(req, ENOTTY); return; }
    static char zeros[4096];
    fuse_reply_ioctl(req, 0, zeros, out_bufsz < sizeof zeros ? out_bufsz : sizeof zeros);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .getattr = op_getattr,
    .open = op_open,
    .ioctl = op_ioctl,
};

int main(int argc, char **argv)
{
    int mt = argc == 3 && strcmp(argv[1], "--mt") == 0;
    if (argc != 2 + mt) { fprintf(stderr, "usage: %s [--mt] MOUNTPOINT\n", argv[0]); return 2; }
    const char *mountpoint = argv[1 + mt];
    char *fargv[] = { argv[0], "-o", "allow_other", NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se) return 1;
    if (fuse_set_signal_handlers(se) != 0) return 1;
    if (fuse_session_mount(se, mountpoint) != 0) return 1;
    printf("ready\n");
    fflush(stdout);
    int rc;
    if (mt) {
        struct fuse_loop_config config = { .clone_fd = 1, .max_idle_threads = UINT_MAX };
        rc = fuse_session_loop_mt(se, &config);
    } else {
        rc = fuse_session_loop(se);
    }
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}
