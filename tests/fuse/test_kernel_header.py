# ipufs's struct layouts against the C compiler's view of <linux/fuse.h>,
# so that a wrong field in ipufs/fuse/abi.py cannot hide behind tests that
# only compare ipufs with itself.
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ipufs.fuse import abi

STRUCTS = {
    "fuse_in_header": "IN_HEADER", "fuse_out_header": "OUT_HEADER", "fuse_attr": "ATTR",
    "fuse_kstatfs": "KSTATFS", "fuse_setattr_in": "SETATTR_IN", "fuse_init_in": "INIT_IN",
    "fuse_init_out": "INIT_OUT", "fuse_open_in": "OPEN_IN", "fuse_open_out": "OPEN_OUT",
    "fuse_read_in": "READ_IN", "fuse_write_in": "WRITE_IN", "fuse_write_out": "WRITE_OUT",
    "fuse_release_in": "RELEASE_IN", "fuse_flush_in": "FLUSH_IN", "fuse_fsync_in": "FSYNC_IN",
    "fuse_getxattr_in": "GETXATTR_IN", "fuse_lk_in": "LK_IN", "fuse_access_in": "ACCESS_IN",
    "fuse_ioctl_in": "IOCTL_IN", "fuse_ioctl_out": "IOCTL_OUT", "fuse_poll_in": "POLL_IN",
    "fuse_poll_out": "POLL_OUT", "fuse_lseek_in": "LSEEK_IN", "fuse_fallocate_in": "FALLOCATE_IN",
    "fuse_batch_forget_in": "BATCH_FORGET_IN", "fuse_forget_one": "FORGET_ONE",
    "fuse_mknod_in": "MKNOD_IN", "fuse_create_in": "CREATE_IN", "fuse_rename2_in": "RENAME2_IN",
    "fuse_notify_inval_inode_out": "NOTIFY_INVAL_INODE", "fuse_notify_store_out": "NOTIFY_STORE",
    "fuse_dirent": "DIRENT_HEAD", "fuse_copy_file_range_in": "COPY_FILE_RANGE_IN",
}


@pytest.mark.skipif(not Path("/usr/include/linux/fuse.h").exists() or not shutil.which("cc"),
                    reason="needs <linux/fuse.h> and a C compiler")
def test_struct_sizes_agree_with_linux_fuse_h(tmp_path: Path) -> None:
    src = tmp_path / "sizes.c"
    src.write_text(
        "#include <stdio.h>\n#include <linux/fuse.h>\nint main(void) {\n"
        + "".join(f'  printf("{s} %zu\\n", sizeof(struct {s}));\n' for s in STRUCTS)
        + '  printf("FUSE_ROOT_ID %d\\n", FUSE_ROOT_ID);\n  return 0;\n}\n'
    )
    subprocess.run(["cc", "-o", str(tmp_path / "sizes"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "sizes")], check=True, capture_output=True, text=True).stdout
    sizes = dict(line.split() for line in out.splitlines())
    assert int(sizes.pop("FUSE_ROOT_ID")) == abi.ROOT_ID
    assert {s: int(n) for s, n in sizes.items()} == {s: getattr(abi, a).size for s, a in STRUCTS.items()}
