"""Path converters: every id in every API path is checked by the URL itself, so a malformed id
(a stray byte, NUL, 4 KB of text) is an unknown path (JSON 404) and never reaches a query.

`PATH_CONVERTER_SCHEMAS` feeds drf-spectacular (`PATH_CONVERTER_OVERRIDES`), so the schema's
path parameters carry the very pattern the router applies.
"""

from __future__ import annotations

from typing import Any

from django.urls import register_converter

#: Ids the platform makes: uuid4 as 32 lowercase hex characters (SPEC §2).
HEX_ID_PATTERN = "[0-9a-f]{32}"
#: A Life's uuid, which a client may choose (SPEC §6): 32 hex digits, any case, with or without
#: the dashes of the 8-4-4-4-12 form (at most 36 characters).
LIFE_UUID_PATTERN = (
    "[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
)

#: A stored file's id (a positive 64-bit integer; at most 18 digits, so it always fits).
FILE_ID_PATTERN = "[1-9][0-9]{0,17}"


class HexIdConverter:
    regex = HEX_ID_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class LifeUuidConverter:
    """Accepts every spelling the booking accepts and hands the view the stored form."""

    regex = LIFE_UUID_PATTERN

    def to_python(self, value: str) -> str:
        return value.replace("-", "").lower()

    def to_url(self, value: str) -> str:
        return value


class FileIdConverter:
    regex = FILE_ID_PATTERN

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int | str) -> str:
        return str(value)


register_converter(HexIdConverter, "hexid")
register_converter(FileIdConverter, "fileid")
register_converter(LifeUuidConverter, "life_uuid")

PATH_CONVERTER_SCHEMAS: dict[str, dict[str, Any]] = {
    "hexid": {"type": "string", "pattern": f"^{HEX_ID_PATTERN}$"},
    "fileid": {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    "life_uuid": {"type": "string", "pattern": f"^{LIFE_UUID_PATTERN}$", "maxLength": 36},
}
