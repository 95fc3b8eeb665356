"""Fashion-MNIST for the Python apps (apps/python_tune, apps/python_train) from Debian's
dataset-fashion-mnist, so nothing is downloaded: torchvision's FashionMNIST(root,
download=False) reads the IDX files under <root>/FashionMNIST/raw/, and
unpack_debian_files(root) puts them there from /usr/share/datasets/fashion-mnist/*.gz.

An app imports it from this folder:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from debian_fashion_mnist import DEFAULT_DATA_ROOT, unpack_debian_files
"""
import gzip
import os
import shutil
import sys

DEBIAN_FILES = "/usr/share/datasets/fashion-mnist"
DEFAULT_DATA_ROOT = os.path.join(os.environ.get("TMPDIR", "/tmp"), "prism-fashion-mnist")


def unpack_debian_files(root):
    """Unpacks Debian's four .gz files into <root>/FashionMNIST/raw/ (those already there are
    kept). Every rank may call it at once, on hosts that share `root` or not: each writes
    its own temporary file and renames it into place. Exits the program, saying what to
    install, when Debian's files are missing."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        out = os.path.join(raw, name)
        if os.path.exists(out):
            continue
        src = os.path.join(DEBIAN_FILES, name + ".gz")
        if not os.path.exists(src):
            sys.exit(f"{os.path.basename(sys.argv[0])}: {src} is missing: "
                     "apt-get install dataset-fashion-mnist")
        part = f"{out}.part-{os.getpid()}"
        with gzip.open(src, "rb") as f, open(part, "wb") as g:
            shutil.copyfileobj(f, g)
        os.replace(part, out)
