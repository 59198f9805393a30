"""One module per broken key-value store of ``kv_stores`` (issue 31, item 4), each binding
``make_store`` and ``make_shared_store`` -- so a variant is a spec like any other::

    PYTHONPATH=tests/stress chongming-conformance soak \\
        kv_variant_stores.index_after_record:make_store --for 10m --no-hypothesis
    PYTHONPATH=tests/stress pytest --chongming-store=kv_variant_stores.index_after_record:make_store

Needs Redis (``CHONGMING_TEST_REDIS``). Catch rates: docs/benchmarks.md.
"""
