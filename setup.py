# The native layer is a cffi extension; its build script lives in native/.
from setuptools import setup

setup(cffi_modules=["native/build_native.py:ffibuilder"])
