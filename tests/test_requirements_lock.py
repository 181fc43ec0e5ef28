"""requirements.lock, the hashed lock `make` installs on x86-64 Linux, agrees with requirements.txt and is complete.

The lock is written by ``scripts/lock_requirements.py`` (with uv); these checks read both files on their own terms,
with ``packaging``'s parser of requirements, and the installed packages' own metadata.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def _entries(text: str) -> list[str]:
    """A requirements file's logical lines: backslash continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.split(" #", 1)[0].strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _lock() -> dict[str, tuple[Version, list[str]]]:
    """The lock's pins: ``{canonical name: (version, hashes)}``."""
    locked = {}
    for entry in _entries((ROOT / "requirements.lock").read_text(encoding="utf-8")):
        requirement = Requirement(HASH.sub("", entry).strip())
        (specifier,) = requirement.specifier
        assert specifier.operator == "==" and not requirement.marker and not requirement.url, entry
        locked[canonicalize_name(requirement.name)] = (Version(specifier.version), HASH.findall(entry))
    return locked


def _pins() -> dict[str, Version]:
    """requirements.txt's pins, its options (``-e .``) aside."""
    pins = {}
    for entry in _entries((ROOT / "requirements.txt").read_text(encoding="utf-8")):
        if entry.startswith("-"):
            continue
        requirement = Requirement(entry)
        (specifier,) = requirement.specifier
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def test_every_entry_of_the_lock_is_an_exact_pin_with_sha256_hashes_and_nothing_else():
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    entries = _entries(text)
    # no index, link or editable option: where files come from is the installer's choice, what they are is the lock's
    assert not [entry for entry in entries if entry.startswith("-")], "the lock names an option"
    locked = _lock()
    assert len(locked) == len(entries), "a package is locked twice"
    assert not [name for name, (_, hashes) in locked.items() if not hashes], "pip --require-hashes needs a hash each"
    assert "mha" not in locked, "the book's own package is installed editable after the lock, not from it"


def test_every_pin_of_requirements_txt_is_the_locks():
    locked = _lock()
    pins = _pins()
    assert len(pins) > 30, "requirements.txt was read"
    differing = {name: (str(version), str(locked[name][0]) if name in locked else "missing")
                 for name, version in pins.items()
                 if name not in locked or locked[name][0].public != version.public}
    assert not differing, (f"requirements.txt and requirements.lock differ (pin, lock): {differing}; run "
                           "python -m scripts.lock_requirements --torch-wheels DIR")


def test_torch_is_locked_as_its_cpu_build_of_the_pinned_version():
    version, hashes = _lock()["torch"]
    assert version.public == _pins()["torch"].public and version.local == "cpu", version
    assert len(hashes) == 1, "one wheel: the CPU build for CPython 3.11 on x86-64 Linux"
    assert not [name for name in _lock() if name.startswith("nvidia-")], "the CUDA build's libraries are locked"


def test_the_makefile_installs_the_lock_with_hashes_required():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = makefile[makefile.index("$(STAMP): "):makefile.index("touch $(STAMP)")]
    assert "$(LOCK)" in rule.splitlines()[0], "the environment is reinstalled when the lock changes"
    assert "pip install --quiet --require-hashes -r $(LOCK)" in rule
    assert re.search(r"^LOCK := requirements\.lock$", makefile, re.M)


def unlisted_requirements(versions: dict[str, str]) -> tuple[int, dict[str, list[str]]]:
    """For a set of pinned packages ``{canonical name: version}``: how many are installed here at that version, and
    the requirements of those (from their own metadata, for CPython 3.11 on x86-64 Linux) that the set lacks or pins
    outside their range: what pip refuses to leave out when it installs with --require-hashes."""
    environment = default_environment() | {"python_full_version": "3.11.0", "python_version": "3.11",
                                           "sys_platform": "linux", "platform_machine": "x86_64", "extra": ""}
    checked, missing = 0, {}
    for name, version in versions.items():
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(distribution.version) != Version(version):
            continue
        checked += 1
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            wanted = canonicalize_name(requirement.name)
            if wanted not in versions or not requirement.specifier.contains(Version(versions[wanted]),
                                                                               prereleases=True):
                missing.setdefault(name, []).append(line)
    return checked, missing


def test_every_requirement_of_a_locked_package_is_locked():
    """Nothing a locked package needs is missing from the lock (read from each installed package's metadata, where it is
    installed here at its locked version)."""
    locked = _lock()
    checked, missing = unlisted_requirements({name: str(version) for name, (version, _) in locked.items()})
    assert checked > 0.9 * len(locked), f"only {checked} of {len(locked)} locked packages are installed as locked"
    assert not missing, f"locked packages need what the lock lacks or pins outside their range: {missing}"
