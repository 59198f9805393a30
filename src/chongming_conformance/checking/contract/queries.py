"""query() and counts(): reading many tasks, filters exact, order by instant."""

from __future__ import annotations

from typing import Any

from ...protocol.alphabet import METACHARACTERS, describe
from ...protocol.clauses import checks
from ...protocol.model import (
    TaskQuery,
    TaskStatus,
)
from ...strategies.samples import (
    snapshot,
)
from ._base import LIMIT_ZERO_REFUSALS, ContractBase, _ids

__all__ = ["QueryContract"]


class QueryContract(ContractBase):
    """The query / counts clauses of ``StoreContract``."""

    # ========================================================================================
    # query
    # ========================================================================================
    @checks("QUERY-ALL")
    def test_query_all__empty_store(self) -> None:
        assert list(self.store.query()) == [], "query() on an empty store"
        assert list(self.store.query(TaskQuery())) == [], "query(TaskQuery()) on an empty store"

    @checks("QUERY-ALL")
    def test_query_all__none_means_no_filter(self) -> None:
        snaps = [snapshot(f"t-{i}", created=i) for i in range(3)]
        self._create_all(*snaps)
        expected = ["t-0", "t-1", "t-2"]
        assert _ids(self.store.query()) == expected, "query()"
        assert _ids(self.store.query(None)) == expected, "query(None)"
        assert _ids(self.store.query(TaskQuery())) == expected, "query(TaskQuery())"
        assert list(self.store.query()) == snaps, "query() must return full snapshots"

    @checks("QUERY-ORDER-CREATED")
    def test_query_order_created__ascending_and_newest_first(self) -> None:
        self._create_all(*(snapshot(f"t-{i}", created=i) for i in (3, 0, 4, 1, 2)))
        asc = ["t-0", "t-1", "t-2", "t-3", "t-4"]
        assert self._query_ids() == asc, "ascending by created_at"
        assert self._query_ids(newest_first=True) == asc[::-1], "newest_first descending"

    @checks("QUERY-TIES-COMPLETE")
    def test_query_ties_complete__equal_created_at_all_returned(self) -> None:
        self._create_all(
            snapshot("z-tie", created=5),
            snapshot("a-tie", created=5),
            snapshot("m-tie", created=5),
            snapshot("first", created=1),
            snapshot("last", created=9),
        )
        got = self._query_ids()
        assert len(got) == 5, f"expected 5 tasks, got {got}"
        assert got[0] == "first" and got[-1] == "last", f"order around ties is wrong: {got}"
        assert set(got[1:4]) == {"z-tie", "a-tie", "m-tie"}, f"tied tasks missing: {got}"
        limited = self._query_ids(limit=3)
        assert limited[0] == "first" and set(limited[1:]) < {"z-tie", "a-tie", "m-tie"}, (
            f"limit=3 must give 'first' then two of the tied tasks, got {limited}"
        )

    @checks("QUERY-STATUSES")
    def test_query_statuses__exact_membership(self) -> None:
        statuses = [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.FAILED, TaskStatus.RUNNING]
        for i, status in enumerate(statuses):
            self.store.create(snapshot(f"t-{i}", status=status, created=i))
        self._assert_query(["t-1", "t-3"], "one status", statuses={TaskStatus.RUNNING})
        self._assert_query(
            ["t-1", "t-2", "t-3"],
            "two statuses",
            statuses={TaskStatus.RUNNING, TaskStatus.FAILED},
        )
        self._assert_query([], "no task is LOST", statuses={TaskStatus.LOST})

    @checks("QUERY-NAME-EXACT")
    def test_query_name_exact__no_prefix_or_case_folding(self) -> None:
        for i, name in enumerate(["build", "build-2", "Build", "rebuild", "build "]):
            self.store.create(snapshot(f"t-{i}", name=name, created=i))
        self._assert_query(["t-0"], "name must match exactly", name="build")
        self._assert_query([], "name match is case-sensitive", name="BUILD")
        self._assert_query(["t-4"], "trailing spaces count (no PAD SPACE)", name="build ")

    @checks("QUERY-NAME-EXACT")
    def test_query_name_exact__empty_name_is_a_filter(self) -> None:
        """``name=""`` filters for tasks named ``""``: a store testing the filter by truthiness
        (``if q.name:``) treats it as no filter and returns every task."""
        self._given(snapshot("t-0", name="build", created=0), snapshot("t-1", name="", created=1),
                    snapshot("t-2", name=" ", created=2))
        self._assert_query(["t-1"], "the empty name is a filter, not 'no filter'", name="")

    @checks("QUERY-NAME-PREFIX-LITERAL")
    def test_query_name_prefix_literal__wildcards_match_themselves(self) -> None:
        names = [
            "50%_done",
            "50x_done",
            "50%Xdone",
            "a\\b",
            "a\\\\b",
            "axb",
            "Report",
            "report-1",
            "",
        ]
        for i, name in enumerate(names):
            self.store.create(snapshot(f"t-{i}", name=name, created=i))

        def by_prefix(prefix: str) -> list[str]:
            return [names[int(t[2:])] for t in self._query_ids(name_prefix=prefix)]

        assert by_prefix("50%_") == ["50%_done"], "'%' and '_' must be literal"
        assert by_prefix("50%") == ["50%_done", "50%Xdone"], "'%' must be literal"
        assert by_prefix("50_") == [], "'_' must not match one character"
        assert by_prefix("a\\") == ["a\\b", "a\\\\b"], "'\\' must be literal"
        assert by_prefix("a\\\\") == ["a\\\\b"], "'\\\\' must be literal"
        assert by_prefix("rep") == ["report-1"], "name_prefix is case-sensitive"
        assert by_prefix("report-1") == ["report-1"], "a full name is its own prefix"
        assert by_prefix("") == names, "the empty prefix matches every name, even ''"

    @checks("QUERY-NAME-PREFIX-LITERAL")
    def test_query_name_prefix_literal__pattern_metacharacters(self) -> None:
        """Every metacharacter of LIKE, GLOB, regex and JSON path is literal in a prefix.

        Names ``a<c>z`` for each metacharacter ``c``, and decoys a pattern language would
        match instead (``a*`` under GLOB matches ``axz``; ``a.`` as a regex matches
        ``abz``; ``a%`` under LIKE matches everything starting with ``a``).
        """
        chars = sorted({c for group in METACHARACTERS.values() for c in group})
        decoys = ["a", "aa", "ab", "az", "abz", "axz", "aaz", "a\n", "ba*"]
        names = list(dict.fromkeys([*(f"a{c}z" for c in chars), *decoys]))
        for i, name in enumerate(names):
            self.store.create(snapshot(f"m-{i:02d}", name=name, created=i))
        prefixes = [*(f"a{c}" for c in chars), "a[b]", "a.*", "a[az]", "a(z|b)", "a\\"]
        for prefix in dict.fromkeys(prefixes):
            expected = [f"m-{i:02d}" for i, n in enumerate(names) if n.startswith(prefix)]
            classes = [k for k, group in METACHARACTERS.items() if any(c in prefix for c in group)]
            self._assert_query(
                expected, f"name_prefix={describe(prefix)} is literal ({', '.join(classes)} "
                "metacharacters match only themselves)", name_prefix=prefix)

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__pattern_metacharacters(self) -> None:
        """A tag holding a JSON-path, GLOB, LIKE or regex metacharacter matches only itself."""
        chars = sorted({c for group in METACHARACTERS.values() for c in group})
        tags = [*(f"t{c}x" for c in chars), "t", "tx", "t.x.y", "t[0]"]
        for i, tag in enumerate(tags):
            self.store.create(snapshot(f"m-{i:02d}", tags=frozenset({tag, "common"}),
                                       created=i))
        for i, tag in enumerate(tags):
            self._assert_query([f"m-{i:02d}"], f"tag={describe(tag)} matches only itself",
                               tag=tag)

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__empty_tag_is_a_filter(self) -> None:
        """``tag=""`` filters for tasks tagged ``""`` (a store testing ``if q.tag:`` returns
        every task); a task without tags, or with other tags, is not one of them."""
        self._given(snapshot("t-0", tags=frozenset({"io"}), created=0),
                    snapshot("t-1", tags=frozenset({"", "io"}), created=1),
                    snapshot("t-2", created=2),
                    snapshot("t-3", tags=frozenset({""}), created=3))
        self._assert_query(["t-1", "t-3"], "the empty tag is a filter, not 'no filter'", tag="")

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__no_substring_matches(self) -> None:
        tag_sets = [
            {"io"},
            {"ios"},
            {"bio"},
            {"i"},
            {"IO"},
            {"io,", "x"},
            {"a,", ",b"},
            {'say "hi"'},
            {"[x]"},
            {"io", "gpu"},
        ]
        for i, tags in enumerate(tag_sets):
            self.store.create(snapshot(f"t-{i}", tags=frozenset(tags), created=i))
        self._assert_query(["t-0", "t-9"], "'io' must not match ios/bio/IO/io,", tag="io")
        self._assert_query(["t-3"], "'i' must not match a longer tag", tag="i")
        self._assert_query(["t-4"], "tag match is case-sensitive", tag="IO")
        self._assert_query([], "',' is no task's tag (JSON separators!)", tag=",")
        self._assert_query([], "a quoted separator is no task's tag", tag='","')
        self._assert_query(["t-7"], "tags with quotes", tag='say "hi"')
        self._assert_query(["t-8"], "tags with brackets", tag="[x]")
        self._assert_query(["t-5"], "tags with a comma", tag="io,")
        self._assert_query([], "the empty tag is no task's tag", tag="")

    @checks("QUERY-BUCKETS")
    def test_query_buckets__membership_zero_and_none(self) -> None:
        for i, bucket in enumerate([0, 1, 2, None, 1, 10]):
            self.store.create(snapshot(f"t-{i}", bucket=bucket, created=i))
        self._assert_query(["t-1", "t-2", "t-4"], "bucket membership", buckets={1, 2})
        self._assert_query(["t-0"], "bucket 0 is a bucket (falsy trap)", buckets={0})
        self._assert_query([], "no task in bucket 3", buckets={3})
        assert "t-3" not in self._query_ids(buckets={0, 1, 2, 10}), "bucket None never matches"

    @checks("QUERY-PIPELINE")
    def test_query_pipeline__exact_run_id(self) -> None:
        for i, run in enumerate(["run-1", "run-10", None, "run-1", "RUN-1"]):
            self.store.create(snapshot(f"t-{i}", pipeline_run_id=run, created=i))
        self._assert_query(["t-0", "t-3"], "exact run id", pipeline_run_id="run-1")
        self._assert_query([], "no prefix matching", pipeline_run_id="run-")

    @checks("QUERY-PIPELINE")
    def test_query_pipeline__empty_run_id_is_a_filter(self) -> None:
        """``pipeline_run_id=""`` filters for the run id ``""``: neither "no filter" (a store
        testing it by truthiness, ``if q.pipeline_run_id:``) nor "no run id" (None)."""
        self._given(*(snapshot(f"t-{i}", pipeline_run_id=run, created=i)
                      for i, run in enumerate(["run-1", "", None, " ", ""])))
        self._assert_query(["t-1", "t-4"], "the empty run id is a filter, not 'no filter'",
                           pipeline_run_id="")
        self._assert_query(["t-0"], "a run id next to empty ones", pipeline_run_id="run-1")

    @checks("QUERY-LIMIT")
    def test_query_limit__first_n_in_requested_order(self) -> None:
        self._create_all(*(snapshot(f"t-{i}", created=i) for i in (2, 4, 0, 3, 1)))
        assert self._query_ids(limit=2) == ["t-0", "t-1"], "limit takes the oldest first"
        self._given_newest_first()
        assert self._query_ids(limit=2, newest_first=True) == ["t-4", "t-3"], (
            "with newest_first, limit takes the newest"
        )
        assert self._query_ids(limit=1) == ["t-0"]
        assert self._query_ids(limit=99) == ["t-0", "t-1", "t-2", "t-3", "t-4"]

    @checks("QUERY-LIMIT")
    def test_query_limit__applied_after_every_filter(self) -> None:
        """The limit takes the first N *matching* tasks: a task that fails the filter and
        comes first in the requested order must not use up the limit (LIMIT before WHERE).

        Each case writes two tasks with values no other case uses (so only they can match),
        the non-matching one first in the order the query asks for.
        """

        def case(k: str, status: TaskStatus) -> list[tuple[dict[str, Any], dict[str, Any],
                                                           dict[str, Any]]]:
            return [  # (fields of the task that fails the filter, of the one that passes, filter)
                ({"name": f"x{k}"}, {"name": f"y{k}"}, {"name": f"y{k}"}),
                ({"name": f"n{k}"}, {"name": f"p{k}-1"}, {"name_prefix": f"p{k}-"}),
                ({"tags": frozenset({f"a{k}"})}, {"tags": frozenset({f"b{k}"})},
                 {"tag": f"b{k}"}),
                ({"bucket": 100 + len(k)}, {"bucket": 200 + len(k)},
                 {"buckets": frozenset({200 + len(k)})}),
                ({"pipeline_run_id": f"r{k}"}, {"pipeline_run_id": f"s{k}"},
                 {"pipeline_run_id": f"s{k}"}),
                ({"status": TaskStatus.PENDING}, {"status": status},
                 {"statuses": frozenset({status})}),
            ]

        clock = 0
        for newest_first, k, status in ((False, "o", TaskStatus.FAILED),
                                        (True, "nn", TaskStatus.CANCELLED)):
            for n, (fails, passes, filters) in enumerate(case(k, status)):
                ids = {"fails": f"f-{k}{n}", "passes": f"p-{k}{n}"}
                order = ("fails", "passes") if not newest_first else ("passes", "fails")
                for role in order:  # created in this order: "fails" comes first when read
                    clock += 1
                    self.store.create(snapshot(ids[role], created=clock,
                                               **(fails if role == "fails" else passes)))
                # The filter itself must work before its limit can be judged: a filter the
                # store ignores fails its own clause here (a knock-on), not QUERY-LIMIT.
                self._given_filter([ids["passes"]], **filters)
                got = self._query_ids(limit=1, newest_first=newest_first, **filters)
                assert got == [ids["passes"]], (
                    f"query({filters}, limit=1, newest_first={newest_first}) returned {got}; "
                    f"the one matching task is {ids['passes']!r}, and {ids['fails']!r}, which "
                    "does not match, comes before it in that order: the limit must apply "
                    "after the filter"
                )

    @checks("QUERY-LIMIT")
    def test_query_limit__zero_returns_nothing_or_is_refused(self) -> None:
        """``limit=0``: the controller never passes it and the original guide does not say
        what it means, so a store may refuse it (StoreError or ValueError). A store that
        answers still keeps to the limit: no task -- 0 read as "no limit" returns them all.
        Either way the store answers the next query."""
        self._create_all(snapshot("t-0"), snapshot("t-1", created=1))
        try:
            got = self._query_ids(limit=0)
        except LIMIT_ZERO_REFUSALS:
            got = []
        assert got == [], f"limit=0 returned {got}: a store that answers it returns no task"
        assert self._query_ids(limit=1) == ["t-0"], "limit=1 after limit=0"

    @checks("QUERY-FILTERS-COMBINE")
    def test_query_filters_combine__all_filters_anded(self) -> None:
        rows = [
            ("t-0", TaskStatus.RUNNING, "etl-a", {"io"}, 1, "run-1"),
            ("t-1", TaskStatus.RUNNING, "etl-b", {"io"}, 2, "run-1"),
            ("t-2", TaskStatus.FAILED, "etl-c", {"io"}, 1, "run-1"),
            ("t-3", TaskStatus.RUNNING, "web-a", {"io"}, 1, "run-1"),
            ("t-4", TaskStatus.RUNNING, "etl-d", {"ios"}, 1, "run-1"),
            ("t-5", TaskStatus.RUNNING, "etl-e", {"io"}, 1, "run-2"),
            ("t-6", TaskStatus.RUNNING, "etl-f", {"io", "x"}, 1, "run-1"),
        ]
        for i, (tid, status, name, tags, bucket, run) in enumerate(rows):
            self.store.create(
                snapshot(
                    tid,
                    status=status,
                    name=name,
                    tags=frozenset(tags),
                    bucket=bucket,
                    pipeline_run_id=run,
                    created=i,
                )
            )
        # Each filter alone first: one the store ignores (or gets wrong) is its own
        # clause's failure, and this test's a knock-on of it.
        def but(left_out: str) -> list[str]:
            return [row[0] for row in rows if row[0] != left_out]

        alone: list[tuple[dict[str, Any], list[str]]] = [
            ({"statuses": frozenset({TaskStatus.RUNNING})}, but("t-2")),
            ({"name_prefix": "etl-"}, but("t-3")),
            ({"tag": "io"}, but("t-4")),
            ({"buckets": frozenset({1})}, but("t-1")),
            ({"pipeline_run_id": "run-1"}, but("t-5")),
            ({"name": "etl-a"}, ["t-0"]),
        ]
        for one, expected in alone:
            self._given_filter(expected, **one)
        got = self._query_ids(
            statuses={TaskStatus.RUNNING},
            name_prefix="etl-",
            tag="io",
            buckets={1},
            pipeline_run_id="run-1",
        )
        assert got == ["t-0", "t-6"], f"combined filters: {got}"
        assert self._query_ids(name="etl-a", statuses={TaskStatus.FAILED}) == [], "AND, not OR"
        self._given_newest_first()
        assert self._query_ids(tag="io", buckets={1}, newest_first=True, limit=2) == [
            "t-6",
            "t-5",
        ]

    @checks("QUERY-EMPTY-SET-MATCHES-NOTHING")
    def test_query_empty_set_matches_nothing__statuses_and_buckets(self) -> None:
        self._create_all(snapshot("t-0", bucket=1),
                         snapshot("t-1", status=TaskStatus.RUNNING, created=1))
        # A non-empty set must filter at all before the empty one is judged: a store that
        # ignores the filter returns everything for the empty set too, and that is the
        # filter's clause (QUERY-STATUSES, QUERY-BUCKETS), this test's a knock-on.
        self._given_filter(["t-0"], statuses=frozenset({TaskStatus.PENDING}))
        self._given_filter(["t-0"], buckets=frozenset({1}))
        assert self._query_ids(statuses=frozenset()) == [], "statuses=frozenset() matches none"
        assert self._query_ids(buckets=frozenset()) == [], "buckets=frozenset() matches none"
        assert self._query_ids(statuses=None, buckets=None) == ["t-0", "t-1"], "None = no filter"

    # ========================================================================================
    # the adversarial alphabet, in every run: each value matches itself and nothing else
    # ========================================================================================
    @checks("QUERY-NAME-EXACT")
    def test_query_name_exact__adversarial_values_match_only_themselves(self) -> None:
        made = self._create_adversarial()
        for value in made.values():
            expected = [i for i, v in made.items() if v == value]
            self._assert_query(expected, "names compare code point by code point", name=value)

    @checks("QUERY-NAME-PREFIX-LITERAL")
    def test_query_name_prefix_literal__adversarial_prefixes(self) -> None:
        made = self._create_adversarial()
        prefixes = [p for v in made.values() for p in (v, v[:-1]) if p]
        for prefix in dict.fromkeys(prefixes):
            expected = [i for i, v in made.items() if v.startswith(prefix)]
            self._assert_query(expected, "a prefix compares code points", name_prefix=prefix)

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__adversarial_values_match_only_themselves(self) -> None:
        made = self._create_adversarial()
        for value in made.values():
            expected = [i for i, v in made.items() if v == value]
            self._assert_query(expected, "tags compare code point by code point", tag=value)

    @checks("QUERY-PIPELINE")
    def test_query_pipeline__adversarial_values_match_only_themselves(self) -> None:
        made = self._create_adversarial()
        for value in made.values():
            expected = [i for i, v in made.items() if v == value]
            self._assert_query(
                expected, "run ids compare code point by code point", pipeline_run_id=value
            )

    # ========================================================================================
    # counts
    # ========================================================================================
    @checks("COUNTS-ALL-KEYS")
    def test_counts_all_keys__empty_store_all_zero(self) -> None:
        got = dict(self.store.counts())
        assert got == dict.fromkeys(TaskStatus, 0), f"counts() of an empty store: {got}"

    @checks("COUNTS-PER-STATUS", "COUNTS-ALL-KEYS")
    def test_counts_per_status__tracks_creates_and_saves(self) -> None:
        for i, status in enumerate(
            [TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.FAILED, TaskStatus.PENDING]
        ):
            self.store.create(snapshot(f"t-{i}", status=status, created=i))
        expected = dict.fromkeys(TaskStatus, 0)
        expected.update({TaskStatus.RUNNING: 2, TaskStatus.FAILED: 1, TaskStatus.PENDING: 1})
        assert dict(self.store.counts()) == expected, "counts() after creates"
        self.store.save(snapshot("t-0", status=TaskStatus.SUCCEEDED, version=2), expect_version=1)
        expected[TaskStatus.RUNNING] = 1
        expected[TaskStatus.SUCCEEDED] = 1
        got = dict(self.store.counts())
        assert got == expected, f"counts() after a save changed a status: {got}"
        assert all(isinstance(k, TaskStatus) for k in got), "counts() keys must be TaskStatus"
