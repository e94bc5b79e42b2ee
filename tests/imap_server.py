"""A real IMAP server for tests: Debian's Dovecot on a loopback port, with a throwaway
configuration, one user and Maildir folders under a temporary folder. Messages are delivered
with IMAP APPEND, as a mail client files them, while a sync runs if the test wants."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from imapclient import IMAPClient

DOVECOT = "/usr/sbin/dovecot"
USER = "alice"
PASSWORD = "correct horse battery staple"
MISSING = "Dovecot is missing: IMAP tests skip (apt-get install -y dovecot-imapd)."

CONFIG = """\
base_dir = {folder}/run
state_dir = {folder}/state
log_path = {folder}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 1
# A refused password is answered at once and never slows the next attempt: a test counts
# attempts, and a real server's delays would hide them.
auth_failure_delay = 0
login_trusted_networks = 127.0.0.0/8
{users}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {folder}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={folder}/home/%u
}}
mail_location = maildir:~/Maildir
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"""


def available() -> bool:
    return os.path.exists(DOVECOT)


@dataclass
class Dovecot:
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def client(self) -> IMAPClient:
        client = IMAPClient("127.0.0.1", port=self.port, ssl=False, timeout=10)
        client.login(USER, PASSWORD)
        return client

    def deliver(self, folder: str, messages: list[bytes]) -> None:
        """File the messages in `folder` (created if need be) in one connection."""
        client = self.client()
        try:
            if not client.folder_exists(folder):
                client.create_folder(folder)
            for message in messages:
                client.append(folder, message)
        finally:
            client.logout()

    def restart(self) -> None:
        """Stop the server (its connections drop) and start it again on the same mail."""
        self._end()
        self.process = subprocess.Popen([DOVECOT, "-F", "-c", str(self.folder / "dovecot.conf")])
        _wait_until_up(self)

    def stop(self) -> None:
        self._end()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _end(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_dovecot(port: int) -> Dovecot:
    """Dovecot in the foreground as a child of this process; its log is dovecot.log."""
    folder = Path(tempfile.mkdtemp(prefix="subspace-imap-"))
    for name in ("run", "state", "home"):
        (folder / name).mkdir()
    (folder / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
    if os.geteuid() == 0:
        # Root may not own a mailbox: Dovecot's own user does, and its helpers run as theirs.
        owner = pwd.getpwnam("dovecot")
        uid, gid, users = owner.pw_uid, owner.pw_gid, ""
        folder.chmod(0o755)
        os.chown(folder / "home", uid, gid)
    else:
        me = pwd.getpwuid(os.getuid())
        uid, gid = me.pw_uid, me.pw_gid
        users = (
            f"default_internal_user = {me.pw_name}\ndefault_login_user = {me.pw_name}\n"
            f"default_internal_group = {me.pw_name}"
        )
    config = folder / "dovecot.conf"
    config.write_text(CONFIG.format(folder=folder, port=port, uid=uid, gid=gid, users=users))
    server = Dovecot(folder, port, subprocess.Popen([DOVECOT, "-F", "-c", str(config)]))
    _wait_until_up(server)
    return server


def _wait_until_up(server: Dovecot) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            server.client().logout()
            return
        except OSError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                log = server.folder / "dovecot.log"
                text = log.read_text() if log.exists() else ""
                server.stop()
                raise RuntimeError(f"Dovecot did not start: {text[-2000:]}") from None
            time.sleep(0.1)


def message(n: int, *, subject: str | None = None, body: str | None = None) -> bytes:
    """A plain message numbered `n`, with a Message-ID of its own."""
    subject = subject or f"Harbour report {n}"
    body = body or f"The ferry number {n} left the quay on time with its cargo manifest."
    return (
        f"From: Port Office <port@example.org>\r\nTo: Alice <alice@example.org>\r\n"
        f"Subject: {subject}\r\nDate: Mon, 7 Dec 2026 09:{n % 60:02d}:00 +0000\r\n"
        f"Message-ID: <report-{n}@example.org>\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"\r\n{body}\r\n"
    ).encode()


class Relay:
    """A TCP relay in front of a server, whose `drop()` cuts every connection through it at
    once, as a network or a proxy does, without the server noticing first."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.pairs.append((client, server))
            for one, other in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(one, other), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
            except OSError:
                break
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def drop(self) -> None:
        pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def close(self) -> None:
        self.listener.close()
        self.drop()
