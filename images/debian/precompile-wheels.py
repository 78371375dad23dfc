"""Makes `python3 -m venv` fast: bytecode ships with pip's wheels.

Run by build.sh in the image's chroot with the image's own python3 (so the
bytecode matches its interpreter): python3 - </this/file.

Why: `python3 -m venv` runs ensurepip, which runs pip straight from the pip
and setuptools wheels (zip files) to install them into the venv. Python
never caches bytecode for a zip, so every venv compiled a few hundred of
pip's modules from source, then pip compiled all of both packages again
into the venv: 40-55 s under TCG, most of the 60 s an exec gets by default.
Now each module of the two wheels has its bytecode twice: `name.pyc` beside
`name.py`, which zipimport loads (unchecked: the zip never changes), and
`__pycache__/name.cpython-311.pyc`, the installed copy's (checked against
its source, so an edited module is compiled again). Both are added to the
wheel's RECORD, so pip installs and uninstalls them like any other file.
ensurepip passes `--no-compile`: the bytecode is installed, not made again.
"""


import base64
import csv
import hashlib
import importlib._bootstrap_external as bootstrap
import importlib.util
import io
import os
import py_compile
import sys
import zipfile

WHEEL_DIR = "/usr/share/python-wheels"


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def precompile(path):
    with zipfile.ZipFile(path) as wheel:
        infos = wheel.infolist()
        contents = {i.filename: wheel.read(i) for i in infos}
    names = set(contents)
    if any(n.endswith(".pyc") for n in names):
        return 0  # already done
    records = [n for n in names if n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise SystemExit(f"{path}: expected one RECORD, found {len(records)}")
    added = []
    for info in infos:
        if not info.filename.endswith(".py"):
            continue
        source = contents[info.filename]
        try:
            code = compile(source, info.filename, "exec", dont_inherit=True)
        except SyntaxError:
            continue  # pip's own test data; it would fail at import anyway
        source_hash = importlib.util.source_hash(source)
        # Beside the module, for zipimport (the zip never changes: unchecked);
        # in __pycache__, for the installed copy (checked against its source,
        # so an edited module is compiled again).
        for name, checked in ((info.filename + "c", False),
                              (importlib.util.cache_from_source(info.filename), True)):
            member = zipfile.ZipInfo(name, info.date_time)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = info.external_attr
            added.append((member, bytes(bootstrap._code_to_hash_pyc(code, source_hash, checked=checked))))
    rows = list(csv.reader(io.StringIO(contents[records[0]].decode())))
    rows += [[m.filename, record_hash(d), str(len(d))] for m, d in added]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    contents[records[0]] = out.getvalue().encode()
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as wheel:
        for info in infos:
            wheel.writestr(info, contents[info.filename])
        for member, data in added:
            wheel.writestr(member, data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return len(added)


def install_without_compiling():
    """ensurepip installs the wheels with their bytecode and compiles nothing."""
    path = os.path.join(os.path.dirname(os.__file__), "ensurepip", "__init__.py")
    with open(path) as f:
        text = f.read()
    plain = 'args = ["install", "--no-cache-dir", "--no-index", "--find-links", tmpdir]'
    patched = 'args = ["install", "--no-compile", "--no-cache-dir", "--no-index", "--find-links", tmpdir]'
    if patched in text:
        return
    if text.count(plain) != 1:
        raise SystemExit(f"{path}: ensurepip's pip arguments are not where expected")
    with open(path, "w") as f:
        f.write(text.replace(plain, patched))
    # Its own cached bytecode is stale now: made again (venv's user cannot write it).
    for level in ("", 1, 2):
        stale = importlib.util.cache_from_source(path, optimization=level)
        if os.path.exists(stale):
            os.remove(stale)
    py_compile.compile(path, doraise=True)


def main():
    wheels = sorted(f for f in os.listdir(WHEEL_DIR) if f.startswith(("pip-", "setuptools-")) and f.endswith(".whl"))
    if len(wheels) != 2:
        raise SystemExit(f"expected the pip and setuptools wheels in {WHEEL_DIR}, found {wheels}")
    for name in wheels:
        print(f"{name}: {precompile(os.path.join(WHEEL_DIR, name))} bytecode files added", file=sys.stderr)
    install_without_compiling()


if __name__ == "__main__":
    main()
