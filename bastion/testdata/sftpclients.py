"""SFTP behaviours as paramiko or asyncssh see them, for the transparency
test (bastion/sftp_clients_test.go): the test runs this script against an
OpenSSH target directly and through postern and fails on any difference.

    /usr/bin/python3 -W ignore sftpclients.py CLIENT HOST PORT USER KEY DIR

CLIENT is paramiko or asyncssh. Every case works inside DIR (a fresh
directory on the target, which is this machine) and prints one JSON line:
{"case": NAME, "result": ...}. Paths in results are relative to DIR, so
that a run direct and a run through postern print the same lines when
postern changes nothing. Nothing here is timing dependent.
"""

import asyncio
import hashlib
import json
import os
import stat
import struct
import sys

DIR = ""


def emit(case, result):
    print(json.dumps({"case": case, "result": result}, sort_keys=True, separators=(",", ":")), flush=True)


def rel(p):
    if isinstance(p, bytes):
        p = p.decode("utf-8", "backslashreplace")
    return p.replace(DIR, "$DIR")


def chunks():
    """64 distinct 32 KiB chunks: 2 MiB that only the right order rebuilds."""
    return [bytes([i]) * 32768 for i in range(64)]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def on_disk(name):
    with open(os.path.join(DIR, name), "rb") as f:
        return f.read()


def disk_mode(name):
    return oct(stat.S_IMODE(os.lstat(os.path.join(DIR, name)).st_mode))


# ---------------------------------------------------------------- paramiko


def run_paramiko(host, port, user, key):
    import paramiko
    from paramiko.py3compat import long
    from paramiko.sftp import (CMD_CLOSE, CMD_EXTENDED, CMD_EXTENDED_REPLY,
                               CMD_NAME, CMD_OPEN, CMD_OPENDIR, CMD_READDIR,
                               SFTPError)
    from paramiko.sftp_attr import SFTPAttributes

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port=port, username=user, key_filename=key,
                   allow_agent=False, look_for_keys=False, timeout=30)
    sftp = client.open_sftp()
    p = lambda name: os.path.join(DIR, name)

    def err(e):
        # The status code and message the client got.
        return {"error": type(e).__name__, "errno": getattr(e, "errno", None), "text": str(e)}

    def raw(name, *args):
        """An extended request; the reply's bytes, or the status error."""
        try:
            t, msg = sftp._request(CMD_EXTENDED, name, *args)
        except (IOError, SFTPError, EOFError) as e:
            return err(e)
        if t == CMD_EXTENDED_REPLY:
            return {"reply": msg.get_remainder().hex()}
        if t == CMD_NAME:
            n = msg.get_int()
            return {"names": [rel(msg.get_text()) for _ in range(n)]}
        return {"status": "ok"}

    def raw_open(path, flags, attrs=None):
        t, msg = sftp._request(CMD_OPEN, path, flags, attrs or SFTPAttributes())
        return msg.get_binary()

    def raw_close(handle):
        sftp._request(CMD_CLOSE, handle)

    # Append, pipelined: 2 MiB in 32 KiB writes after a 1 KiB head.
    with sftp.open(p("append"), "w") as f:
        f.write(b"H" * 1024)
    with sftp.open(p("append"), "a") as f:
        f.set_pipelined(True)
        for c in chunks():
            f.write(c)
    want = b"H" * 1024 + b"".join(chunks())
    got = on_disk("append")
    emit("append pipelined", {"size": len(got), "right content": got == want})

    # An acknowledged write is on the target before close.
    f = sftp.open(p("stat"), "w")
    f.write(b"0123456789")
    emit("write then fstat and stat", {"fstat": f.stat().st_size, "stat": sftp.stat(p("stat")).st_size,
                                       "on disk": len(on_disk("stat"))})
    f.close()

    f = sftp.open(p("trunc"), "w")
    f.write(b"0123456789")
    f.truncate(4)
    f.close()
    emit("write then ftruncate 4", {"on disk": on_disk("trunc").decode()})

    f = sftp.open(p("mtime"), "w")
    f.write(b"0123456789")
    f.utime((1000000000, 1200000000))
    f.close()
    st = os.stat(p("mtime"))
    emit("write then fsetstat times", {"mtime": int(st.st_mtime), "atime": int(st.st_atime)})

    # A write error is the write's, not the close's.
    res = {}
    try:
        f = sftp.open("/dev/full", "w")
        try:
            f.write(b"x" * 32768)
            res["write"] = "ok"
        except (IOError, SFTPError) as e:
            res["write"] = err(e)
        try:
            f.close()
            res["close"] = "ok"
        except (IOError, SFTPError) as e:
            res["close"] = err(e)
    except (IOError, SFTPError) as e:
        res["open"] = err(e)
    emit("write to /dev/full", res)

    # Modes asked for are kept: open with attributes, mkdir with a mode.
    attrs = SFTPAttributes()
    attrs.st_mode = 0o600
    raw_close(raw_open(p("key"), 0x1A, attrs))  # write, create, truncate
    sftp.mkdir(p("private"), 0o700)
    local = os.path.join(DIR, "local-key")
    with open(local, "wb") as lf:
        lf.write(b"secret")
    os.chmod(local, 0o600)
    sftp.put(local, p("put-key"))
    emit("modes", {"open 0600": disk_mode("key"), "mkdir 0700": disk_mode("private"),
                   "put of a 0600 file": disk_mode("put-key")})

    # Symbolic links: the link is made where asked, pointing where asked.
    with sftp.open(p("target.txt"), "w") as f:
        f.write(b"t")
    sftp.symlink("target.txt", p("link"))
    sftp.symlink(p("target.txt"), p("abslink"))
    emit("symlink", {"relative": os.readlink(p("link")), "absolute": rel(os.readlink(p("abslink"))),
                     "readlink": rel(sftp.readlink(p("abslink"))), "stray": sorted(n for n in os.listdir(DIR) if "link" in n)})

    # Listing: every name, "." and ".." included, as the server sends them.
    t, msg = sftp._request(CMD_OPENDIR, p("private"))
    h = msg.get_binary()
    names = []
    while True:
        try:
            t, msg = sftp._request(CMD_READDIR, h)
        except EOFError:
            break
        for _ in range(msg.get_int()):
            names.append(msg.get_text())
            msg.get_text()
            SFTPAttributes._from_msg(msg)
    raw_close(h)
    emit("listing", sorted(names))

    # Every extension OpenSSH serves, raw.
    with sftp.open(p("a"), "w") as f:
        f.write(b"aaa")
    with sftp.open(p("b"), "w") as f:
        f.write(b"bbbbbb")
    emit("posix-rename over a file", {"result": raw("posix-rename@openssh.com", p("a"), p("b")), "b": on_disk("b").decode()})
    vfs = raw("statvfs@openssh.com", DIR)
    if "reply" in vfs:
        v = struct.unpack(">11Q", bytes.fromhex(vfs["reply"]))
        vfs = {"bsize": v[0], "frsize": v[1], "flag": v[9], "namemax": v[10]}
    emit("statvfs", vfs)
    h = raw_open(p("b"), 0x01)
    fvfs = raw("fstatvfs@openssh.com", h)
    if "reply" in fvfs:
        v = struct.unpack(">11Q", bytes.fromhex(fvfs["reply"]))
        fvfs = {"bsize": v[0], "namemax": v[10]}
    emit("fstatvfs", fvfs)
    emit("fsync", raw("fsync@openssh.com", h))
    raw_close(h)
    emit("hardlink", {"result": raw("hardlink@openssh.com", p("b"), p("c")), "links": os.stat(p("b")).st_nlink})
    la = SFTPAttributes()
    la.st_atime, la.st_mtime = 1000000000, 1100000000
    emit("lsetstat", {"result": raw("lsetstat@openssh.com", p("link"), la), "link mtime": int(os.lstat(p("link")).st_mtime),
                      "target mtime is not": int(os.stat(p("target.txt")).st_mtime) != 1100000000})
    emit("limits", raw("limits@openssh.com"))
    emit("expand-path", {"~": raw("expand-path@openssh.com", "~"), "dir": raw("expand-path@openssh.com", DIR + "/private/..")})
    src = raw_open(p("b"), 0x01)
    dst = raw_open(p("copy"), 0x1A)
    res = raw("copy-data", src, long(0), long(0), dst, long(0))
    raw_close(src)
    raw_close(dst)
    emit("copy-data", {"result": res, "copy": on_disk("copy").decode()})
    emit("home-directory", raw("home-directory", ""))
    ids = struct.pack(">I", os.getuid())
    emit("users-groups-by-id", raw("users-groups-by-id@openssh.com", ids, struct.pack(">I", os.getgid())))
    emit("unknown extension", raw("nosuch@example.com", "x"))
    sftp.close()
    client.close()


# ---------------------------------------------------------------- asyncssh


async def run_asyncssh(host, port, user, key):
    import asyncssh
    from asyncssh import SFTPAttrs, SFTPError

    def err(e):
        return {"error": type(e).__name__, "code": getattr(e, "code", None), "reason": getattr(e, "reason", str(e))}

    p = lambda name: os.path.join(DIR, name)
    async with asyncssh.connect(host, port=port, username=user, client_keys=[key], known_hosts=None,
                                agent_path=None, config=None) as conn:
        async with conn.start_sftp_client() as sftp:
            # Append, pipelined: the 64 writes are in flight at once.
            async with sftp.open(p("append"), "wb") as f:
                await f.write(b"H" * 1024)
            async with sftp.open(p("append"), "ab") as f:
                await asyncio.gather(*(f.write(c, 1024 + i * 32768) for i, c in enumerate(chunks())))
            want = b"H" * 1024 + b"".join(chunks())
            got = on_disk("append")
            emit("append pipelined", {"size": len(got), "right content": got == want})

            f = await sftp.open(p("stat"), "wb")
            await f.write(b"0123456789")
            emit("write then fstat and stat", {"fstat": (await f.stat()).size, "stat": (await sftp.stat(p("stat"))).size,
                                               "on disk": len(on_disk("stat"))})
            await f.close()

            f = await sftp.open(p("trunc"), "wb")
            await f.write(b"0123456789")
            await f.truncate(4)
            await f.close()
            emit("write then ftruncate 4", {"on disk": on_disk("trunc").decode()})

            f = await sftp.open(p("mtime"), "wb")
            await f.write(b"0123456789")
            await f.utime((1000000000, 1200000000))
            await f.close()
            st = os.stat(p("mtime"))
            emit("write then fsetstat times", {"mtime": int(st.st_mtime), "atime": int(st.st_atime)})

            res = {}
            try:
                f = await sftp.open("/dev/full", "wb")
                try:
                    await f.write(b"x" * 32768)
                    res["write"] = "ok"
                except SFTPError as e:
                    res["write"] = err(e)
                try:
                    await f.close()
                    res["close"] = "ok"
                except SFTPError as e:
                    res["close"] = err(e)
            except SFTPError as e:
                res["open"] = err(e)
            emit("write to /dev/full", res)

            async with sftp.open(p("key"), "wb", attrs=SFTPAttrs(permissions=0o600)):
                pass
            await sftp.mkdir(p("private"), SFTPAttrs(permissions=0o700))
            local = os.path.join(DIR, "local-key")
            with open(local, "wb") as lf:
                lf.write(b"secret")
            os.chmod(local, 0o600)
            await sftp.put(local, p("put-key"))
            emit("modes", {"open 0600": disk_mode("key"), "mkdir 0700": disk_mode("private"),
                           "put of a 0600 file": disk_mode("put-key")})

            async with sftp.open(p("target.txt"), "wb") as f:
                await f.write(b"t")
            await sftp.symlink("target.txt", p("link"))
            await sftp.symlink(p("target.txt"), p("abslink"))
            emit("symlink", {"relative": os.readlink(p("link")), "absolute": rel(os.readlink(p("abslink"))),
                             "readlink": rel(await sftp.readlink(p("abslink"))),
                             "stray": sorted(n for n in os.listdir(DIR) if "link" in n)})

            emit("listing", sorted(n.filename for n in await sftp.readdir(p("private"))))

            async with sftp.open(p("a"), "wb") as f:
                await f.write(b"aaa")
            async with sftp.open(p("b"), "wb") as f:
                await f.write(b"bbbbbb")
            try:
                await sftp.posix_rename(p("a"), p("b"))
                res = "ok"
            except SFTPError as e:
                res = err(e)
            emit("posix-rename over a file", {"result": res, "b": on_disk("b").decode()})
            v = await sftp.statvfs(DIR)
            emit("statvfs", {"bsize": v.bsize, "frsize": v.frsize, "flag": v.flags, "namemax": v.namemax})
            async with sftp.open(p("b"), "rb") as f:
                v = await f.statvfs()
                emit("fstatvfs", {"bsize": v.bsize, "namemax": v.namemax})
            async with sftp.open(p("b"), "ab") as f:
                await f.fsync()
                emit("fsync", "ok")
            await sftp.link(p("b"), p("c"))
            emit("hardlink", {"links": os.stat(p("b")).st_nlink})
            emit("realpath", rel(await sftp.realpath(p("private/.."))))
            try:
                await sftp.remove(p("private"))
                res = "ok"
            except SFTPError as e:
                res = err(e)
            emit("remove of a directory", res)


def main():
    global DIR
    client, host, port, user, key, DIR = sys.argv[1:7]
    port = int(port)
    if client == "paramiko":
        run_paramiko(host, port, user, key)
    else:
        asyncio.run(run_asyncssh(host, port, user, key))


main()
