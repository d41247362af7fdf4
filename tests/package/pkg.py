"""Shared helpers of the package tests: results, the staged `cmake --install`, the .deb, a fresh
Debian 12 (or 11) root made by debootstrap (built once per build directory and kept), containers."""
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
SBIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

_failures = []


def skip(reason):
    print("SKIP: " + reason, flush=True)
    sys.exit(SKIP)


def check(cond, what):
    print(("ok     " if cond else "FAILED ") + what, flush=True)
    if not cond:
        _failures.append(what)
    return cond


def failures():
    return list(_failures)


def note(text):
    print("note: " + text, flush=True)


def finish():
    if _failures:
        print("%d check(s) failed:" % len(_failures))
        for f in _failures:
            print("  " + f)
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


def run(cmd, timeout=300, check_rc=False, **kw):
    """subprocess.run with text output captured; raises on a non-zero exit with check_rc."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    p = subprocess.run(cmd, timeout=timeout, **kw)
    if check_rc and p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def need_tool(name, package):
    path = shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN_PATH)
    if not path:
        skip("%s not found (Debian package %s)" % (name, package))
    return path


def need_root():
    if os.geteuid() != 0:
        skip("not running as root")


def cache_value(build, name):
    """A variable of the build directory's CMakeCache.txt, or None."""
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^%s:[A-Z]+=(.*)$" % re.escape(name), line.rstrip("\n"))
            if m:
                return m.group(1)
    return None


def stage(build, dest):
    """`cmake --install` of the build directory into dest (DESTDIR); returns dest."""
    run(["cmake", "--install", build], env=dict(os.environ, DESTDIR=dest), check_rc=True)
    return dest


def project_version(build):
    """The version the build gives the daemon and the package (CMakeLists.txt: the release tag's,
    a snapshot's after it, or project()'s VERSION)."""
    return cache_value(build, "DISKPULSE_VERSION")


def deb_path(build):
    """The .deb that `cpack -G DEB` made in build (package/deb test), or None."""
    found = sorted(glob.glob(os.path.join(build, "diskpulse_*.deb")))
    return found[-1] if found else None


# Every path in the .deb, with its type and mode (the binary is the only executable).
DEB_PATHS = {
    "etc/": "d755", "etc/diskpulse/": "d755", "etc/diskpulse/diskpulse.conf": "f644",
    "lib/": "d755", "lib/systemd/": "d755", "lib/systemd/system/": "d755",
    "lib/systemd/system/diskpulse.service": "f644", "lib/systemd/system/diskpulse.socket": "f644",
    "usr/": "d755", "usr/lib/": "d755", "usr/lib/sysusers.d/": "d755", "usr/lib/sysusers.d/diskpulse.conf": "f644",
    "usr/sbin/": "d755", "usr/sbin/diskpulse": "f755",
    "usr/share/": "d755", "usr/share/diskpulse/": "d755",
    "usr/share/diskpulse/alertmanager/": "d755", "usr/share/diskpulse/alertmanager/diskpulse-route.yml": "f644",
    "usr/share/diskpulse/grafana/": "d755", "usr/share/diskpulse/grafana/diskpulse.json": "f644",
    "usr/share/diskpulse/prometheus/": "d755", "usr/share/diskpulse/prometheus/diskpulse.rules.yml": "f644",
    "usr/share/diskpulse/prometheus/prometheus.yml": "f644",
    "usr/share/diskpulse/tmpfiles.d/": "d755", "usr/share/diskpulse/tmpfiles.d/postgresql-canary.conf": "f644",
    "usr/share/doc/": "d755", "usr/share/doc/diskpulse/": "d755",
    "usr/share/doc/diskpulse/README.md": "f644", "usr/share/doc/diskpulse/changelog.gz": "f644",
    "usr/share/doc/diskpulse/copyright": "f644", "usr/share/doc/diskpulse/runbook.md": "f644",
    "usr/share/doc/diskpulse/runbook.html": "f644",
    "usr/share/doc-base/": "d755", "usr/share/doc-base/diskpulse-runbook": "f644",
    "usr/share/doc/diskpulse/examples/": "d755", "usr/share/doc/diskpulse/examples/canary-paths.conf": "f644",
    "usr/share/doc/diskpulse/examples/ip-allow.conf": "f644",
    "usr/share/man/": "d755", "usr/share/man/man8/": "d755", "usr/share/man/man8/diskpulse.8.gz": "f644",
}


def data_members(deb):
    """{path without ./ (directories with a trailing /): (tarinfo, bytes or None)} of the .deb's
    data archive."""
    raw = run(["dpkg-deb", "--fsys-tarfile", deb], text=False, check_rc=True)
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw.stdout)) as t:
        for m in t.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            if not name:
                continue
            name += "/" if m.isdir() else ""
            out[name] = (m, t.extractfile(m).read() if m.isfile() else None)
    return out


def member_modes(members):
    """{path: type and mode} of data_members(), as DEB_PATHS writes them ("d755", "f644")."""
    return {n: ("d" if m.isdir() else "f" if m.isfile() else "?") + "%o" % (m.mode & 0o7777)
            for n, (m, _) in members.items()}


def documented_lintian_tags():
    """Tags explained in packaging/lintian.md (lines "- `tag` (level): why")."""
    with open(os.path.join(SOURCE, "packaging", "lintian.md")) as f:
        return set(re.findall(r"^- `([a-z0-9+.-]+)`", f.read(), re.M))


def lintian_tags(deb):
    """lintian --pedantic of the .deb: (exit status, [(level, tag)], everything it printed)."""
    p = run(["lintian", "--allow-root", "--pedantic", "--display-info", "--display-experimental", deb], timeout=600)
    tags = re.findall(r"^([EWIPX]): diskpulse(?: \w+)?: (\S+)", p.stdout, re.M)
    return p.returncode, tags, p.stdout + p.stderr


def deb_field(deb, field):
    return run(["dpkg-deb", "-f", deb, field], check_rc=True).stdout.strip()


def deb_depends_packages(deb):
    """The first alternative of each Depends: entry, as package names."""
    out = []
    for item in deb_field(deb, "Depends").split(","):
        first = item.split("|")[0].strip()
        out.append(re.split(r"[\s(]", first)[0])
    return out


def sanitized(build):
    return (cache_value(build, "DISKPULSE_SANITIZE") or "").upper() in ("ON", "1", "TRUE", "YES")


# --- the source tree ----------------------------------------------------------------------------

def source_files(source):
    """The tree's files as a user's clone has them (tracked and untracked, ignored ones left
    out); every file but build directories where it is not a git work tree."""
    p = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others",
                        "--exclude-standard"], capture_output=True)
    if p.returncode == 0:
        return [f for f in p.stdout.decode().split("\0") if f and os.path.lexists(os.path.join(source, f))]
    out = []
    for d, dirs, files in os.walk(source):
        rel = os.path.relpath(d, source)
        dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x == ".git"))]
        out += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return out


def copy_source(source, dest, same_commit=False):
    """Copies source_files() of source below dest (uncommitted edits included). With same_commit,
    dest/.git names the source's git directory ("gitdir:"), so that git in the copy reports the
    same commit, whose revision and date the build takes (nothing when source is no git tree)."""
    for f in source_files(source):
        src, dst = os.path.join(source, f), os.path.join(dest, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    if same_commit:
        p = subprocess.run(["git", "-C", source, "rev-parse", "--absolute-git-dir"], capture_output=True, text=True)
        if p.returncode == 0 and os.path.lexists(os.path.join(source, ".git")):
            with open(os.path.join(dest, ".git"), "w") as f:
                f.write("gitdir: %s\n" % p.stdout.strip())
    return dest


# --- the fresh root -----------------------------------------------------------------------------

def apt_mirror():
    """The Debian mirror this machine's apt uses for bookworm main (from /etc/apt/sources.list and
    sources.list.d, one-line or deb822 format), or None."""
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")) + \
        sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    for path in files:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                    if m:
                        fields[m.group(1).lower()] = m.group(2).split()
                if ("deb" in fields.get("types", []) and "bookworm" in fields.get("suites", [])
                        and "main" in fields.get("components", []) and fields.get("enabled", ["yes"])[0] != "no"):
                    return fields["uris"][0]
        else:
            for line in text.splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line).split()
                if len(parts) >= 4 and parts[0] == "deb" and parts[2] == "bookworm" and "main" in parts[3:]:
                    return parts[1]
    return None


def apt_proxy_env():
    """http_proxy for debootstrap when apt is configured with one."""
    p = run(["apt-config", "shell", "P", "Acquire::http::Proxy"])
    m = re.search(r"P='([^']*)'", p.stdout)
    return {"http_proxy": m.group(1)} if m and m.group(1) else {}


# Installed in the fresh root besides the .deb's Depends: udev, so that the root booted in the VM
# has a udev database like any Debian host; and the Debian packages the runbook's commands come
# from (docs/runbook.md: curl, sysstat's iostat and pidstat, ioping, procps' ps, iproute2's ss,
# bpftool), so that tests/runbook runs them on a host booted under systemd as an operator would.
ROOT_EXTRA = ("udev", "curl", "sysstat", "ioping", "procps", "iproute2", "bpftool")


def fresh_root(build, extra=ROOT_EXTRA, suite="bookworm", deb=None):
    """A minimal Debian root of suite (debootstrap --variant=minbase; Debian 12 unless told) with
    the dependencies of deb (package/deb's .deb unless told) and extra packages preinstalled, so
    that `dpkg -i` needs no network. Built once per build directory, suite and package list, under
    BUILD/package-roots/; returns its path (read-only use: copy it before changing anything).
    Skips when it cannot be built."""
    need_root()
    debootstrap = need_tool("debootstrap", "debootstrap")
    deb = deb or deb_path(build)
    if not deb:
        raise RuntimeError("no .deb in %s: the package/deb test makes it" % build)
    include = sorted(set(deb_depends_packages(deb)) | set(extra))
    key = hashlib.sha256(" ".join(include).encode()).hexdigest()[:12]
    base = os.path.join(build, "package-roots")
    root = os.path.join(base, "%s-%s" % (suite, key))
    if os.path.isfile(os.path.join(root, ".complete")):
        return root
    mirror = apt_mirror()
    if not mirror:
        skip("no bookworm main source in this machine's apt configuration for debootstrap")
    os.makedirs(base, exist_ok=True)
    for old in glob.glob(os.path.join(base, suite + "-*")):  # other package lists, interrupted runs
        shutil.rmtree(old, ignore_errors=True)
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.monotonic()
    note("debootstrap --variant=minbase --include=%s %s (from this machine's apt source)" % (",".join(include), suite))
    p = run(["nice", debootstrap, "--variant=minbase", "--include=" + ",".join(include), suite, tmp, mirror],
            timeout=1200, env=dict(os.environ, **apt_proxy_env()))
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        skip("debootstrap failed (exit %d): %s" % (p.returncode, (p.stdout + p.stderr).strip()[-600:]))
    # Nothing of the host's may leak into the root's state.
    for d in ("var/cache/apt/archives",):
        for f in glob.glob(os.path.join(tmp, d, "*.deb")):
            os.unlink(f)
    open(os.path.join(tmp, ".complete"), "w").close()
    os.rename(tmp, root)
    note("fresh root built in %.0f s: %s" % (time.monotonic() - t, root))
    return root


def copy_root(root, dest):
    """A private copy of the cached root (cp -a, reflinks where the filesystem has them)."""
    run(["cp", "-a", "--reflink=auto", root, dest], check_rc=True, timeout=600)
    os.unlink(os.path.join(dest, ".complete"))
    return dest


def chroot(root, *cmd, timeout=300, env=None):
    e = {"PATH": SBIN_PATH, "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root"}
    e.update(env or {})
    return run(["chroot", root] + list(cmd), timeout=timeout, env=e)


def tree(root, skip_prefixes=()):
    """{relative path: (type, mode, uid, gid, size or link target, content hash)} of every entry
    below root, except the given prefixes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for d in dirnames:
            rel = os.path.join(rel_dir, d)
            if any(rel == p or rel.startswith(p + "/") for p in skip_prefixes):
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in dirnames + filenames:
            rel = os.path.join(rel_dir, name)
            if any(rel == p or rel.startswith(p + "/") for p in skip_prefixes):
                continue
            path = os.path.join(root, rel)
            st = os.lstat(path)
            if os.path.islink(path):
                out[rel] = ("l", 0, st.st_uid, st.st_gid, os.readlink(path), "")
            elif os.path.isdir(path):
                out[rel] = ("d", st.st_mode & 0o7777, st.st_uid, st.st_gid, "", "")
            else:
                h = ""
                if os.path.isfile(path):
                    with open(path, "rb") as f:
                        h = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("f", st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_size, h)
    return out


def tree_diff(before, after):
    """(added, removed, changed) relative paths."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    return added, removed, changed


# --- reproducibility ----------------------------------------------------------------------------

def package_epoch(build):
    """The SOURCE_DATE_EPOCH the build directory's cpack stamps the package with (its
    CPackConfig.cmake, packaging/install.cmake), or "" (then cpack takes the environment's or
    the current time)."""
    try:
        with open(os.path.join(build, "CPackConfig.cmake")) as f:
            m = re.search(r'^set\(CPACK_DISKPULSE_SOURCE_DATE_EPOCH "([^"]*)"\)', f.read(), re.M)
    except OSError:
        return ""
    return m.group(1) if m else ""


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ar_members(path):
    """[(name, mtime, uid, gid, mode, bytes)] of an ar archive (a .deb: deb(5), ar(5)'s common
    format: "!<arch>\\n", then per member a 60-byte header and the data, padded to even)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("%s: not an ar archive" % path)
    out, pos = [], 8
    while pos + 60 <= len(data):
        h = data[pos:pos + 60]
        name = h[0:16].decode().rstrip().rstrip("/")
        size = int(h[48:58].decode().strip())
        out.append((name, h[16:28].decode().strip(), h[28:34].decode().strip(), h[34:40].decode().strip(),
                    h[40:48].decode().strip(), data[pos + 60:pos + 60 + size]))
        pos += 60 + size + (size & 1)
    return out


def _tar_entries(raw):
    """[(name, {attribute: value})] of a compressed tar archive's bytes, in archive order."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        for m in t.getmembers():
            body = t.extractfile(m).read() if m.isfile() else None
            out.append((m.name, {"type": m.type.decode(), "mode": "%o" % m.mode, "mtime": m.mtime,
                                 "owner": "%d:%d (%s:%s)" % (m.uid, m.gid, m.uname, m.gname),
                                 "link": m.linkname, "size": m.size,
                                 "content": hashlib.sha256(body).hexdigest()[:16] if body is not None else ""}))
    return out


def deb_differences(a, b):
    """What differs between two .debs, as readable lines naming the ar member and, inside the
    control and data archives, the tar member and attribute (order, mtime, owner, mode, bytes);
    [] when the files are identical byte for byte."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        if fa.read() == fb.read():
            return []
    diffs = []
    ma, mb = ar_members(a), ar_members(b)
    if [m[0] for m in ma] != [m[0] for m in mb]:
        return ["ar members: %s vs %s" % ([m[0] for m in ma], [m[0] for m in mb])]
    for (name, *ha, da), (_, *hb, db) in zip(ma, mb):
        for what, x, y in zip(("mtime", "uid", "gid", "mode"), ha, hb):
            if x != y:
                diffs.append("%s: ar header %s %s vs %s" % (name, what, x, y))
        if da == db:
            continue
        if ".tar" not in name:
            diffs.append("%s: bytes differ" % name)
            continue
        ta, tb = _tar_entries(da), _tar_entries(db)
        na, nb = [n for n, _ in ta], [n for n, _ in tb]
        if sorted(na) != sorted(nb):
            diffs.append("%s: members only in the first: %s; only in the second: %s" % (
                name, sorted(set(na) - set(nb)), sorted(set(nb) - set(na))))
        elif na != nb:
            diffs.append("%s: the same members in another order" % name)
        attrs_b = dict(tb)
        inner = 0
        for n, attrs in ta:
            other = attrs_b.get(n)
            for k in sorted(attrs) if other else ():
                if attrs[k] != other[k]:
                    inner += 1
                    diffs.append("%s: %s: %s %s vs %s" % (name, n, k, attrs[k], other[k]))
        if not inner and sorted(na) == sorted(nb) and na == nb:
            diffs.append("%s: same members, but the compressed bytes differ (the compressor's "
                         "header or settings)" % name)
    return diffs or ["the files differ, but no member or header does"]
