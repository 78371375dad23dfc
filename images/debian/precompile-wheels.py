"""Adds compiled bytecode to the pip and setuptools wheels that venv installs.

Run by build.sh in the image's chroot with the image's own python3 (so the
bytecode matches its interpreter): python3 - </this/file.

Why: `python3 -m venv` runs ensurepip, which runs pip straight from these
wheels (zip files). Python never caches bytecode for a zip, so every venv
compiled a few hundred of pip's modules from source before installing
anything; under TCG that was about half of a 45-55 s venv (27 s with this).
zipimport loads `name.pyc` stored beside `name.py` in the zip. The .pyc
files are unchecked-hash based (no mtime to match), made from the bytes in
the zip. They are added to the wheel's RECORD, so pip installs and later
uninstalls them like any other file of the wheel; Python ignores a .pyc
beside its .py once installed, so they change nothing else.
"""

import base64
import csv
import hashlib
import importlib._bootstrap_external as bootstrap
import importlib.util
import io
import os
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
        pyc = bootstrap._code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False)
        member = zipfile.ZipInfo(info.filename + "c", info.date_time)
        member.compress_type = zipfile.ZIP_DEFLATED
        member.external_attr = info.external_attr
        added.append((member, bytes(pyc)))
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


def main():
    wheels = sorted(f for f in os.listdir(WHEEL_DIR) if f.startswith(("pip-", "setuptools-")) and f.endswith(".whl"))
    if len(wheels) != 2:
        raise SystemExit(f"expected the pip and setuptools wheels in {WHEEL_DIR}, found {wheels}")
    for name in wheels:
        print(f"{name}: {precompile(os.path.join(WHEEL_DIR, name))} modules compiled", file=sys.stderr)


main()
