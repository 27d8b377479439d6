"""The wheel on a clean machine (issue 20): `make wheel`'s repaired wheel in a minimal Debian
root with nothing but python3 and python3-venv (no compiler, no -dev packages), and the sdist in a
fresh venv on this machine.

The chroot is made once by tests/wheel/make_chroot.sh into build/chroot/ (debootstrap; `make test`
starts it in the background at its start, this test waits for it). Needs root, debootstrap's
mirror and PyPI; skipped (saying why) where there is no wheel in dist/ or no root. The sdist test
compiles the C++ core from scratch and runs only with BACKFILL_SDIST_CHECK=1 (`make wheel-check`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DIST = ROOT / "dist"
CHROOT = ROOT / "build" / "chroot" / "bookworm"
SMOKE = ROOT / "tests" / "wheel" / "smoke.py"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# dist/ may hold a wheel per Python (make wheels): the one make dist-wheel built is this
# interpreter's, and the clean Debian root's python3 is bookworm's 3.11.
THIS_WHEEL = f"backfill-*-cp{sys.version_info[0]}{sys.version_info[1]}-*manylinux*.whl"
BOOKWORM_WHEEL = "backfill-*-cp311-cp311-*manylinux*.whl"


def _newest(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.skip(f"no {pattern} in dist/: run `make wheel` first")
    return found[-1]


def _run(cmd: list[str], timeout: float = 900, **kw: object) -> str:
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    took = time.monotonic() - started
    sys.stderr.write(f"[{took:6.1f} s] {' '.join(map(str, cmd))[:150]}\n")
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return str(result.stdout)


def _root_env() -> list[str]:
    """The chroot's environment: a clean one, plus this machine's way to PyPI (make_chroot.sh
    copies its CA bundle in; proxies as set here) and the pip cache make_chroot.sh warmed."""
    env = [
        "/usr/bin/env",
        "-i",
        f"PATH={PATH}",
        "HOME=/root",
        "LANG=C.UTF-8",
        "PIP_CACHE_DIR=/var/cache/backfill-pip",
        "PIP_DISABLE_PIP_VERSION_CHECK=1",
    ]
    if (CHROOT / "etc" / "ssl" / "certs" / "host-ca.crt").is_file():
        env.append("PIP_CERT=/etc/ssl/certs/host-ca.crt")
    env += [
        f"{k}={v}"
        for k, v in os.environ.items()
        if k.lower() in ("http_proxy", "https_proxy", "no_proxy")
    ]
    return env


def _in_root(script: str, timeout: float = 900) -> str:
    return _run(["chroot", str(CHROOT), *_root_env(), "/bin/sh", "-ec", script], timeout=timeout)


@contextmanager
def _mounts(*mounts: tuple[list[str], Path]) -> Iterator[None]:
    """Mounts into the chroot, always unmounted again (in reverse) however the block ends."""
    done: list[Path] = []
    try:
        for args, target in mounts:
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", *args, str(target)], check=True, timeout=60)
            done.append(target)
        yield
    finally:
        for target in reversed(done):
            if subprocess.run(["umount", str(target)], timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", str(target)], timeout=60)


def test_repaired_wheel_is_manylinux_and_self_contained() -> None:
    wheel = _newest(THIS_WHEEL)
    auditwheel = shutil.which("auditwheel") or str(Path(sys.executable).parent / "auditwheel")
    if not Path(auditwheel).exists():
        pytest.skip("auditwheel is not installed (`make wheel` installs it)")
    shown = _run([auditwheel, "show", str(wheel)], timeout=120)
    shown = " ".join(shown.split())  # auditwheel wraps its lines
    tag = wheel.name.split("-")[-1].removesuffix(".whl")
    assert f'is consistent with the following platform tag: "{tag}"' in shown, shown
    # Nothing outside the policy: the only libraries it needs are the policy's own (libc, libm,
    # libstdc++, libgcc_s); fmt is grafted into backfill.libs. auditwheel would list others as
    # "The following external shared libraries are required by the wheel".
    assert "external shared libraries are required" not in shown, shown
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("backfill/_core") and n.endswith(".so") for n in names)
    for data in (
        "backfill/examples/shop/backfill.yml",
        "backfill/examples/shop_backfill.ipynb",
        "backfill/py.typed",
    ):
        assert data in names, data
    assert not [n for n in names if "libdate" in n], "the tz code is our own TZif reader now"


@pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap and chroot need root")
def test_wheel_in_a_clean_debian_root(tmp_path: Path) -> None:
    wheel = _newest(BOOKWORM_WHEEL)
    # Made in the background since the start of `make test`; this waits on its lock.
    made = subprocess.run(
        [str(ROOT / "tests" / "wheel" / "make_chroot.sh"), str(CHROOT)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if made.returncode != 0:  # no mirror or PyPI reachable, say: nothing to test the wheel in
        pytest.skip(f"the clean Debian root cannot be made here: {made.stderr[-800:]}")
    no_tools = _in_root(
        "for t in cc gcc g++ c++ clang; do command -v $t || true; done; "
        "dpkg-query -W -f='${Package}\\n' | grep -- '-dev$' || true"
    )
    assert not no_tools.strip(), f"the clean root has build tools: {no_tools}"

    work = CHROOT / "tmp" / "backfill-smoke"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(CHROOT / "opt" / "bf", ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(wheel, work / wheel.name)
    shutil.copy(SMOKE, work / "smoke.py")
    with _mounts((["-t", "proc", "proc"], CHROOT / "proc")):
        # The runtime dependencies come from the wheelhouse make_chroot.sh downloaded from PyPI.
        # (/opt/warm is make_chroot.sh's venv: its pip installs into the new one, which saves
        # ensurepip's minute-long-under-load copy of pip.)
        _in_root(
            f"python3 -m venv --without-pip /opt/bf && /opt/warm/bin/pip --python "
            f"/opt/bf/bin/python install -q --no-compile --no-index --find-links "
            f"/var/cache/backfill-wheels /tmp/backfill-smoke/{wheel.name}"
        )
        out = _in_root(
            "cd /tmp && /opt/bf/bin/python /tmp/backfill-smoke/smoke.py --tz os "
            "--demo-dir /tmp/backfill-smoke/demo"
        )
        assert "SMOKE OK" in out, out
        # The same root without an OS tz database: an empty tmpfs over /usr/share/zoneinfo, in a
        # mount namespace of its own (so nothing outside sees it, and it goes with the process).
        zoneinfo = CHROOT / "usr" / "share" / "zoneinfo"
        out = _run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "/bin/sh",
                "-ec",
                f'mount -t tmpfs tmpfs {zoneinfo}; exec chroot "$@"',
                "sh",
                str(CHROOT),
                *_root_env(),
                "/bin/sh",
                "-ec",
                "cd /tmp && /opt/bf/bin/python /tmp/backfill-smoke/smoke.py --tz tzdata",
            ]
        )
        assert "SMOKE OK" in out and "tzdata" in out, out


@pytest.mark.skipif(
    os.environ.get("BACKFILL_SDIST_CHECK") != "1",
    reason="compiles the C++ core from scratch: `make wheel-check` runs it",
)
@pytest.mark.timeout(3600)  # a from-scratch compile: 15+ minutes on a busy 2-core machine
def test_sdist_builds_and_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    sdist = _newest("backfill-*.tar.gz")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # Without PYTHONPATH: a source checkout's python/ on it would shadow the installed package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(sdist)],
        timeout=3000,
        env={**env, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
    )
    out = _run(
        [str(py), str(SMOKE), "--tz", "os", "--demo-dir", str(tmp_path / "demo")],
        cwd=tmp_path,
        env=env,
    )
    assert "SMOKE OK" in out, out
