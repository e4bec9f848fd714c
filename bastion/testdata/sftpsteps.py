"""One SFTP session driven a step at a time, for tests that change
postern's state between two requests of the same session (a rule, a grant):
bastion/sftp_virtualroot_test.go.

    /usr/bin/python3 -W ignore sftpsteps.py CLIENT HOST PORT USER KEY

CLIENT is paramiko or asyncssh. The script connects, prints {"ready": true},
then reads one JSON step a line from stdin and prints one JSON line for
each: {"ok": RESULT} or {"error": CLASS, "code": SFTP_STATUS, "text": MESSAGE}.
It ends at the end of stdin. Steps:

    {"op": "listdir", "path": P}          the names, sorted, without . and ..
    {"op": "stat", "path": P}             {"mode": ..., "size": ...}
    {"op": "makedirs", "path": P}         asyncssh only
    {"op": "write", "path": P, "data": S} open for writing, write, close
    {"op": "chmod", "path": P, "mode": M}
    {"op": "put", "local": L, "path": P}  the client's own put (paramiko
                                          stats the file after it)
"""

import asyncio
import json
import sys


def say(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


def steps():
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def run_paramiko(host, port, user, key):
    import paramiko

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port=port, username=user, key_filename=key,
                   allow_agent=False, look_for_keys=False)
    sftp = client.open_sftp()
    say({"ready": True})
    for s in steps():
        op, p = s["op"], s.get("path")
        try:
            if op == "listdir":
                result = sorted(sftp.listdir(p))
            elif op == "stat":
                a = sftp.stat(p)
                result = {"mode": a.st_mode, "size": a.st_size}
            elif op == "write":
                with sftp.open(p, "wb") as f:
                    f.write(s["data"].encode())
                result = True
            elif op == "chmod":
                sftp.chmod(p, s["mode"])
                result = True
            elif op == "put":
                sftp.put(s["local"], p)
                result = True
            else:
                raise ValueError("unknown step " + op)
            say({"ok": result})
        except IOError as e:
            # paramiko raises the status as an IOError: errno for the
            # codes it maps, the message as the text.
            say({"error": type(e).__name__, "code": e.errno, "text": str(e)})
    client.close()


async def run_asyncssh(host, port, user, key):
    import asyncssh

    async with asyncssh.connect(host, port=port, username=user, client_keys=[key],
                                known_hosts=None, agent_path=None) as conn:
        async with conn.start_sftp_client() as sftp:
            say({"ready": True})
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    break
                if not line.strip():
                    continue
                s = json.loads(line)
                op, p = s["op"], s.get("path")
                try:
                    if op == "listdir":
                        result = sorted(n for n in await sftp.listdir(p) if n not in (".", ".."))
                    elif op == "stat":
                        a = await sftp.stat(p)
                        result = {"mode": a.permissions, "size": a.size}
                    elif op == "makedirs":
                        await sftp.makedirs(p)
                        result = await sftp.isdir(p)
                    elif op == "write":
                        async with sftp.open(p, "wb") as f:
                            await f.write(s["data"].encode())
                        result = True
                    elif op == "chmod":
                        await sftp.chmod(p, s["mode"])
                        result = True
                    elif op == "put":
                        await sftp.put(s["local"], p, preserve=True)
                        result = True
                    else:
                        raise ValueError("unknown step " + op)
                    say({"ok": result})
                except asyncssh.SFTPError as e:
                    say({"error": type(e).__name__, "code": e.code, "text": e.reason})


def main():
    client, host, port, user, key = sys.argv[1:6]
    if client == "paramiko":
        run_paramiko(host, int(port), user, key)
    else:
        asyncio.run(run_asyncssh(host, int(port), user, key))


if __name__ == "__main__":
    main()
