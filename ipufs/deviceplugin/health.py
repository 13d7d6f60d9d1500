# Whether an IPU is fit to give to a pod, from what its STATUS register
# says (docs/kubernetes.md, "Health"). Kubernetes knows two states,
# "Healthy" and "Unhealthy" (the device plugin API's constants); the reason
# is ipufs's own, for the log.
from __future__ import annotations

from dataclasses import dataclass

from ipufs.client.status import (
    STATUS_EXCEPTION,
    STATUS_ICU_UNRESPONSIVE,
    STATUS_LINK_DOWN,
    STATUS_READY,
    ExceptionCause,
    Status,
)

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

# Exceptions that record a condition STATUS shows by a bit of its own: the
# device is fit again once that bit clears, even while the record is held.
_CONDITIONS = {ExceptionCause.LINK: STATUS_LINK_DOWN, ExceptionCause.ICU: STATUS_ICU_UNRESPONSIVE}


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool
    reason: str = ""  # why not, when not

    @property
    def state(self) -> str:
        """The device plugin API's word for it."""
        return HEALTHY if self.healthy else UNHEALTHY


FIT = Health(True)


def of_status(status: Status) -> Health:
    """Unhealthy while the device is not ready, its link is down, its ICU
    does not answer, or an exception is held that nobody has cleared (by
    CMD_EXC_CLEAR or a reset); healthy otherwise."""
    bits = status.bits
    if not bits & STATUS_READY:
        return Health(False, "not ready")
    if bits & STATUS_LINK_DOWN:
        return Health(False, "link down")
    if bits & STATUS_ICU_UNRESPONSIVE:
        return Health(False, "ICU not answering")
    if bits & STATUS_EXCEPTION and status.error_state not in _CONDITIONS:
        return Health(False, f"exception held ({status.cause}): clear it or reset the IPU")
    return FIT


def unreachable(reason: str) -> Health:
    """The daemon serving the IPU cannot be reached: nothing can use it."""
    return Health(False, reason)
