"""Fault injection for the stress harness: the proxy, the network seam and the nemesis.

Jepsen's split of a test: the *client* is the stress harness's workers and their
recorded calls, the *nemesis* is here, and the *checker* is the linearizability
checker (``stress.lincheck``) with the fault run's verdicts
(``stress.scenarios.fault_workload``). docs/faults.md explains all three to a
backend author.

* :class:`FaultProxy` (``proxy``) -- a TCP proxy with Toxiproxy's toxics
  (``toxics``: latency, timeout, reset_peer, limit_data; down/up), per direction
  and per connection;
* :class:`Network` (``network``) -- the seam a store's ``make_shared_store(network=...)``
  routes its workers' connections through;
* :class:`Nemesis` and :func:`plan` (``nemesis``) -- the seeded, replayable fault
  sequence applied during the workload;
* :class:`Deployment` and :class:`Action` (``deployment``) -- the seam through which a
  store's module offers the faults only its author can cause (crash and restart its
  server, fail over), scheduled by the nemesis with ``--chongming-faults=deployment``.
"""

from .applied import Applied, read_nemesis_log
from .deployment import Action, Deployment, DeploymentError
from .nemesis import NETWORK_KINDS, PAUSE_KINDS, Fault, Nemesis, plan
from .network import NETWORK_KEYWORD, Network, takes_network
from .proxy import FaultProxy
from .toxics import Latency, LimitData, ResetPeer, Timeout, Toxic

__all__ = [
    "NETWORK_KEYWORD",
    "NETWORK_KINDS",
    "PAUSE_KINDS",
    "Action",
    "Applied",
    "Deployment",
    "DeploymentError",
    "Fault",
    "FaultProxy",
    "Latency",
    "LimitData",
    "Nemesis",
    "Network",
    "ResetPeer",
    "Timeout",
    "Toxic",
    "plan",
    "read_nemesis_log",
    "takes_network",
]
