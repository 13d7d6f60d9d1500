# cffi build script for ipufs._native: the few system calls Python lacks.
#
# mount(2)/umount2(2) for the FUSE mount, pidfd_send_signal(2) with a
# siginfo carrying a value (the real driver's si_int),
# process_vm_readv/writev(2) for device DMA into attached buffers,
# unshare(2) and what a child of `ipufs run` does before exec, and
# signalfd(2), through which a Python client can read si_int; and the
# register watcher's detector, which polls shared memory without the GIL,
# and the FUSE reader's spin, which scans the same watches while it waits.
# Further sources are compiled beside it: the fast path (src/fastpath.c),
# which answers hot requests natively, FUSE over io_uring (src/uring.c),
# the tile executor's hot loop (src/executor.c) and a thread's slice in the
# fair scheduler (src/thread_slice.c), each declared once in its header.
from __future__ import annotations

import pathlib
import re

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = (HERE / "src" / "ipufs_native.c").read_text()
#: other sources of the module and their headers
SOURCES = {"fastpath.c": "fastpath.h", "uring.c": "uring.h", "executor.c": "executor.h",
           "executor_pool.c": "executor_pool.h", "thread_slice.c": "thread_slice.h"}
#: headers whose text is plain declarations (no preprocessor lines), given to cdef whole
HEADERS = [(HERE / "src" / "executor.h").read_text()]


def declarations(header: str) -> str:
    """What cdef needs of a header in src/: its declarations as they are,
    its constants as ``...`` (cffi asks the compiler), the rest of its
    preprocessor lines dropped."""
    kept = []
    for line in (HERE / "src" / header).read_text().splitlines():
        words = line.split()
        if line.startswith("#define ") and len(words) > 2:
            kept.append(f"#define {words[1]} ...")
        elif not line.startswith("#"):
            kept.append(line)
    return "\n".join(kept) + "\n"


ffibuilder = FFI()
ffibuilder.cdef(
    """
    int ipufs_mount(const char *source, const char *target, const char *fstype,
                    unsigned long flags, const char *data);
    int ipufs_umount(const char *target, int flags);
    int ipufs_pidfd_send_value(int pidfd, int sig, int value);
    long ipufs_vm_read(int pid, unsigned long remote, void *local, size_t len);
    long ipufs_vm_write(int pid, unsigned long remote, const void *local, size_t len);
    int ipufs_signalfd(int first, int last);
    int ipufs_unshare(int flags);
    int ipufs_child_setup(int deathsig, int keep_sys_admin);
    int ipufs_become_subreaper(void);
    """
    # The watch table's layout, declared once, in the C source.
    + re.search(r"^struct ipufs_watch \{.*?^\};$", SOURCE, re.M | re.S).group(0)  # type: ignore[union-attr]
    + """
    int ipufs_watch(struct ipufs_watch *watches, int n, unsigned char *ready,
                    long period_ns, long timeout_ns, uint32_t *awake);
    void ipufs_asleep(uint32_t *awake);
    struct ipufs_fast;
    #define IPUFS_SPIN_WATCHED ...
    #define IPUFS_FAST_ANSWERED ...
    long ipufs_spin_read(int fd, void *buffer, size_t length, long spin_ns,
                         struct ipufs_watch *watches, int n, unsigned char *ready,
                         uint32_t *awake, struct ipufs_fast *fast);
    long ipufs_sleep_read(int fd, void *buffer, size_t length, struct ipufs_fast *fast);
    """
    # The fast path's interface, declared once, in its header.
    + "\n".join(re.findall(r"^(?:long|void|int|uint64_t|int64_t|struct ipufs_fast \*)\s*ipufs_fast_\w+\(.*?\);$",
                           (HERE / "src" / "fastpath.h").read_text(), re.M | re.S))
    + re.search(r"^enum ipufs_fast_kind \{.*?^\};$", (HERE / "src" / "fastpath.h").read_text(),
                re.M | re.S).group(0)  # type: ignore[union-attr]
    + "".join(HEADERS)
    + declarations("uring.h")
    + declarations("thread_slice.h")
    + """
    long ipufs_uring_watch_receive(struct ipufs_uring *u, void *buffer, size_t length, long spin_ns,
                                   uint64_t *tag, struct ipufs_watch *watches, int n, unsigned char *ready,
                                   uint32_t *awake);
    """
)
ffibuilder.set_source(
    "ipufs._native",
    SOURCE + '\n#include "executor.h"\n#include "uring.h"\n',
    sources=[f"native/src/{source}" for source in SOURCES],  # setup.py wants them relative to itself
    include_dirs=["native/src"],
    extra_compile_args=["-O2", "-Wall", "-Wextra"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
