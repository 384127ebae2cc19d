"""Several hosts in one view: each asked over ssh for `sparkctl status --json`
(``ssh``), the answers kept with their age (``poller``), the hosts to ask (``hosts``), each
lane's last bench from the shared tracking store (``lastbench``), and a host's status
rebuilt for the dashboard's read-only view (``report``)."""

from sparkctl.services.fleet.hosts import fleet_hosts
from sparkctl.services.fleet.poller import (
    ENGINE_DOWN,
    ENGINE_ERROR,
    LIVE,
    UNREACHABLE,
    WAITING,
    FleetPoller,
    FleetReport,
    HostView,
)
from sparkctl.services.fleet.ssh import Answer, ask_status

__all__ = ["Answer", "ENGINE_DOWN", "ENGINE_ERROR", "FleetPoller", "FleetReport", "HostView", "LIVE",
           "UNREACHABLE", "WAITING", "ask_status", "fleet_hosts"]
