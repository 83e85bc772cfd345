"""``PowerrigSlot``: one rig slot as a labgrid resource (what a place's exporter publishes)."""
from __future__ import annotations

import attr
from labgrid.factory import target_factory
from labgrid.resource.common import Resource

_str = attr.validators.instance_of(str)


def _rails(v) -> list:
    """A list, or "12V,3V3": the coordinator carries parameters as scalars, so an exporter names them so."""
    if isinstance(v, str):
        return [r.strip() for r in v.split(",") if r.strip()]
    return [str(r) for r in v]


@target_factory.reg_resource
@attr.s(eq=False)
class PowerrigSlot(Resource):
    """An interposer and the drive in its slot.

    port: the interposer's serial port on the exporter, or the ``rfc2217://host:port`` its ser2net
    serves; drive_serial: the serial number writes are guarded with; controller: the drive's
    controller on its drive host; drive_host: ``ssh://user@host:port`` of that host ("" when it is
    the worker itself); rails: the rails the interposer measures ("12V,3V3" in an exporter's YAML); form_factor: U.2, E1.S, M.2 ...
    """
    port = attr.ib(validator=_str)
    drive_serial = attr.ib(default="", validator=_str)
    controller = attr.ib(default="/dev/nvme0", validator=_str)
    drive_host = attr.ib(default="", validator=_str)
    rails = attr.ib(default=attr.Factory(list), converter=_rails)
    form_factor = attr.ib(default="", validator=_str)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.avail = True            # a static description: available once the place is acquired
