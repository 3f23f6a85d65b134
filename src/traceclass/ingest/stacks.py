"""Shared builders for sampled-profile readers: distinct frames, the stack trie, sample rows.

Readers hand over stacks as one flat array of frame ids plus per-stack offsets (root first);
the trie is grown one depth level at a time with a hash factorization per level, so the cost
is one vectorized pass per level, never a Python step per sample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceclass.model import Frames, Samples, StackNodes, StringTable

_KEY_SHIFT = np.int64(1) << np.int64(31)
_I16_MAX = np.iinfo(np.int16).max
#: At or below this many stacks still active at a level, they are walked one by one: a
#: vectorized level pass costs about as much as this many dict steps.
_FEW_STACKS = 16


class FrameInterner:
    """Distinct (function, file, line) triples -> dense frame ids."""

    def __init__(self, strings: StringTable) -> None:
        self.strings = strings
        self._index: dict[tuple[int, int, int], int] = {}
        self.function: list[int] = []
        self.file: list[int] = []
        self.line: list[int] = []

    def add(self, function: str, file: str | None, line: int | None) -> int:
        fn = self.strings.intern(function)
        fi = self.strings.intern(file) if file else -1
        ln = int(line) if line is not None and line >= 0 else -1
        key = (fn, fi, ln)
        fid = self._index.get(key)
        if fid is None:
            fid = len(self.function)
            self._index[key] = fid
            self.function.append(fn)
            self.file.append(fi)
            self.line.append(ln)
        return fid

    def __len__(self) -> int:
        return len(self.function)

    def table(self) -> Frames:
        return Frames.build(len(self.function), function=self.function, file=self.file, line=self.line)


class TrieBuilder:
    """Stack trie grown level by level; equal (parent, frame) pairs always map to one node."""

    def __init__(self) -> None:
        self._index: dict[int, int] = {}
        self._frame: list[np.ndarray] = []
        self._parent: list[np.ndarray] = []
        self._depth: list[np.ndarray] = []
        self.size = 0

    def insert(self, parents: np.ndarray, frames: np.ndarray, depth: int) -> np.ndarray:
        """Node id per (parent node, frame) pair, creating nodes that do not exist yet."""
        n = len(parents)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if n <= _FEW_STACKS:  # a factorization costs more than a few dict steps
            return np.fromiter((self.insert_path(p, frames[k:k + 1], depth) for k, p in
                                enumerate(parents.tolist())), dtype=np.int64, count=n)
        keys = parents.astype(np.int64) * _KEY_SHIFT + frames.astype(np.int64)
        codes, uniq = pd.factorize(keys, sort=False)
        index = self._index
        ids = np.fromiter((index.get(k, -1) for k in uniq.tolist()), dtype=np.int64, count=len(uniq))
        new = np.flatnonzero(ids < 0)
        if len(new):
            ids[new] = np.arange(self.size, self.size + len(new))
            index.update(zip(uniq[new].tolist(), ids[new].tolist()))
            first = np.full(len(uniq), -1, dtype=np.int64)
            # the first row of each new key supplies its parent and frame
            first[codes[::-1]] = np.arange(n - 1, -1, -1)
            rows = first[new]
            self._frame.append(frames[rows].astype(np.int32))
            self._parent.append(parents[rows].astype(np.int32))
            self._depth.append(np.full(len(new), min(depth, _I16_MAX), dtype=np.int16))
            self.size += len(new)
        return ids[codes]

    def insert_path(self, parent: int, frames: np.ndarray, depth: int) -> int:
        """Leaf node of one stack's remaining ``frames`` (the first at ``depth``) under
        ``parent``, one dict step per frame: for the few stacks still active deep down, where
        a vectorized pass per level would cost far more than the frames themselves."""
        index = self._index
        new_frame: list[int] = []
        new_parent: list[int] = []
        new_depth: list[int] = []
        node = parent
        for k, f in enumerate(frames.tolist()):
            key = node * (1 << 31) + f
            nxt = index.get(key)
            if nxt is None:
                nxt = self.size
                index[key] = nxt
                new_frame.append(f)
                new_parent.append(node)
                new_depth.append(min(depth + k, _I16_MAX))
                self.size += 1
            node = nxt
        if new_frame:
            self._frame.append(np.asarray(new_frame, dtype=np.int32))
            self._parent.append(np.asarray(new_parent, dtype=np.int32))
            self._depth.append(np.asarray(new_depth, dtype=np.int16))
        return node

    def table(self) -> StackNodes:
        if not self._frame:
            return StackNodes.empty()
        return StackNodes.build(
            self.size,
            frame=np.concatenate(self._frame),
            parent=np.concatenate(self._parent),
            depth=np.concatenate(self._depth),
        )


def insert_stacks(trie: TrieBuilder, flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Leaf node of each stack (``flat`` holds the stacks' frame ids root first, back to back).

    Empty stacks get -1.
    """
    n = len(lengths)
    leaf = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(flat) == 0:
        return leaf
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    # longest first: the stacks still active at a level are then a prefix of this order
    order = np.argsort(-lengths, kind="stable")
    sorted_len = lengths[order]
    sorted_off = offsets[order]
    cur = np.full(n, -1, dtype=np.int64)
    max_len = int(sorted_len[0])
    active_counts = np.searchsorted(-sorted_len, -np.arange(1, max_len + 1), side="right")
    for level in range(max_len):
        k = int(active_counts[level])
        if k == 0:
            break
        if k <= _FEW_STACKS:
            # the rest is a few long stacks: walk each to its end instead of a pass per level
            for j in range(k):
                rest = flat[sorted_off[j] + level: sorted_off[j] + sorted_len[j]]
                cur[j] = trie.insert_path(int(cur[j]), rest, level)
            break
        frames = flat[sorted_off[:k] + level]
        cur[:k] = trie.insert(cur[:k], frames, level)
    leaf[order] = cur
    return leaf


def strip_frames(flat: np.ndarray, lengths: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove the elements where ``drop`` holds from stacks given as (flat, lengths)."""
    if not drop.any():
        return flat, lengths
    stack_of = np.repeat(np.arange(len(lengths)), lengths)
    removed = np.bincount(stack_of[drop], minlength=len(lengths))
    return flat[~drop], lengths - removed


def aggregate_samples(
    thread: np.ndarray, node: np.ndarray, count: np.ndarray, weight_ns: np.ndarray
) -> Samples:
    """One Samples row per distinct (thread, leaf node), counts and weights summed."""
    n = len(node)
    if n == 0:
        return Samples.empty()
    key = thread.astype(np.int64) * _KEY_SHIFT + (node.astype(np.int64) + 1)
    codes, uniq = pd.factorize(key, sort=True)
    m = len(uniq)
    cnt = np.bincount(codes, weights=count, minlength=m)
    wt = _exact_sum(codes, weight_ns, m)
    return Samples.build(
        m,
        thread=(uniq // _KEY_SHIFT).astype(np.int32),
        node=(uniq % _KEY_SHIFT - 1).astype(np.int32),
        count=np.rint(cnt).astype(np.int64),
        weight_ns=wt,
    )


def run_length_samples(
    thread: np.ndarray, node: np.ndarray, weight_ns: np.ndarray
) -> Samples:
    """Consecutive equal (thread, node, weight) samples merged into one row, order kept.

    py-spy repeats a stack for every sample a thread spends in one place; merging runs keeps
    the sampled order (exports reproduce it) at a fraction of the rows.
    """
    n = len(node)
    if n == 0:
        return Samples.empty()
    change = np.ones(n, dtype=bool)
    change[1:] = (thread[1:] != thread[:-1]) | (node[1:] != node[:-1]) | (weight_ns[1:] != weight_ns[:-1])
    starts = np.flatnonzero(change)
    counts = np.diff(np.r_[starts, n])
    return Samples.build(
        len(starts),
        thread=thread[starts],
        node=node[starts],
        count=counts,
        weight_ns=weight_ns[starts] * counts,
    )


def _exact_sum(codes: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Integer sums per group, exact beyond float64's 2**53."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) and int(np.abs(values).max()) * len(values) < (1 << 53):
        return np.rint(np.bincount(codes, weights=values, minlength=m)).astype(np.int64)
    out = np.zeros(m, dtype=np.int64)
    np.add.at(out, codes, values)
    return out


def interval_nodes(
    trie: TrieBuilder, frame: np.ndarray, parent: np.ndarray, depth: np.ndarray
) -> np.ndarray:
    """Trie node of each timed frame, from its frame and its parent's node (parent -1: root)."""
    n = len(frame)
    node = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return node
    order = np.argsort(depth, kind="stable")
    d_sorted = depth[order]
    bounds = np.r_[0, np.flatnonzero(np.diff(d_sorted)) + 1, n]
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if hi - lo <= _FEW_STACKS:
            # a thin level (a deep evented stack has one interval per level): plain dict
            # steps, no numpy pass per level
            d = int(d_sorted[lo])
            for r in order[lo:hi].tolist():
                p = int(parent[r])
                pn = int(node[p]) if p >= 0 else -1
                if p >= 0 and pn < 0:
                    raise ValueError("parent deeper than child: intervals not in depth order")
                node[r] = trie.insert_path(pn, frame[r:r + 1], d)
            continue
        rows = order[lo:hi]
        p = parent[rows]
        pnode = np.where(p >= 0, node[np.maximum(p, 0)], -1)
        if (pnode[p >= 0] < 0).any():
            raise ValueError("parent deeper than child: intervals not in depth order")
        node[rows] = trie.insert(pnode, frame[rows], int(d_sorted[lo]))
    return node


def self_times(start: np.ndarray, end: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Duration minus the children's durations (children nest and do not overlap)."""
    dur = np.maximum(end - start, 0).astype(np.int64)
    has = parent >= 0
    child = np.zeros(len(dur), dtype=np.int64)
    if has.any():
        child = _exact_sum(parent[has].astype(np.int64), dur[has], len(dur))
    return np.maximum(dur - child, 0)


def interval_samples(
    thread_row: np.ndarray, node: np.ndarray, self_ns: np.ndarray
) -> Samples:
    """Samples-equivalent rows: each (thread, stack) weighted by the self time spent there.

    ``count`` is the number of timed calls that contributed, not a sample count.
    """
    keep = self_ns > 0
    return aggregate_samples(
        thread_row[keep], node[keep], np.ones(int(keep.sum()), dtype=np.int64), self_ns[keep]
    )
