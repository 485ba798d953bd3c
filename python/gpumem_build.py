# SPDX-License-Identifier: MIT
"""gpumem_build: the build backend of the Python package gpumem (PEP 517 and PEP 660), with
the standard library alone, so that `pip install .`, `pip wheel .` and `pip install -e .`
work offline from any Python >= 3.9 (pyenv, conda, python.org builds, Debian's): pyproject.toml
names it with `requires = []`, so pip installs nothing to build.

build_wheel drives CMake: the target gpumem_python (cmake/python.cmake, the extension
gpumem._core over the static library, the one `make install` installs) and the command-line
tool gpumem, built against the interpreter running pip, in build/pip-<wheel tag>/ of the
source tree (kept, so a second build only relinks).  The wheel holds the package
(gpumem/__init__.py, gpumem/torch.py, the extension), the gpumem command (installed into the
environment's bin/) and the dist-info (METADATA, WHEEL, RECORD with every file's sha256,
LICENSE).  build_sdist writes the source tarball `make dist` writes: every file of the
checkout that git does not ignore (outside a git checkout, every file but build outputs) under
gpumem-VERSION/, with PKG-INFO.
build_editable installs a finder that imports gpumem/*.py from python/gpumem of this tree
and the extension from the build folder.  Needs cmake, a C compiler, the jansson and zlib
development files and the interpreter's headers (scripts/install-deps.sh; conda: the
compilers and cmake packages).
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "gpumem"
SUMMARY = ("GPU memory of deep-learning jobs: will it fit, what happened (PyTorch snapshots read "
           "safely), what the GPU says")
REQUIRES_PYTHON = ">=3.9"


def version():
    with open(os.path.join(ROOT, "include", "gpumem", "version.h"), encoding="utf-8") as f:
        return re.search(r'#define GM_VERSION_STRING\s+"([^"]+)"', f.read()).group(1)


def metadata():
    """The core metadata (METADATA of the wheel, PKG-INFO of the sdist)."""
    return ("Metadata-Version: 2.1\n"
            "Name: %s\n"
            "Version: %s\n"
            "Summary: %s\n"
            "License: MIT\n"
            "Requires-Python: %s\n"
            "Provides-Extra: numpy\n"
            "Requires-Dist: numpy; extra == \"numpy\"\n"
            "Classifier: License :: OSI Approved :: MIT License\n"
            "Classifier: Programming Language :: C\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Programming Language :: Python :: Implementation :: CPython\n"
            "Classifier: Operating System :: POSIX :: Linux\n"
            % (NAME, version(), SUMMARY, REQUIRES_PYTHON))


def wheel_tag():
    """cpXY-cpXY<abiflags>-<platform>: the extension is built for this interpreter only."""
    if sys.implementation.name != "cpython":
        raise RuntimeError("gpumem's extension is written for CPython, not %s" % sys.implementation.name)
    py = "cp%d%d" % sys.version_info[:2]
    platform = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    return "%s-%s%s-%s" % (py, py, getattr(sys, "abiflags", ""), platform)


def dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def log(msg):
    print("gpumem_build: " + msg, file=sys.stderr, flush=True)


def cmake_build():
    """Build the extension and the command with CMake; the build folder."""
    build = os.path.join(ROOT, "build", "pip-" + wheel_tag())
    for tool in ("cmake",):
        if shutil.which(tool) is None:
            raise RuntimeError("%s is needed to build gpumem (Debian: scripts/install-deps.sh)" % tool)
    configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 "-DGM_BUILD_TESTS=OFF", "-DGM_PYTHON=ON", "-DPython3_EXECUTABLE=" + sys.executable]
    jobs = str(os.cpu_count() or 2)
    log("building in " + build)
    # the output goes to stderr: pip shows it with -v, and whenever the build fails
    targets = ["gpumem_python", "gpumem"]
    if os.path.isdir(os.path.join(ROOT, "preload")):
        targets.append("gpumem_account_preload")  # gpumem account's interposer
    for cmd in (configure, ["cmake", "--build", build, "--target"] + targets + ["-j", jobs]):
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    return build


def extension(build):
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    path = os.path.join(build, "python", NAME, "_core" + suffix)
    if not os.path.isfile(path):
        raise RuntimeError("the build made no %s" % path)
    return path


class Wheel:
    """A wheel being written: files added with their RECORD line, RECORD written last."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def add_file(self, arcname, path):
        with open(path, "rb") as f:
            data = f.read()
        self.add(arcname, data, 0o755 if os.access(path, os.X_OK) else 0o644)

    def close(self, tag):
        di = dist_info()
        self.add(di + "/METADATA", metadata().encode())
        self.add(di + "/WHEEL", wheel_file(tag).encode())
        self.add_file(di + "/LICENSE", os.path.join(ROOT, "LICENSE"))
        record = di + "/RECORD"
        self.zip.writestr(zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0)),
                          "\n".join(self.records + [record + ",,"]) + "\n")
        self.zip.close()


def wheel_file(tag):
    return ("Wheel-Version: 1.0\nGenerator: gpumem_build %s\nRoot-Is-Purelib: false\nTag: %s\n"
            % (version(), tag))


def wheel_name(tag):
    return "%s-%s-%s.whl" % (NAME, version(), tag)


def write_metadata(metadata_directory):
    di = os.path.join(metadata_directory, dist_info())
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata())
    with open(os.path.join(di, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(wheel_file(wheel_tag()))
    return dist_info()


# ---- PEP 517 ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return write_metadata(metadata_directory)


def start_wheel(wheel_directory):
    """The CMake build made, and the wheel for this interpreter begun: (build folder, path,
    Wheel)."""
    build = cmake_build()
    path = os.path.join(wheel_directory, wheel_name(wheel_tag()))
    return build, path, Wheel(path)


def add_command(w, build):
    """The gpumem command into the environment's bin/, and gpumem account's interposer into
    its lib/gpumem/, where the command looks for it (../lib/gpumem from its own folder)."""
    w.add_file("%s-%s.data/scripts/gpumem" % (NAME, version()), os.path.join(build, "gpumem"))
    preload = os.path.join(build, "libgpumem-account.so")
    if os.path.isfile(preload):
        w.add_file("%s-%s.data/data/lib/gpumem/libgpumem-account.so" % (NAME, version()),
                   preload)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build, path, w = start_wheel(wheel_directory)
    pkg = os.path.join(ROOT, "python", NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            w.add_file("%s/%s" % (NAME, name), os.path.join(pkg, name))
    ext = extension(build)
    w.add_file("%s/%s" % (NAME, os.path.basename(ext)), ext)
    add_command(w, build)
    w.close(wheel_tag())
    log("wrote " + path)
    return os.path.basename(path)


# nothing to install before building, whatever is built
get_requires_for_build_sdist = get_requires_for_build_wheel


def source_files():
    """The files of the source distribution, relative to ROOT."""
    if os.path.exists(os.path.join(ROOT, ".git")) and shutil.which("git"):
        cmd = ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
        names = (os.fsdecode(f) for f in out.split(b"\0") if f)
        return sorted(f for f in names if os.path.isfile(os.path.join(ROOT, f)))
    files = []
    for top, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(top, ROOT)
        dirs[:] = sorted(d for d in dirs if not (
            d in (".git", "node_modules", "__pycache__") or d.endswith(".egg-info")
            or (rel == "." and d.startswith(("build", "dist")))))
        files += [os.path.normpath(os.path.join(rel, n)) for n in names if n != "PKG-INFO"]
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, version())
    path = os.path.join(sdist_directory, base + ".tar.gz")
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))

    def info(name, size, mode):
        ti = tarfile.TarInfo(base + "/" + name)
        ti.size, ti.mode, ti.mtime = size, mode, mtime
        ti.uname = ti.gname = "root"
        return ti

    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in source_files():
            full = os.path.join(ROOT, rel)
            with open(full, "rb") as f:
                data = f.read()
            tar.addfile(info(rel, len(data), 0o755 if os.access(full, os.X_OK) else 0o644),
                        io.BytesIO(data))
        pkg_info = metadata().encode()
        tar.addfile(info("PKG-INFO", len(pkg_info), 0o644), io.BytesIO(pkg_info))
    log("wrote " + path)
    return os.path.basename(path)


# ---- PEP 660 ----

EDITABLE_FINDER = '''\
"""gpumem installed in editable mode from %(root)s: the modules of python/gpumem there, the
extension from %(build)s (rebuild it with `pip install -e .` again)."""
import importlib.util
import sys

SOURCE = %(source)r
BUILD = %(ext_dir)r


class GpumemFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "gpumem":
            return None
        return importlib.util.spec_from_file_location(
            name, SOURCE + "/__init__.py", submodule_search_locations=[SOURCE, BUILD])


if not any(f is GpumemFinder or getattr(f, "__name__", "") == "GpumemFinder" for f in sys.meta_path):
    sys.meta_path.append(GpumemFinder)
'''


get_requires_for_build_editable = get_requires_for_build_wheel
prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build, path, w = start_wheel(wheel_directory)
    finder = EDITABLE_FINDER % {"root": ROOT, "build": build,
                                "source": os.path.join(ROOT, "python", NAME),
                                "ext_dir": os.path.dirname(extension(build))}
    w.add("__editable___gpumem_finder.py", finder.encode())
    w.add("__editable__.gpumem.pth", b"import __editable___gpumem_finder\n")
    add_command(w, build)
    w.close(wheel_tag())
    log("wrote " + path)
    return os.path.basename(path)


if __name__ == "__main__":
    # python3 python/gpumem_build.py sdist|wheel DIR: what `make dist` and the tests run
    hooks = {"sdist": build_sdist, "wheel": build_wheel}
    if len(sys.argv) != 3 or sys.argv[1] not in hooks:
        print("usage: gpumem_build.py sdist|wheel DIR", file=sys.stderr)
        sys.exit(64)
    print(os.path.join(sys.argv[2], hooks[sys.argv[1]](sys.argv[2])))
