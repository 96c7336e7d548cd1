"""The platform's own account: the owner of what the platform books for itself (a phase's
reveal, SPEC §11.3) so that such bookings never act as, count against, or show up for a
person."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

#: Reserved: an operator must not give this name to a person.
PLATFORM_USERNAME = "yoyaku-platform"


def platform_account() -> AbstractBaseUser:
    """The platform's account, created on first use: active (the platform's own signed calls
    run as it), no usable password and no staff rights, so nobody can sign in as it and it
    may do only what a view grants it by name. Safe under concurrent first uses (the unique
    username decides)."""
    users = get_user_model()
    account = users.objects.filter(username=PLATFORM_USERNAME).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            account = users(username=PLATFORM_USERNAME, is_active=True)
            account.set_unusable_password()
            account.save()
    except IntegrityError:
        return users.objects.get(username=PLATFORM_USERNAME)
    return account
