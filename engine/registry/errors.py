"""The registry's errors as Confluent's REST API reports them: an HTTP status, a Schema
Registry error code and a message, with one constructor per error the registry raises."""

from __future__ import annotations

from engine.registry.compat import LEVELS


class RegistryError(Exception):
    """A Confluent-style error: HTTP status, Schema Registry error code and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are {', '.join(LEVELS)}",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def store_error(exc: BaseException) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {exc}")
