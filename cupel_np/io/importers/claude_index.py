"""The Claude Code reader's record index in compact arrays (docs/importing.md, "Memory").

A record's ``uuid`` (and its ``parentUuid``) is kept as a 128-bit value, two ``uint64``, when it
is a canonical UUID (lowercase ``8-4-4-4-12`` hex, so that the values sort as the strings do);
any other id (and the ``name:n`` fallback) goes to a small side table. The lookup from key to
row is a sorted array (``searchsorted``) plus a small dict of the rows added since it was last
merged. Every other field is a column of fixed width, so a record costs tens of bytes, not the
hundreds a Python object per record costs.
"""

from __future__ import annotations

import re
from array import array

import numpy as np

_CANON = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_M64 = (1 << 64) - 1
#: rows gathered in the dict before they are merged into the sorted arrays
_PENDING = 1 << 12
#: rows gathered as tuples before they are moved into the columns
_BATCH = 4096

#: a key: a canonical UUID as its 128-bit value, any other id as its string
Key = int | str


def key_of(uid: str) -> Key:
    """``uid`` as an index key: its 128-bit value when canonical, else the string itself."""
    return int(uid.replace("-", ""), 16) if len(uid) == 36 and _CANON.match(uid) else uid


def uuid_of(key: Key) -> str:
    """The id string of a key (the inverse of ``key_of``)."""
    if isinstance(key, str):
        return key
    h = f"{key:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Keys:
    """Key -> row: canonical keys in sorted ``uint64`` arrays (high half, low half, row) plus a
    dict of the latest rows; other ids in a dict. The first row added under a key is kept."""

    def __init__(self) -> None:
        self.shi = np.empty(0, np.uint64)
        self.slo = np.empty(0, np.uint64)
        self.srow = np.empty(0, np.int64)
        self.pending: dict[int, int] = {}
        self.odd: dict[str, int] = {}
        self.limit = _PENDING
        self.bits, self.mask = bytearray(1), 7

    def get(self, key: Key) -> int:
        """The row of ``key``, -1 when absent."""
        if isinstance(key, str):
            return self.odd.get(key, -1)
        r = self.pending.get(key)
        if r is not None:
            return r
        h = (key ^ (key >> 64)) & self.mask
        if not self.bits[h >> 3] & (1 << (h & 7)):  # surely absent (most lookups: a new record)
            return -1
        shi, hi = self.shi, np.uint64(key >> 64)
        i = int(shi.searchsorted(hi))
        if i == len(shi) or shi[i] != hi:
            return -1
        j = int(shi.searchsorted(hi, "right"))
        lo = np.uint64(key & _M64)
        k = i + int(self.slo[i:j].searchsorted(lo))
        return int(self.srow[k]) if k < j and self.slo[k] == lo else -1

    def add(self, key: Key, row: int) -> None:
        """Add ``key`` (absent, as ``get`` says) at ``row``."""
        if isinstance(key, str):
            self.odd[key] = row
            return
        self.pending[key] = row
        if len(self.pending) >= self.limit:
            self.merge()

    def merge(self) -> None:
        """Move the pending rows into the sorted arrays (sorted by high half, then low half)."""
        if not self.pending:
            return
        ks = list(self.pending)
        hi = np.array([k >> 64 for k in ks], np.uint64)
        lo = np.array([k & _M64 for k in ks], np.uint64)
        rows = np.fromiter(self.pending.values(), np.int64, len(ks))
        self.pending = {}
        o = np.lexsort((lo, hi))
        hi, lo, rows = hi[o], lo[o], rows[o]
        at = _lower(self.shi, self.slo, hi, lo)
        self.shi = np.insert(self.shi, at, hi)
        self.slo = np.insert(self.slo, at, lo)
        self.srow = np.insert(self.srow, at, rows)
        self.limit = max(_PENDING, len(self.shi) >> 4)
        self._filter()

    def _filter(self) -> None:
        """A one-hash Bloom filter of the sorted keys, 8-16 bits a key: ``get`` searches the
        arrays only for the few absent keys whose bit is set."""
        m = 1 << max(10, (len(self.shi) * 8).bit_length())
        h = (self.shi ^ self.slo) & np.uint64(m - 1)  # the two halves mixed, as in ``get``
        bits = np.zeros(m >> 3, np.uint8)
        np.bitwise_or.at(
            bits, (h >> np.uint64(3)).astype(np.int64), (np.uint8(1) << (h & np.uint64(7)).astype(np.uint8))
        )
        self.bits, self.mask = bytearray(bits.tobytes()), m - 1

    def find(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The rows of canonical keys given as halves (-1 where absent)."""
        self.merge()
        n = len(self.shi)
        if not n:
            return np.full(len(hi), -1, np.int64)
        at = _lower(self.shi, self.slo, hi, lo)
        c = np.minimum(at, n - 1)
        return np.where((at < n) & (self.shi[c] == hi) & (self.slo[c] == lo), self.srow[c], -1)


def _lower(shi: np.ndarray, slo: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Where each key (``hi``, ``lo``) goes in the keys (``shi``, ``slo``) sorted by high half,
    then low half: the first place not less than it (a binary search on the low halves within
    each run of equal high halves, all keys at once)."""
    a, b = np.searchsorted(shi, hi, "left"), np.searchsorted(shi, hi, "right")
    while True:
        act = a < b
        if not act.any():
            return a
        mid = (a + b) // 2
        go = slo[np.minimum(mid, len(slo) - 1)] < lo
        a = np.where(act & go, mid + 1, a)
        b = np.where(act & ~go, mid, b)


class Columns:
    """Fixed-width columns, appended one record at a time (``array``), read as NumPy arrays."""

    def __init__(self) -> None:
        self.hi, self.lo = array("Q"), array("Q")  # the record's key (0, 0 for an odd id)
        self.phi, self.plo = array("Q"), array("Q")  # its parent's key when canonical
        self.flags = array("B")
        self.sess, self.side = array("i"), array("i")  # codes into ``names`` (-1: main chain)
        self.tkey = array("q")
        self.api = array("q")  # -1: none
        self.sig = array("q")
        self.msg = array("q")  # the message id's hash, 0: none
        self.n_parts = array("i")
        self.fi, self.line, self.offset = array("i"), array("i"), array("q")  # -1: parts kept

    def np(self, name: str) -> np.ndarray:
        """Column ``name`` as a NumPy array (sharing its memory)."""
        a = getattr(self, name)
        return np.frombuffer(a, dtype=np.dtype(a.typecode)) if len(a) else np.empty(0, np.dtype(a.typecode))


#: the columns in the order ``Index.add`` gathers them
_ORDER = (
    "hi",
    "lo",
    "phi",
    "plo",
    "flags",
    "sess",
    "side",
    "tkey",
    "api",
    "sig",
    "msg",
    "n_parts",
    "fi",
    "line",
    "offset",
)

#: flag bits (``TRESULT``: a user record whose content is only ``tool_result`` blocks)
BOUNDARY, REWOUND, PCANON, PODD, ODD, TRESULT = 1, 2, 4, 8, 16, 32


def _put_parent(parent: str | None, phi: array, plo: array, odd: dict[int, str], row: int) -> int:
    """Append ``parent``'s key to ``phi`` / ``plo`` (odd ids to ``odd``); its flag bits."""
    if parent is None:
        phi.append(0)
        plo.append(0)
        return 0
    k = key_of(parent)
    if isinstance(k, str):
        odd[row] = k
        phi.append(0)
        plo.append(0)
        return PODD
    phi.append(k >> 64)
    plo.append(k & _M64)
    return PCANON


class Index:
    """The record index: one row a record kept (its first copy), in ``Columns``, its key in
    ``keys``; the chain records that are not messages (``via``: key -> parent key) likewise;
    session and sub-agent ids as codes into ``names``; with ``keep_parts`` each row's parts."""

    def __init__(self, keep_parts: bool) -> None:
        self.cols = Columns()
        self.keys = Keys()
        self.odd_uid: dict[int, str] = {}
        self.odd_parent: dict[int, str] = {}
        self.vkeys = Keys()
        self.vphi, self.vplo, self.vflag = array("Q"), array("Q"), array("B")
        self.vodd: dict[int, str] = {}
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.parts: list | None = [] if keep_parts else None
        self.n = 0
        self.buf: list[tuple] = []
        self.last: tuple[str, Key] = ("", "")  # the last record's id and key

    def code(self, s: str) -> int:
        """``s``'s code in ``names``."""
        c = self.codes.get(s)
        if c is None:
            c = self.codes[s] = len(self.names)
            self.names.append(s)
        return c

    def add_via(self, link: str, parent: str | None) -> None:
        """A chain record that is not a message (the first one read under its id is kept)."""
        k = key_of(link)
        if self.vkeys.get(k) >= 0:
            return
        row = len(self.vflag)
        self.vkeys.add(k, row)
        self.vflag.append(_put_parent(parent, self.vphi, self.vplo, self.vodd, row))

    def add(self, uid: str, key: Key, parent: str | None, fields: tuple, parts: list, loc) -> None:
        """A new record's row (``key`` = ``key_of(uid)``): ``fields`` = (session, side, time key, boundary, message id,
        API tokens, signature, tool results only); ``loc`` = (file index, offset, line) or None. Rows are gathered
        as tuples and moved into the columns in batches (``flush``)."""
        row = self.n
        self.n += 1
        self.keys.add(key, row)
        sess, side, tkey, boundary, msg_id, api, sig, tresult = fields
        if isinstance(key, str):
            self.odd_uid[row] = key
            hi = lo = 0
            flags = ODD
        else:
            hi, lo, flags = key >> 64, key & _M64, 0
        if tresult:
            flags |= TRESULT
        if parent is None:
            phi = plo = 0
        else:
            pk = self.last[1] if parent == self.last[0] else key_of(parent)  # mostly the record before
            if isinstance(pk, str):
                self.odd_parent[row] = pk
                phi = plo = 0
                flags |= PODD
            else:
                phi, plo = pk >> 64, pk & _M64
                flags |= PCANON
        fi, offset, line = loc if loc is not None else (-1, 0, 0)
        self.buf.append(
            (
                hi,
                lo,
                phi,
                plo,
                flags | BOUNDARY if boundary else flags,
                self.code(sess),
                -1 if side is None else self.code(side),
                tkey,
                -1 if api is None else api,
                sig,
                (hash(msg_id) or 1) if msg_id else 0,  # equal ids, equal hashes
                len(parts),
                fi,
                line,
                offset,
            )
        )
        self.last = (uid, key)
        if len(self.buf) >= _BATCH:
            self.flush()
        if self.parts is not None:
            self.parts.append(parts)

    def flush(self) -> None:
        """Move the gathered rows into the columns."""
        if self.buf:
            for name, col in zip(_ORDER, zip(*self.buf, strict=True), strict=True):
                getattr(self.cols, name).extend(col)
            self.buf = []

    def sig(self, row: int) -> int:
        """The content signature of ``row`` (gathered or in the columns)."""
        done = len(self.cols.sig)
        return self.cols.sig[row] if row < done else self.buf[row - done][9]

    def release(self, *names: str) -> None:
        """Drop columns no longer needed (their memory goes with the last view of them)."""
        for name in names:
            setattr(self.cols, name, array(getattr(self.cols, name).typecode))

    def uid(self, row: int) -> str:
        """The id string of ``row``."""
        s = self.odd_uid.get(row)
        if s is not None:
            return s
        return uuid_of((self.cols.hi[row] << 64) | self.cols.lo[row])

    def _parent_key(self, row: int, phi, plo, flags, odd: dict[int, str]) -> Key | None:
        f = flags[row]
        if f & PCANON:
            return (int(phi[row]) << 64) | int(plo[row])
        return odd[row] if f & PODD else None

    def parents(self) -> np.ndarray:
        """Each row's parent row (-1: none in the log), through the chain records that are not
        messages: a parent that is one of them is replaced by the first ancestor that is a
        message record (a cycle among them ends the walk)."""
        self.flush()
        c = self.cols
        flags, phi, plo = c.np("flags"), c.np("phi"), c.np("plo")
        par = np.full(self.n, -1, np.int32)
        canon = np.flatnonzero(flags & PCANON)
        for a in range(0, len(canon), 1 << 16):  # in slices: the search's temporaries stay small
            rows = canon[a : a + (1 << 16)]
            par[rows] = self.keys.find(phi[rows], plo[rows])
        for row, s in self.odd_parent.items():
            par[row] = self.keys.get(s)
        nv = len(self.vflag)
        if nv:
            self._through(par, phi, plo, flags, nv)
        self.keys = self.vkeys = Keys()  # no more lookups: the rows are placed
        return par

    def _through(self, par: np.ndarray, phi: np.ndarray, plo: np.ndarray, flags: np.ndarray, nv: int) -> None:
        self.vkeys.merge()
        miss = np.flatnonzero(((flags & (PCANON | PODD)) != 0) & (par < 0)).tolist()
        for row in miss:
            p = self._parent_key(row, phi, plo, flags, self.odd_parent)
            hops = 0
            while p is not None:
                v = self.vkeys.get(p)
                if v < 0 or hops > nv:
                    break
                p, hops = self._parent_key(v, self.vphi, self.vplo, self.vflag, self.vodd), hops + 1
                r = -1 if p is None else self.keys.get(p)
                if r >= 0:
                    par[row] = r
                    break

    def ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, rank): the rows sorted by time then id (as the id strings sort), and each
        row's place in that order."""
        c = self.cols
        tkey = c.np("tkey")
        order = np.lexsort((c.np("lo"), c.np("hi"), tkey)).astype(np.int32)
        if self.odd_uid:  # odd ids sort by their strings among the records of their time
            tk = tkey[order]
            for t in np.unique(tkey[list(self.odd_uid)]).tolist():
                a, b = int(np.searchsorted(tk, t, "left")), int(np.searchsorted(tk, t, "right"))
                if b - a > 1:
                    order[a:b] = sorted(order[a:b].tolist(), key=self.uid)
        rank = np.empty(self.n, np.int32)
        rank[order] = np.arange(self.n, dtype=np.int32)
        return order, rank


def roots(par: np.ndarray, side: np.ndarray, boundary: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(parent, root) of each row: the parent row within its conversation (-1 for a root: no
    parent in the log, a sub-agent's first record hanging off another chain, or the record
    closing a cycle) and the root it reaches. A cycle is cut at a compaction boundary in it
    when there is one (``boundary``, a mask): a boundary whose ``logicalParentUuid`` names a
    record after it (a preserved segment written under its old ids) still opens a segment."""
    n = len(par)
    ep = par  # changed in place
    sub = np.flatnonzero((ep >= 0) & (side >= 0))
    ep[sub[side[ep[sub]] != side[sub]]] = -1
    r = np.where(ep >= 0, ep, np.arange(n, dtype=ep.dtype))
    for _ in range(64):  # pointer jumping: a chain of length d takes log2(d) steps
        if not (ep[r] >= 0).any():
            return ep, r
        r = r[r]
    bad = np.flatnonzero(ep[r] >= 0).tolist()  # rows that reach a cycle: walked one by one
    memo: dict[int, int] = {}
    for start in bad:
        path, on_path, cur = [], set(), start
        while cur not in memo:
            path.append(cur)
            on_path.add(cur)
            p = int(ep[cur])
            if p < 0 or p in on_path:  # a cycle ends at the record closing it, or at a boundary in it
                cut = cur
                if p >= 0 and boundary is not None:
                    cyc = path[path.index(p) :]
                    cut = next((x for x in cyc if boundary[x]), cur)
                memo[cur] = cut
                ep[cut] = -1
                break
            cur = p
        for x in path:
            memo[x] = memo[cur]
    for x, rr in memo.items():
        r[x] = rr
    return ep, r


def children(ep: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, kids): the children of row i are ``kids[starts[i]:starts[i + 1]]``, by rank."""
    c = np.flatnonzero(ep >= 0)
    kids = c[np.lexsort((rank[c], ep[c]))]
    starts = np.searchsorted(ep[kids], np.arange(len(ep) + 1, dtype=ep.dtype)).astype(np.int32)
    return starts, kids.astype(np.int32)


def live(ep: np.ndarray, root: np.ndarray, order: np.ndarray, rank: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Whether each row is in the live context: on the chain from its root to the newest leaf
    (by rank) of the rows reaching that root."""
    leaves = np.flatnonzero(leaf)
    best = np.full(len(ep), -1, rank.dtype)
    np.maximum.at(best, root[leaves], rank[leaves])
    out = np.zeros(len(ep), bool)
    cur = order[best[best >= 0]]
    while cur.size:
        cur = cur[~out[cur]]
        out[cur] = True
        cur = np.unique(ep[cur])
        cur = cur[cur >= 0]
    return out


def parallel(out: np.ndarray, ep: np.ndarray, flags: np.ndarray, msg: np.ndarray, n_parts: np.ndarray) -> np.ndarray:
    """The rows off the live chain that are the rest of a live parallel tool call, marked live in
    ``out`` (in place); returned as a mask. Claude Code writes each ``tool_use`` block of one API
    response as its own record, each chained to the one before, and each ``tool_result`` record
    as a child of the record holding its call: with two or more calls the chain forks, and only
    one branch goes on. The other branches are not a rewind: their records were sent with the
    next request (the API refuses a ``tool_use`` without its ``tool_result``). Such a branch hangs
    off a live row and holds only user records of tool results and assistant records of the same
    API message as their parent (records without content aside); a branch holding anything
    else (a prompt, a later reply) went on, so it stays a rewound branch."""
    rev = np.zeros(len(ep), bool)
    if not len(ep):
        return rev
    has = ep >= 0
    pe = np.where(has, ep, 0)
    kind = ((flags & TRESULT) != 0) | ((msg != 0) & (msg == msg[pe]))
    ok = kind | ((n_parts == 0) & ((flags & BOUNDARY) == 0))
    taint = ~out & ~ok  # a branch holding one of these went on: it is not a call's rest
    cur = np.flatnonzero(taint)
    while cur.size:
        cur = ep[cur]
        cur = np.unique(cur[cur >= 0])
        cur = cur[~out[cur] & ~taint[cur]]
        taint[cur] = True
    while True:
        cand = np.flatnonzero(~out & has & kind & ~taint & out[pe])
        if not cand.size:
            return rev
        out[cand] = True
        rev[cand] = True
