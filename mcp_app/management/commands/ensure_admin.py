"""``manage.py ensure_admin``: make sure a superuser exists and print how to log in.

Run by ``python3 dev.py run`` on every start. The first run creates the user ("admin" by
default) with a random password and stores both in ``VAR_DIR/admin-credentials`` (mode 0600);
later runs print that file again. If the user exists but the file is gone, the password is
reset and the file rewritten, so the printed credentials always work.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

CREDENTIALS_FILE_NAME = "admin-credentials"
# 24 bytes of randomness as 32 URL-safe characters: easy to copy, impossible to guess.
PASSWORD_BYTES = 24


def credentials_path() -> Path:
    return Path(settings.VAR_DIR) / CREDENTIALS_FILE_NAME


def read_credentials(path: Path) -> dict[str, str]:
    """Parse the ``key: value`` lines of a credentials file (missing file: empty dict)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    return values


def write_credentials(path: Path, *, username: str, password: str) -> None:
    """Write the file readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # O_CREAT's mode does not apply to a file that already exists.
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as stream:
        stream.write(f"username: {username}\npassword: {password}\n")


class Command(BaseCommand):
    help = "Create the admin superuser if needed and print its credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="default: %(default)s")

    def handle(self, *args: object, **options: object) -> None:
        username = str(options["username"])
        path = credentials_path()
        user_model = get_user_model()
        user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
        stored = read_credentials(path)

        if user is not None and stored.get("username") == username and stored.get("password"):
            password = stored["password"]
            if not user.check_password(password):
                # Someone changed the password on purpose (admin, changepassword): keep it.
                self.stderr.write(
                    f"The password of '{username}' was changed after {path} was written; "
                    f"delete that file and run again to reset it."
                )
                return
            action = "exists"
        else:
            password = secrets.token_urlsafe(PASSWORD_BYTES)
            with transaction.atomic():
                # Written inside the transaction: if the file cannot be written, no user or
                # password change is committed that nobody could log in with.
                if user is None:
                    user = user_model._default_manager.create_superuser(
                        **{user_model.USERNAME_FIELD: username}, email="", password=password
                    )
                    action = "created"
                else:
                    self._reset(user, password)
                    action = "password reset (credentials file was missing)"
                write_credentials(path, username=username, password=password)

        self.stdout.write(
            f"Admin user '{username}' {action}. Log in with:\n"
            f"  username: {username}\n"
            f"  password: {password}\n"
            f"  (stored in {path})"
        )

    @staticmethod
    def _reset(user: AbstractBaseUser, password: str) -> None:
        if not user.is_active or not getattr(user, "is_superuser", True):
            raise CommandError(
                f"user '{user.get_username()}' exists but is not an active superuser; "
                "refusing to reset its password"
            )
        user.set_password(password)
        user.save(update_fields=["password"])
