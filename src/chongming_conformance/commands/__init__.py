"""The console commands: ``chongming-conformance`` and the long runs it starts.

The part ``commands`` (docs/architecture.md, "The parts") owns

* :mod:`.cli` -- the console script (``check``, ``bench``, ``soak``, and ``attest``,
  ``verify``, ``diff``, ``badge`` from :mod:`chongming_conformance.attest.command`); it only
  parses and dispatches;
* :mod:`.bench` -- the scale probe (also ``python -m chongming_conformance.commands.bench``);
* :mod:`.soak` -- the campaign over fresh seeds.

Each command's logic is pytest-agnostic. It may import every part below it (``stress``,
``attest``, ``checks``, ``seam``, ``report``, ``strategies``, ``oracle``, ``controller``,
``faults``, ``protocol``); never ``suite`` or ``plugin``.
"""
