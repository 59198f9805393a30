"""Saves that change one field, and every read that field can affect.

A generated save that draws a whole new snapshot changes every field at once, so a store
that refreshes a derived copy only when "its" field changes passes it: tag rows that carry
``created_at`` for ordering, rewritten only when the tags change; a counts table updated
only when the status does; a name index rebuilt only on a rename. A real caller (the
controller) changes one or two fields per save and keeps the rest. This module names the
fields a save may change alone, builds that save, and lists the reads that must then agree
with the model: every filter built from the task's old and new values, in both orders, and
``counts()``. The properties (``test_single_field_save``) and the state machine
(``save_one_field``) both use it.
"""

from __future__ import annotations

from dataclasses import replace

from ..protocol.model import TaskQuery, TaskSnapshot, TaskStatus

__all__ = ["SAVED_FIELDS", "case_of", "look_alikes", "one_field_changed", "order_of",
           "reads_after"]

#: The fields a save writes and a caller may change alone. Not ``task_id`` (the key), not
#: ``status_version`` (every save raises it), not the lease (a save keeps the stored lease:
#: SAVE-KEEPS-LEASE).
SAVED_FIELDS: tuple[str, ...] = (
    "name", "status", "created_at", "updated_at", "started_at", "finished_at", "tags",
    "bucket", "pipeline_run_id", "progress", "failure", "heartbeat_at",
)


def case_of(field: str) -> str:
    """The input case (``cases.py``) a save changing only ``field`` is."""
    return f"save: one field changed: {field}"


def one_field_changed(
    current: TaskSnapshot, field: str, donor: TaskSnapshot, version: int
) -> TaskSnapshot | None:
    """``current`` with ``field`` taken from ``donor`` and ``status_version`` set to
    ``version``, everything else kept (the stored lease included); None when ``donor``
    holds the same value (then the save would change no field)."""
    value = getattr(donor, field)
    if value == getattr(current, field):
        return None
    return replace(current, status_version=version, **{field: value})


def reads_after(old: TaskSnapshot, new: TaskSnapshot, newest_first: bool | None = None
                ) -> list[TaskQuery]:
    """Every query whose answer the save from ``old`` to ``new`` can change: each filter
    built from either value (status, name, its first character as a prefix, each tag, the
    bucket, the run id), unfiltered, oldest first or newest first as ``newest_first`` says,
    or each both ways when it is None (``created_at`` orders every one of them; a limit is
    QUERY-LIMIT's own question, asked elsewhere).

    The checks ask one order per save and alternate it from save to save (``order_of``):
    a stale copy of ``created_at`` (tag rows that carry it, rewritten only when the tags
    change) misorders a filter's answer either way, and a store that keeps a second index
    for the other order still meets that order on the next turn of the same field. Both
    orders on every save cost the single-field checks half their time (issue 43)."""
    filters: list[dict[str, object]] = [{}]
    for snap in (old, new):
        filters += [{"statuses": frozenset({snap.status})}, {"name": snap.name},
                    {"name_prefix": snap.name[:1]}]
        filters += [{"tag": tag} for tag in sorted(snap.tags)]
        if snap.bucket is not None:
            filters.append({"buckets": frozenset({snap.bucket})})
        if snap.pipeline_run_id is not None:
            filters.append({"pipeline_run_id": snap.pipeline_run_id})
    unique = list({repr(sorted(f.items(), key=lambda kv: kv[0])): f for f in filters}.values())
    orders = (False, True) if newest_first is None else (newest_first,)
    return [TaskQuery(**f, newest_first=newest)  # type: ignore[arg-type]
            for f in unique for newest in orders]


def order_of(turn: int) -> bool:
    """The order (``newest_first``) of the reads after a check's ``turn``-th single-field
    save: alternate saves read in alternate orders. The checks start their field rotation
    at a drawn field (the state machine) or their turns at a drawn parity (the property),
    so every field meets both orders over a run."""
    return turn % 2 == 1


def look_alikes(tasks: list[TaskSnapshot]) -> list[TaskSnapshot]:
    """A running task beside each terminal one, its id a look-alike: the terminal id with a
    character added (``LIKE id || '%'``, a prefix) and with its case swapped (a
    case-insensitive collation). A prune that deletes by pattern reaches them; ids already
    taken are skipped. (Prune's inputs live here with the other "what a caller sends" ones.)"""
    taken = {t.task_id for t in tasks}
    out: list[TaskSnapshot] = []
    for t in tasks:
        if not t.status.is_terminal:
            continue
        for twin in (t.task_id + "0", t.task_id.swapcase()):
            if twin not in taken:
                taken.add(twin)
                out.append(replace(t, task_id=twin, status=TaskStatus.RUNNING))
    return out
