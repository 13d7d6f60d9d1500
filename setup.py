# The native layer: a cffi extension (its build script lives in native/),
# and the compatibility library preloaded into clients of the real driver's
# calling conventions, a plain shared object installed beside the package
# as ipufs/libipufs-compat.so (ipufs.compat.library_path finds it).
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPAT = Extension(
    "ipufs.libipufs-compat",
    sources=["native/src/ipufs_compat.c", "native/src/compat_nodes.c", "native/src/compat_view.c",
             "native/src/compat_mmio.c", "native/src/compat_decode.c"],
    depends=["native/src/compat.h", "native/src/compat_decode.h"],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-fvisibility=hidden"],
)


class BuildExt(build_ext):
    """build_ext that names the compatibility library as a library, not as
    a Python module, and links it with nothing of Python's."""

    def get_ext_filename(self, fullname: str) -> str:
        # Asked with the full name and with its last component alone.
        if fullname == COMPAT.name:
            return "ipufs/libipufs-compat.so"
        if fullname == COMPAT.name.rpartition(".")[2]:
            return "libipufs-compat.so"
        return super().get_ext_filename(fullname)

    def get_libraries(self, ext: Extension) -> list[str]:
        return [] if ext is COMPAT else super().get_libraries(ext)

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return [] if ext is COMPAT else super().get_export_symbols(ext)


setup(
    cffi_modules=["native/build_native.py:ffibuilder"],
    ext_modules=[COMPAT],
    cmdclass={"build_ext": BuildExt},
)
