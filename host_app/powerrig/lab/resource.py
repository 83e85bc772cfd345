"""``PowerrigSlot``: one rig slot as a labgrid resource (what a place's exporter publishes)."""
from __future__ import annotations

import attr
from labgrid.factory import target_factory
from labgrid.resource.common import Resource

from powerrig.core.errors import PowerrigError
from powerrig.dut.commands import UnsafeArgument, check_device
from powerrig.dut.remote import drive_host
from powerrig.interposer.rfc2217 import check_url

_str = attr.validators.instance_of(str)


def _refused_as_value_error(inst, attribute, v, check) -> None:
    """A string, passed by powerrig's own check; its one-line refusal as attrs' ValueError."""
    _str(inst, attribute, v)
    try:
        check(v)
    except PowerrigError as e:
        raise ValueError(f"PowerrigSlot.{attribute.name}: {e}") from None


def _drive_host(inst, attribute, v) -> None:
    """An exporter on another machine publishes this: checked by the door to other programs (an
    ``ssh://-oProxyCommand=...`` or ``?LocalCommand=`` would run a program on the worker)."""
    _refused_as_value_error(inst, attribute, v, drive_host)


def _port(inst, attribute, v) -> None:
    """A serial port on the exporter, or rfc2217://host:port with pyserial's options (?ign_set_control
    for ser2net), checked by the link's own check."""
    _refused_as_value_error(inst, attribute, v, lambda u: u.startswith("rfc2217://") and check_url(u))


def _device(inst, attribute, v) -> None:
    _str(inst, attribute, v)
    try:
        check_device(f"PowerrigSlot.{attribute.name}", v)
    except UnsafeArgument as e:
        raise ValueError(str(e)) from None


def _rails(v) -> list:
    """A list, or "12V,3V3": the coordinator carries parameters as scalars, so an exporter names them so."""
    if isinstance(v, str):
        return [r.strip() for r in v.split(",") if r.strip()]
    return [str(r) for r in v]


@target_factory.reg_resource
@attr.s(eq=False)
class PowerrigSlot(Resource):
    """An interposer and the drive in its slot.

    port: the interposer's serial port on the exporter, or the ``rfc2217://host:port?ign_set_control``
    its ser2net serves; drive_serial: the serial number writes are guarded with; controller: the drive's
    controller on its drive host; drive_host: ``ssh://user@host:port`` of that host ("" when it is
    the worker itself); rails: the rails the interposer measures ("12V,3V3" in an exporter's YAML); form_factor: U.2, E1.S, M.2 ...
    """
    port = attr.ib(validator=_port)
    drive_serial = attr.ib(default="", validator=_str)
    controller = attr.ib(default="/dev/nvme0", validator=_device)
    drive_host = attr.ib(default="", validator=_drive_host)
    rails = attr.ib(default=attr.Factory(list), converter=_rails)
    form_factor = attr.ib(default="", validator=_str)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.avail = True            # a static description: available once the place is acquired
