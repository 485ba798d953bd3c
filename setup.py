# SPDX-License-Identifier: MIT
"""Build the Python package gpumem (python/) with CMake: the extension gpumem._core is the
CMake target gpumem_python (cmake/python.cmake), built against the interpreter running this
script, so that pip, `make install` and the test suite all build it the same way.  Needs
cmake, a C compiler, and the jansson and zlib development files (scripts/install-deps.sh).
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "include", "gpumem", "version.h"), encoding="utf-8") as f:
        return re.search(r'#define GM_VERSION_STRING\s+"([^"]+)"', f.read()).group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build, exist_ok=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(
            [
                "cmake", "-S", ROOT, "-B", build,
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGM_BUILD_TESTS=OFF",
                "-DGM_PYTHON=ON",
                "-DPython3_EXECUTABLE=" + sys.executable,
            ]
        )
        subprocess.check_call(["cmake", "--build", build, "--target", "gpumem_python", "-j", jobs])
        built = os.path.join(build, "python", "gpumem", os.path.basename(self.get_ext_filename(ext.name)))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(
    name="gpumem",
    version=version(),
    description="GPU memory of deep-learning jobs: PyTorch snapshots read safely, phase-by-phase measurement",
    license="MIT",
    python_requires=">=3.10",
    package_dir={"": "python"},
    packages=["gpumem"],
    ext_modules=[CMakeExtension("gpumem._core")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
