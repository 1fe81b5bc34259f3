"""Ray's ``py_executable`` on the CPU platform: hand this worker to the prefork server (see
``coolsampler.worker.prefork``) and stand in for it until it ends.

Run by Ray as ``python -S -I prefork_client.py -u .../default_worker.py ARGS...``: standard library
only, so it starts in milliseconds. It sends its argv, environment, working directory and standard
streams; the server forks a pre-imported process that becomes the worker. This process relays
signals to it and exits as it does. Without a server it runs the worker itself, the ordinary way.
"""

import json
import os
import signal
import socket
import sys

SOCKET_ENV = "COOLSAMPLER_PREFORK_SOCKET"
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def run_ordinarily() -> None:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])


def main() -> None:
    path = os.environ.get(SOCKET_ENV)
    if not path:
        run_ordinarily()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        run_ordinarily()
    body = json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(sock, [len(body).to_bytes(8, "big") + body], [0, 1, 2])
    replies = sock.makefile("r")
    first = replies.readline().split()
    if len(first) != 2 or first[0] != "pid":
        sys.exit("prefork client: the server did not start the worker")
    child = int(first[1])

    def relay(sig: int, _frame: object) -> None:
        try:
            os.kill(child, sig)
        except ProcessLookupError:
            pass

    for sig in RELAYED:
        signal.signal(sig, relay)
    last = replies.readline().split()
    if len(last) == 2 and last[0] == "exit":
        sys.exit(int(last[1]))
    if len(last) == 2 and last[0] == "signal":
        sig = int(last[1])
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for these: they are default
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    # the server went away without a word: do not leave its worker behind
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sys.exit(1)


if __name__ == "__main__":
    main()
