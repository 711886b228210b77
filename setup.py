"""t2t-lite: the Transformer of "Attention Is All You Need" in TensorFlow 2 + Keras 3.

The top-level folders ``problems/`` and ``hparams/`` install as ``t2t_lite.problems`` and
``t2t_lite.hparams`` so that no generic top-level name is taken in site-packages (from a
plain checkout, ``t2t_lite/__init__.py`` maps the same names onto the folders). Every
package is found, none listed by hand: a new subpackage of ``t2t_lite/`` (or of a mapped
folder) ships without editing this file.
"""
from setuptools import find_packages, setup

# Installed package -> repository folder (t2t_lite/__init__.py's CHECKOUT_FOLDERS).
MAPPED_FOLDERS = {"t2t_lite.problems": "problems", "t2t_lite.hparams": "hparams"}


def packages():
    """``t2t_lite`` and its subpackages, and each mapped folder with its subpackages
    under its ``t2t_lite.`` name; ``tests``, ``scripts`` and the folders' own top-level
    names are never packages."""
    found = find_packages(include=["t2t_lite", "t2t_lite.*"])
    for package, folder in MAPPED_FOLDERS.items():
        found += [package] + [f"{package}.{sub}" for sub in find_packages(where=folder)]
    return sorted(found)


COMMANDS = {
    "t2t-lite-info": "t2t_lite.commands.info:main",
    "t2t-lite-datagen": "t2t_lite.commands.datagen:main",
    "t2t-lite-trainer": "t2t_lite.commands.trainer:main",
    "t2t-lite-decoder": "t2t_lite.commands.decoder:main",
    "t2t-lite-avg-checkpoints": "t2t_lite.commands.avg_checkpoints:main",
    "t2t-lite-exporter": "t2t_lite.commands.exporter:main",
    "t2t-lite-evalb": "t2t_lite.commands.evalb:main",
}

setup(
    name="t2t-lite",
    version="0.1.0",
    description="The Transformer (Vaswani et al., 2017) in TensorFlow 2 + Keras 3, tensor2tensor style",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=packages(),
    package_dir={"t2t_lite": "t2t_lite", **MAPPED_FOLDERS},
    install_requires=[
        "tensorflow~=2.21.0",
        "keras>=3.15,<4",
        "tensorflow-text~=2.21.0",
        "tensorflow-datasets>=4.9.9,<5",
        "tensorboard~=2.21.0",
        "sacrebleu>=2.4,<3",
        "sentencepiece>=0.2,<0.3",
        "num2words>=0.5.13,<0.6",
        "tqdm>=4.66,<5",
        "numpy>=1.26,<3",
        "matplotlib>=3.8,<4",
        "pillow>=10,<14",
    ],
    extras_require={
        "test": ["pytest>=8,<10", "pytest-xdist>=3.5,<4"],
        # scripts/benchmark.py --compare: the peers timed beside t2t-lite
        "bench": ["ctranslate2>=4.5,<5", "torch>=2.4,<3"],
    },
    entry_points={"console_scripts": [f"{name}={target}" for name, target in COMMANDS.items()]},
)
