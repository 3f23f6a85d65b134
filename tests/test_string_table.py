"""StringTable predicates: evaluated once per distinct string among the rows asked about."""

from __future__ import annotations

import numpy as np

from traceclass.model.strings import StringTable


def test_mask_and_map_evaluate_only_the_strings_in_use() -> None:
    table = StringTable(["aten::mm", "aten::add", "volta_sgemm", "unused_a", "unused_b"])
    seen: list[str] = []

    def is_gemm(s: str) -> bool:
        seen.append(s)
        return "mm" in s or "gemm" in s

    codes = np.array([0, 2, 2, -1, 0, 1], dtype=np.int32)
    assert table.mask(codes, is_gemm).tolist() == [True, True, True, False, True, False]
    assert sorted(seen) == ["aten::add", "aten::mm", "volta_sgemm"]  # once each, never the unused ones

    seen.clear()
    lengths = table.map(codes, lambda s: seen.append(s) or len(s), np.int32)
    assert lengths.tolist() == [8, 11, 11, 0, 8, 9]  # -1 -> fn("")
    assert sorted(seen) == ["", "aten::add", "aten::mm", "volta_sgemm"]
    assert lengths.dtype == np.int32


def test_mask_of_no_rows() -> None:
    table = StringTable(["a"])
    assert table.mask(np.zeros(0, dtype=np.int32), lambda s: True).tolist() == []
    assert table.map(np.zeros(0, dtype=np.int32), len).tolist() == []
