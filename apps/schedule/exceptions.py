"""Errors of the schedule app (SPEC §6)."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError, InvalidRequest


class InvalidSchedule(InvalidRequest):
    code = "invalid_schedule"
    default_message = "The schedule is invalid."


class TooLate(DomainError):
    code = "too_late"
    http_status = HTTPStatus.NOT_ACCEPTABLE
    default_message = "The time is too close to now (or in the past)."


class ResourceConflict(DomainError):
    code = "resource_conflict"
    http_status = HTTPStatus.CONFLICT
    default_message = "Another reservation of this resource overlaps this one."


class LifeExists(DomainError):
    code = "life_exists"
    http_status = HTTPStatus.CONFLICT
    default_message = "A Life with this life_uuid exists with a different body."


class PlanStarted(DomainError):
    code = "plan_started"
    http_status = HTTPStatus.CONFLICT
    default_message = "This plan has already started; it can no longer be changed."


class UnknownTopic(InvalidRequest):
    code = "unknown_topic"
    default_message = "No task handler is registered for this topic."


class TooManyLives(DomainError):
    code = "too_many_lives"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Too many Lives that are not finished yet."


class ScheduledRequestTooLarge(DomainError):
    code = "request_too_large"
    http_status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    default_message = "A scheduled request body is at most 10 MB."
