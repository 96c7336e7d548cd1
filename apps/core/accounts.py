"""The platform's own account: the owner of what the platform books for itself (a phase's
reveal, SPEC §11.3) so that such bookings never act as, count against, or show up for a
person."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

#: Reserved: an operator must not give this name to a person.
PLATFORM_USERNAME = "yoyaku-platform"


class PlatformAccountTaken(RuntimeError):
    """The reserved name is held by an account a person could use (a usable password, staff
    or superuser rights): the platform never adopts it."""


def platform_account() -> AbstractBaseUser:
    """The platform's account, created on first use: active (the platform's own signed calls
    run as it), no usable password and no staff rights, so nobody can sign in as it and it
    may do only what a view grants it by name. Safe under concurrent first uses (the unique
    username decides). Raises PlatformAccountTaken when an account of that name exists that
    a person could sign in with or that has staff rights (made before the platform's first
    use, or changed since): the platform books nothing as it, and says so in the log."""
    users = get_user_model()
    account = users.objects.filter(username=PLATFORM_USERNAME).first()
    if account is not None:
        if account.has_usable_password() or account.is_staff or account.is_superuser:
            raise PlatformAccountTaken(
                f"The account {PLATFORM_USERNAME!r} has a usable password or staff rights: "
                "the platform does not use it. Rename that account; the name is reserved."
            )
        return account
    try:
        with transaction.atomic():
            account = users(username=PLATFORM_USERNAME, is_active=True)
            account.set_unusable_password()
            account.save()
    except IntegrityError:
        return users.objects.get(username=PLATFORM_USERNAME)
    return account
