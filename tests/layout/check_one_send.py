#!/usr/bin/env python3
"""privsep sends and receives every message one way: only fdpass.c calls the socket calls
(sendmsg, recvmsg), and no file of the part calls send, sendto, recv or recvfrom, whose callers
would each have to remember EINTR and MSG_NOSIGNAL. The calls come from `nm -u` on the part's
objects, so a call hidden behind a macro counts too.

Usage: check_one_send.py NM OBJECT..."""
import os
import subprocess
import sys

SOCKET_CALLS = {"send", "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "sendmmsg", "recvmmsg"}
ALLOWED = {"fdpass.c": {"sendmsg", "recvmsg"}}


def undefined(nm, obj):
    out = subprocess.run([nm, "-u", obj], capture_output=True, text=True, check=True).stdout
    # "U name" or "U name@GLIBC_2.2.5"
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def main():
    nm, objs = sys.argv[1], sys.argv[2:]
    bad, seen = [], set()
    for obj in objs:
        src = os.path.basename(obj).rsplit(".o", 1)[0]  # fdpass.c.o -> fdpass.c
        calls = undefined(nm, obj) & SOCKET_CALLS
        seen |= calls
        extra = calls - ALLOWED.get(src, set())
        if extra:
            bad.append("%s calls %s" % (src, ", ".join(sorted(extra))))
    if not any(os.path.basename(o).startswith("fdpass.c") for o in objs) or not {"sendmsg", "recvmsg"} <= seen:
        print("FAILED the check saw no fdpass.c object calling sendmsg and recvmsg (objects: %s)" % objs)
        return 1
    for b in bad:
        print("FAILED %s: send through privsep_send_fds() and receive through privsep_recv_fds() (fdpass.h)" % b)
    if not bad:
        print("ok     only fdpass.c sends and receives (%d objects)" % len(objs))
    return 1 if bad else 0


sys.exit(main())
