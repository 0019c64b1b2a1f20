"""What the Python bench scripts share: the release binary (built when missing), tools installed
with apt-get when missing, and a daemon started on a free port."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/railyard")


def ensure(tool=None, package=None):
    """Build target/release/railyard if it is missing; install `package` if `tool` is missing."""
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "--release", "-p", "railyard"], cwd=ROOT, check=True)
    if tool and not shutil.which(tool):
        subprocess.run(["apt-get", "install", "-y", "-qq", package or tool], check=True)


def serve(config, *args, env=None):
    """`railyard serve --config CONFIG --listen 127.0.0.1:0 ARGS...` (`env`: added variables, the
    log level at warn unless given); the process and the port it listens on."""
    p = subprocess.Popen([BIN, "serve", "--config", config, "--listen", "127.0.0.1:0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, **{"RAILYARD_LOG": "warn", **(env or {})}))
    # The gRPC and admin listeners, when configured, are announced before the main one.
    while True:
        line = p.stdout.readline().decode()
        if not line:
            raise SystemExit("the daemon did not start")
        if line.startswith("railyard listening on http://"):
            return p, int(line.rsplit(":", 1)[1])
