# The FUSE kernel ABI (linux/fuse.h, protocol 7.x) as Python tables:
# opcodes, flags and one struct.Struct per kernel struct. Little-endian,
# padding spelled out, so that every size below equals the kernel's sizeof.
from __future__ import annotations

import enum
import struct

KERNEL_VERSION = 7
#: The protocol minor ipufs implements: 7.40 added passthrough (backing_id in
#: fuse_open_out, max_stack_depth in fuse_init_out).
KERNEL_MINOR_VERSION = 40
#: The oldest minor ipufs accepts: 7.36 brought FUSE_INIT_EXT and flags2.
MIN_KERNEL_MINOR_VERSION = 36
ROOT_ID = 1
MIN_READ_BUFFER = 8192


class Opcode(enum.IntEnum):
    LOOKUP = 1
    FORGET = 2
    GETATTR = 3
    SETATTR = 4
    READLINK = 5
    SYMLINK = 6
    MKNOD = 8
    MKDIR = 9
    UNLINK = 10
    RMDIR = 11
    RENAME = 12
    LINK = 13
    OPEN = 14
    READ = 15
    WRITE = 16
    STATFS = 17
    RELEASE = 18
    FSYNC = 20
    SETXATTR = 21
    GETXATTR = 22
    LISTXATTR = 23
    REMOVEXATTR = 24
    FLUSH = 25
    INIT = 26
    OPENDIR = 27
    READDIR = 28
    RELEASEDIR = 29
    FSYNCDIR = 30
    GETLK = 31
    SETLK = 32
    SETLKW = 33
    ACCESS = 34
    CREATE = 35
    INTERRUPT = 36
    BMAP = 37
    DESTROY = 38
    IOCTL = 39
    POLL = 40
    NOTIFY_REPLY = 41
    BATCH_FORGET = 42
    FALLOCATE = 43
    READDIRPLUS = 44
    RENAME2 = 45
    LSEEK = 46
    COPY_FILE_RANGE = 47
    SETUPMAPPING = 48
    REMOVEMAPPING = 49
    SYNCFS = 50
    TMPFILE = 51
    STATX = 52


class NotifyCode(enum.IntEnum):
    POLL = 1
    INVAL_INODE = 2
    INVAL_ENTRY = 3
    STORE = 4
    RETRIEVE = 5
    DELETE = 6
    RESEND = 7


class InitFlag(enum.IntFlag):
    """fuse_init_in/out flags; bits 32..63 travel in flags2."""

    ASYNC_READ = 1 << 0
    POSIX_LOCKS = 1 << 1
    ATOMIC_O_TRUNC = 1 << 3
    EXPORT_SUPPORT = 1 << 4
    BIG_WRITES = 1 << 5
    DONT_MASK = 1 << 6
    SPLICE_WRITE = 1 << 7
    SPLICE_MOVE = 1 << 8
    SPLICE_READ = 1 << 9
    FLOCK_LOCKS = 1 << 10
    HAS_IOCTL_DIR = 1 << 11
    AUTO_INVAL_DATA = 1 << 12
    DO_READDIRPLUS = 1 << 13
    READDIRPLUS_AUTO = 1 << 14
    ASYNC_DIO = 1 << 15
    WRITEBACK_CACHE = 1 << 16
    NO_OPEN_SUPPORT = 1 << 17
    PARALLEL_DIROPS = 1 << 18
    HANDLE_KILLPRIV = 1 << 19
    POSIX_ACL = 1 << 20
    ABORT_ERROR = 1 << 21
    MAX_PAGES = 1 << 22
    CACHE_SYMLINKS = 1 << 23
    NO_OPENDIR_SUPPORT = 1 << 24
    EXPLICIT_INVAL_DATA = 1 << 25
    MAP_ALIGNMENT = 1 << 26
    SUBMOUNTS = 1 << 27
    HANDLE_KILLPRIV_V2 = 1 << 28
    SETXATTR_EXT = 1 << 29
    INIT_EXT = 1 << 30
    INIT_RESERVED = 1 << 31
    SECURITY_CTX = 1 << 32
    HAS_INODE_DAX = 1 << 33
    CREATE_SUPP_GROUP = 1 << 34
    HAS_EXPIRE_ONLY = 1 << 35
    DIRECT_IO_ALLOW_MMAP = 1 << 36
    PASSTHROUGH = 1 << 37
    NO_EXPORT_SUPPORT = 1 << 38
    HAS_RESEND = 1 << 39
    ALLOW_IDMAP = 1 << 40
    OVER_IO_URING = 1 << 41


class OpenFlag(enum.IntFlag):
    """FOPEN_* flags of fuse_open_out."""

    DIRECT_IO = 1 << 0
    KEEP_CACHE = 1 << 1
    NONSEEKABLE = 1 << 2
    CACHE_DIR = 1 << 3
    STREAM = 1 << 4
    NOFLUSH = 1 << 5
    PARALLEL_DIRECT_WRITES = 1 << 6
    PASSTHROUGH = 1 << 7


class SetattrValid(enum.IntFlag):
    """FATTR_* bits of fuse_setattr_in.valid."""

    MODE = 1 << 0
    UID = 1 << 1
    GID = 1 << 2
    SIZE = 1 << 3
    ATIME = 1 << 4
    MTIME = 1 << 5
    FH = 1 << 6
    ATIME_NOW = 1 << 7
    MTIME_NOW = 1 << 8
    LOCKOWNER = 1 << 9
    CTIME = 1 << 10
    KILL_SUIDGID = 1 << 11


class IoctlFlag(enum.IntFlag):
    COMPAT = 1 << 0
    UNRESTRICTED = 1 << 1
    RETRY = 1 << 2
    BIT32 = 1 << 3
    DIR = 1 << 4
    COMPAT_X32 = 1 << 5


POLL_SCHEDULE_NOTIFY = 1 << 0
#: write_flags of a WRITE: the kernel is writing back cached pages (a
#: mapping's dirty pages), not serving a write(2).
WRITE_CACHE = 1 << 0
GETATTR_FH = 1 << 0
UNIQUE_RESEND = 1 << 63

# --- structs -------------------------------------------------------------
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid total_extlen pad
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes
ENTRY_OUT_HEAD = struct.Struct("<QQQQII")  # nodeid generation entry_valid attr_valid nsec nsec
ATTR_OUT_HEAD = struct.Struct("<QII")  # attr_valid attr_valid_nsec dummy
KSTATFS = struct.Struct("<QQQQQIIII24x")  # fuse_kstatfs, 80 bytes
FORGET_IN = struct.Struct("<Q")
FORGET_ONE = struct.Struct("<QQ")
BATCH_FORGET_IN = struct.Struct("<II")
GETATTR_IN = struct.Struct("<IIQ")
SETATTR_IN = struct.Struct("<IIQQQQQQIIIIIIII")  # 88 bytes
MKNOD_IN = struct.Struct("<IIII")
MKDIR_IN = struct.Struct("<II")
RENAME_IN = struct.Struct("<Q")
RENAME2_IN = struct.Struct("<QII")
LINK_IN = struct.Struct("<Q")
OPEN_IN = struct.Struct("<II")
CREATE_IN = struct.Struct("<IIII")
OPEN_OUT = struct.Struct("<QIi")  # fh open_flags backing_id
RELEASE_IN = struct.Struct("<QIIQ")
FLUSH_IN = struct.Struct("<QIIQ")
READ_IN = struct.Struct("<QQIIQII")
WRITE_IN = struct.Struct("<QQIIQII")
WRITE_OUT = struct.Struct("<II")
FSYNC_IN = struct.Struct("<QII")
SETXATTR_IN_COMPAT = struct.Struct("<II")
SETXATTR_IN_EXT = struct.Struct("<IIII")
GETXATTR_IN = struct.Struct("<II")
GETXATTR_OUT = struct.Struct("<II")
FILE_LOCK = struct.Struct("<QQII")
LK_IN = struct.Struct("<QQQQIIII")  # fh owner lock(start end type pid) lk_flags pad
LK_OUT = FILE_LOCK
ACCESS_IN = struct.Struct("<II")
INIT_IN = struct.Struct("<IIIII44x")  # major minor max_readahead flags flags2 unused[11]
INIT_IN_COMPAT = struct.Struct("<IIII")  # before FUSE_INIT_EXT (7.36)
INIT_OUT = struct.Struct("<IIIIHHIIHHII24x")  # 64 bytes
INTERRUPT_IN = struct.Struct("<Q")
BMAP_IN = struct.Struct("<QII")
BMAP_OUT = struct.Struct("<Q")
IOCTL_IN = struct.Struct("<QIIQII")
IOCTL_OUT = struct.Struct("<iIII")
POLL_IN = struct.Struct("<QQII")
POLL_OUT = struct.Struct("<II")
FALLOCATE_IN = struct.Struct("<QQQII")
LSEEK_IN = struct.Struct("<QQII")
LSEEK_OUT = struct.Struct("<Q")
COPY_FILE_RANGE_IN = struct.Struct("<QQQQQQQ")
STATX_IN = struct.Struct("<IIQII")
DIRENT_HEAD = struct.Struct("<QQII")  # ino off namelen type
NOTIFY_POLL_WAKEUP = struct.Struct("<Q")
NOTIFY_INVAL_INODE = struct.Struct("<Qqq")
NOTIFY_INVAL_ENTRY = struct.Struct("<QII")
NOTIFY_STORE = struct.Struct("<QQII")
NOTIFY_RETRIEVE = struct.Struct("<QQQII")  # notify_unique nodeid offset size padding
NOTIFY_RETRIEVE_IN = struct.Struct("<QQIIQQ")  # dummy offset size dummy dummy dummy; the data follows
BACKING_MAP = struct.Struct("<iIQ")

# --- /dev/fuse ioctls ----------------------------------------------------
_IOC_WRITE = 1
_IOC_READ = 2


def _ioc(direction: int, type_: int, nr: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (type_ << 8) | nr


DEV_IOC_MAGIC = 229
DEV_IOC_CLONE = _ioc(_IOC_READ, DEV_IOC_MAGIC, 0, 4)
DEV_IOC_BACKING_OPEN = _ioc(_IOC_WRITE, DEV_IOC_MAGIC, 1, BACKING_MAP.size)
DEV_IOC_BACKING_CLOSE = _ioc(_IOC_WRITE, DEV_IOC_MAGIC, 2, 4)


def dirent_size(namelen: int, plus: bool = False) -> int:
    """Size of one fuse_dirent (or fuse_direntplus) record, 8-byte aligned."""
    head = DIRENT_HEAD.size + (ENTRY_OUT_HEAD.size + ATTR.size if plus else 0)
    return (head + namelen + 7) & ~7
