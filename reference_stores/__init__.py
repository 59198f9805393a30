"""Reference TaskStore implementations, written to be read and copied.

Each module is one store with a zero-argument ``make_store()`` so the kit can
run it exactly as it runs a third party's::

    pytest --chongming-store=reference_stores.sqlite:make_store

* ``memory``   -- in-process dict; the simplest correct store (one process).
* ``sqlite``   -- stdlib sqlite3; file or ``:memory:``; safe across processes.
* ``postgres`` -- psycopg 3 + pool; the multi-node template.
* ``jsonfile`` -- the third-party example: one JSON file, one process only.
"""
