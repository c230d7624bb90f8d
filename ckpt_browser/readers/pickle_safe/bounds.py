"""After reading: bound the whole object graph. Shared references can make a small pickle
expand to 10**30 paths (billion laughs), so the graph is measured once, iteratively, and cut
when it is too deep or too wide."""

from __future__ import annotations

import itertools

from ckpt_browser.readers.pickle_safe.limits import PRUNED_NODES, elided
from ckpt_browser.standins import Opaque, UnsafeCall


def _children(node):
    kind = type(node)
    if kind is dict:
        return itertools.chain.from_iterable(node.items())
    if kind is list or kind is tuple:
        return iter(node)
    if kind is Opaque:
        return iter((node.args, node.state))
    if kind is UnsafeCall:
        return iter((node.args,))
    return None


_BRANCHES = (dict, list, tuple, Opaque, UnsafeCall)


def measure(root, max_depth: int, max_paths: int) -> tuple[int, int]:
    """(height, paths) of an object graph, iteratively; shared objects are measured once,
    cycles are cut. Stops early once height > max_depth or paths > max_paths."""
    if type(root) not in _BRANCHES:
        return 0, 1
    done: dict[int, tuple[int, int]] = {}
    frames = [(root, _children(root), [0, 1])]
    onpath = {id(root)}
    while frames:
        node, kids, acc = frames[-1]
        for child in kids:
            if type(child) not in _BRANCHES:
                acc[1] += 1
                continue
            got = done.get(id(child))
            if got is None:
                if id(child) in onpath:
                    continue
                if len(frames) > max_depth:
                    return len(frames) + 1, acc[1]
                frames.append((child, _children(child), [0, 1]))
                onpath.add(id(child))
                break
            acc[0] = max(acc[0], got[0])
            acc[1] += got[1]
        else:
            frames.pop()
            onpath.discard(id(node))
            result = (acc[0] + 1, acc[1])
            if result[1] > max_paths:
                return result
            done[id(node)] = result
            if frames:
                parent = frames[-1][2]
                parent[0] = max(parent[0], result[0])
                parent[1] += result[1]
            else:
                return result
    return 0, 1


def pruned(obj, depth: int, budget: list | None = None, onpath: set | None = None):
    """A copy of obj cut at `depth` levels and PRUNED_NODES nodes, leaves included (so shared
    references cannot multiply). Recursion is bounded by `depth`."""
    budget = [PRUNED_NODES] if budget is None else budget
    onpath = set() if onpath is None else onpath
    budget[0] -= 1
    kind = type(obj)
    if kind not in _BRANCHES:
        return obj
    if depth <= 0 or budget[0] <= 0 or id(obj) in onpath:
        return elided()
    onpath.add(id(obj))

    def sub(x):
        return pruned(x, depth - 1, budget, onpath)

    def each(items):
        for x in items:
            if budget[0] <= 0:
                return
            yield x
    try:
        if kind is dict:
            return {k: sub(v) for k, v in each(obj.items())}
        if kind is list:
            return [sub(x) for x in each(obj)]
        if kind is tuple:
            return tuple(sub(x) for x in each(obj))
        if kind is Opaque:
            return Opaque(obj.qualname, sub(obj.args), sub(obj.state))
        return UnsafeCall(obj.qualname, sub(obj.args))
    finally:
        onpath.discard(id(obj))
