"""Packaging: problems/ and hparams/ are t2t_lite.problems / t2t_lite.hparams both from a
plain checkout (nothing installed) and in a built wheel, which finds every package
itself and puts no generic top-level name into site-packages."""
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE_PACKAGES = sysconfig.get_paths()["purelib"]


def _run_isolated(code: str, *path: str, cwd: Path = ROOT) -> str:
    """Runs ``code`` with only ``path`` (then the dependencies' site-packages, without
    processing its .pth files, so an editable install of t2t-lite is invisible) on
    sys.path; -I ignores PYTHONPATH and the user site, -S skips .pth files."""
    setup = f"import sys; sys.path[:] = {list(path)!r} + sys.path[1:] + [{SITE_PACKAGES!r}]\n"
    result = subprocess.run([sys.executable, "-I", "-S", "-c", setup + code], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_checkout_imports_mapped_packages_without_installing():
    out = _run_isolated(
        "import t2t_lite.hparams, t2t_lite.problems, t2t_lite.problems.parsing as parsing\n"
        "from t2t_lite import registry\n"
        "assert not any('editable' in repr(f).lower() for f in sys.meta_path)\n"
        "print(t2t_lite.hparams.__file__); print(parsing.__file__)\n"
        "print(registry.hparams('transformer_base').hidden_size)\n"
        "print('problems' in sys.modules, 'hparams' in sys.modules)\n",
        str(ROOT))
    assert out.split() == [str(ROOT / "hparams" / "__init__.py"),
                           str(ROOT / "problems" / "parsing.py"), "512", "False", "False"]


def test_wheel_ships_every_package_under_t2t_lite_only(tmp_path):
    source = tmp_path / "source"       # a copy: no stale build/ of the checkout gets in
    for name in ("t2t_lite", "problems", "hparams"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "setup.cfg", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path / "wheel")],
                   check=True, capture_output=True, timeout=300)
    wheel, = (tmp_path / "wheel").glob("t2t_lite-*.whl")
    names = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    expected = {f"t2t_lite/{path.relative_to(ROOT / 't2t_lite').as_posix()}"
                for path in (ROOT / "t2t_lite").rglob("*.py")}
    for folder in ("problems", "hparams"):
        expected |= {f"t2t_lite/{folder}/{path.relative_to(ROOT / folder).as_posix()}"
                     for path in (ROOT / folder).rglob("*.py")}
    assert names == expected and "t2t_lite/problems/parsing.py" in names
    assert "t2t_lite/hparams/transformer.py" in names
    # installed (non-editable) into a target directory, the mapped names import from it
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) \
        == ["bin", "t2t_lite"]                          # bin: the console scripts
    out = _run_isolated("import t2t_lite.problems.parsing as p, t2t_lite.hparams as h\n"
                        "print(p.__file__); print(h.__file__)\n", str(target), cwd=tmp_path)
    assert out.split() == [str(target / "t2t_lite" / "problems" / "parsing.py"),
                           str(target / "t2t_lite" / "hparams" / "__init__.py")]
