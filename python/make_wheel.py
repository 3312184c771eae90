"""Packs the built kiln package (build/python/kiln: the Python files and the extension) into a
wheel, with the standard library only (no setuptools, no network):

    python3 make_wheel.py --package build/python/kiln --version 0.2.0 --out build/python/dist

The wheel is for the Python that built the extension (its tag says which); `pip install` of it
into a virtual environment made from that Python gives `import kiln` there. It registers
backend="kiln" for torch.compile through the torch_dynamo_backends entry point.
"""

import argparse
import base64
import hashlib
import os
import sys
import sysconfig
import zipfile


def tag():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", required=True, help="the built kiln package directory")
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, help="directory for the .whl")
    args = parser.parse_args()

    files = sorted(f for f in os.listdir(args.package)
                   if f.endswith(".py") or (f.startswith("_kiln") and f.endswith(".so")))
    if not any(f.endswith(".so") for f in files):
        sys.exit(f"make_wheel.py: no extension _kiln*.so in {args.package}; build kiln_python")
    dist = f"kiln-{args.version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: kiln\nVersion: {args.version}\n"
                "Summary: Kiln, an ML compiler: compile ONNX, .kir and torch models and run "
                "them from Python\nRequires-Python: =="
                f"{sys.version_info.major}.{sys.version_info.minor}.*\nRequires-Dist: numpy\n")
    wheel = (f"Wheel-Version: 1.0\nGenerator: kiln make_wheel.py\nRoot-Is-Purelib: false\n"
             f"Tag: {tag()}\n")
    entry_points = "[torch_dynamo_backends]\nkiln = kiln.dynamo:kiln_backend\n"

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"kiln-{args.version}-{tag()}.whl")
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(name, data):
            whl.writestr(name, data)
            records.append(record_line(name, data))

        for f in files:
            with open(os.path.join(args.package, f), "rb") as src:
                add(f"kiln/{f}", src.read())
        add(f"{dist}/METADATA", metadata.encode())
        add(f"{dist}/WHEEL", wheel.encode())
        add(f"{dist}/entry_points.txt", entry_points.encode())
        records.append(f"{dist}/RECORD,,")
        whl.writestr(f"{dist}/RECORD", "\n".join(records) + "\n")
    print(path)


if __name__ == "__main__":
    main()
