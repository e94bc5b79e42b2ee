"""A real IMAP server for tests: Debian's Dovecot on a loopback port, with a throwaway
configuration, one user and Maildir folders under a temporary folder. Messages are delivered
with IMAP APPEND, as a mail client files them, while a sync runs if the test wants."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
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

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


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
    process = subprocess.Popen([DOVECOT, "-F", "-c", str(config)])
    server = Dovecot(folder, port, process)
    deadline = time.monotonic() + 20
    while True:
        try:
            server.client().logout()
            return server
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log = folder / "dovecot.log"
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
