# Disassembly listings of tile code, as text lines: llvm-objdump -d's form
# (address, the four bytes as they lie in memory, the instruction; labels
# from the symbol table; co-issued pairs in braces) or assembler source
# that `ipufs asm` turns back into the same bytes. A word that is not an
# instruction, or a pair that may not be co-issued, is shown as `.word`.
from __future__ import annotations

import bisect
import re
from collections import deque
from collections.abc import Iterator, Mapping
from itertools import islice
from dataclasses import dataclass, field

from ipufs.model.isa.bundles import bundle_problems
from ipufs.model.isa.decoder import Decoder, Instruction, pairing_problem
from ipufs.model.isa.syntax import Syntax
from ipufs.model.isa.table import COISSUE_BIT, Group


#: Words listed per block (4 KiB).
_BLOCK = 1024
#: The names the assembler reads as labels.
_LABEL_NAME = re.compile(r"[A-Za-z_.][\w.$]*")


@dataclass(frozen=True, slots=True)
class _Statement:
    """What one line of source says: one word or a bundle's two."""

    address: int
    words: tuple[int, ...]
    text: str | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes at an address: a section, a segment, or a raw file."""

    name: str
    address: int
    data: bytes
    code: bool = True
    writable: bool = False
    #: Its own labels by address (an ELF section's symbols); None: the
    #: lister's symbols.
    labels: Mapping[int, str] | None = None


@dataclass(slots=True)
class Lister:
    """Lists chunks for one decoder and syntax; ``symbols`` maps addresses
    to names (labels and branch targets), ``globals`` the names to declare
    global in source form."""

    decoder: Decoder
    syntax: Syntax
    symbols: Mapping[int, str] = field(default_factory=dict)
    globals: frozenset[str] = frozenset()
    #: Words of code chunks listed as .word so far (not instructions, or
    #: co-issued words that make no valid pair).
    undecodable: int = 0
    resume: int = 0
    _lines: dict[int, str] = field(default_factory=dict)
    _bad: set[int] = field(default_factory=set)
    _exact_texts: dict[int, str | None] = field(default_factory=dict)
    _texts: dict[int, str] = field(default_factory=dict)

    def _word_text(self, word: int) -> str | None:
        text = self._texts.get(word)
        if text is None:
            inst = self.decoder.decode(word)
            if inst is None:
                return None
            text = self.syntax.text(inst)
            if inst.row.operands and any(o.kind.name == "TARGET" for o in inst.row.operands):
                target = inst.operands[[o.kind.name for o in inst.row.operands].index("TARGET")]
                if target in self.symbols:
                    text += f" <{self.symbols[target]}>"
            self._texts[word] = text
        return text

    def items(self, chunk: Chunk, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, int, str, str | None]]:
        """(address, word, kind, text) per word from word ``start`` to
        ``stop`` (a pair that begins before ``stop`` is finished; ``resume``
        then says where the next word is): kind is "one", "first",
        "second" (a bundle's halves), "wide", "payload" (a two-word
        instruction and its second word) or "data"; text None when not an
        instruction."""
        data, base = chunk.data, chunk.address
        n = len(data) // 4
        words = memoryview(data)[: n * 4].cast("I") if n else memoryview(b"").cast("I")
        end = n if stop is None else min(stop, n)
        i = start
        while i < end:
            address, word = base + 4 * i, words[i]
            if chunk.code and word & COISSUE_BIT and i + 1 < n and self.decoder.wide(word):
                if address % 8:
                    self.undecodable += 1
                    yield address, word, "data", "a two-word instruction must start 8-byte aligned"
                    i += 1
                    continue
                yield address, word, "wide", self._word_text(word | words[i + 1] << 32)
                yield address + 4, words[i + 1], "payload", None
                i += 2
                continue
            if chunk.code and word & COISSUE_BIT and i + 1 < n:
                pair = self._pair(address, word, words[i + 1])
                if isinstance(pair, tuple):
                    yield address, word, "first", pair[0]
                    yield address + 4, words[i + 1], "second", pair[1]
                    i += 2
                    continue
                self.undecodable += 1
                yield address, word, "data", f"not a bundle: {pair}"
                i += 1
                continue
            if not chunk.code:
                yield address, word, "data", None
            else:
                text = self._word_text(word)
                if text is None or word & COISSUE_BIT:
                    why = "not an instruction" if text is None else "co-issued word without a partner"
                    self.undecodable += 1
                    yield address, word, "data", why
                else:
                    yield address, word, "one", text
            i += 1
        self.resume = i

    def _pair(self, address: int, first: int, second: int) -> tuple[str, str] | str:
        if address % 8:
            return "a co-issued pair must start 8-byte aligned"
        a, b = self.decoder.decode(first), self.decoder.decode(second)
        if a is None or b is None:
            return f"{(first if a is None else second):#010x} is not an instruction"
        problem = pairing_problem(a, b)
        if problem:
            return problem
        return self._word_text(first) or "", self._word_text(second) or ""

    def objdump(self, chunks: list[Chunk]) -> Iterator[str]:
        """llvm-objdump -d style lines of the code chunks."""
        for block in self.objdump_blocks(chunks):
            yield from block

    def objdump_blocks(self, chunks: list[Chunk]) -> Iterator[list[str]]:
        """The same lines in blocks: a block of words with no co-issue
        flag and no label is listed from a per-word cache of line bodies
        (most of a memory image repeats a few words), the rest word by word."""
        import numpy as np

        for chunk in chunks:
            if not chunk.code:
                continue
            labels = sorted(self._labels(chunk))
            yield ["", f"Disassembly of section {chunk.name}:"]
            n = len(chunk.data) // 4
            words = np.frombuffer(chunk.data, dtype="<u4", count=n)
            flagged = np.flatnonzero(words >> np.uint32(31))
            i = 0
            while i < n:
                stop = min(n, i + _BLOCK)
                start_address, stop_address = chunk.address + 4 * i, chunk.address + 4 * stop
                in_block = bisect.bisect_left(labels, start_address) != bisect.bisect_left(labels, stop_address)
                bundles = int(np.searchsorted(flagged, i)) != int(np.searchsorted(flagged, stop))
                if in_block or bundles:
                    yield list(self._lines_of(chunk, i, stop))
                    i = self.resume
                else:
                    yield self._fast_block(words[i:stop].tolist(), start_address)
                    i = stop
            tail = len(chunk.data) % 4
            if tail:
                at = chunk.address + len(chunk.data) - tail
                raw = " ".join(f"{b:02x}" for b in chunk.data[-tail:])
                yield [f"{at:8x}: {raw}  \t.byte {', '.join(f'{b:#04x}' for b in chunk.data[-tail:])}"]

    def _fast_block(self, words: list[int], address: int) -> list[str]:
        cache, bad = self._lines, self._bad
        out = []
        for word in words:
            body = cache.get(word)
            if body is None:
                text = self._word_text(word)
                if text is None:
                    bad.add(word)
                raw = " ".join(f"{b:02x}" for b in word.to_bytes(4, "little"))
                body = cache[word] = f"{raw}  \t{text if text is not None else f'.word {word:#010x}'}"
            out.append(f"{address:8x}: {body}")
            address += 4
        self.undecodable += sum(1 for w in words if w in bad) if bad else 0
        return out

    def _lines_of(self, chunk: Chunk, start: int, stop: int) -> Iterator[str]:
        for address, word, kind, text in self.items(chunk, start, stop):
            labels = self._labels(chunk)
            if address in labels:
                yield ""
                yield f"{address:08x} <{labels[address]}>:"
            raw = " ".join(f"{b:02x}" for b in word.to_bytes(4, "little"))
            if kind == "first":
                body = f"{{ {text}"
            elif kind == "second":
                body = f"  {text} }}"
            elif kind == "payload":
                body = ""
            elif kind == "data":
                body = f".word {word:#010x}"
            else:
                body = text or ""
            yield f"{address:8x}: {raw}  \t{body}"

    def source(self, chunks: list[Chunk]) -> Iterator[str]:
        """Assembler source giving the same bytes at the same addresses
        (labels whose names the assembler could not read are left out)."""
        names = {a: n for a, n in self.symbols.items() if _LABEL_NAME.fullmatch(n)}
        for chunk in chunks:
            flags = "ax" if chunk.code else ("aw" if chunk.writable else "a")
            yield f'\t.section {chunk.name}, "{flags}", {chunk.address:#x}'
            labels = {a: n for a, n in self._labels(chunk).items() if _LABEL_NAME.fullmatch(n)}
            ahead: deque[_Statement] = deque()
            statements = self._statements(chunk, names)
            while True:
                if not ahead:
                    ahead.extend(islice(statements, 1))
                    if not ahead:
                        break
                st = ahead.popleft()
                size = self._repeat_size(st)
                if size is not None:  # its body must be whole bundles, or the assembler refuses it
                    ahead.extend(islice(statements, max(0, size - len(ahead))))
                    body = list(islice(ahead, size))
                    if len(body) < size or not all(b.text is not None and len(b.words) == 2
                                                   and not self._controls(b) for b in body):
                        st = _Statement(st.address, st.words, None, "an rpt whose body would not assemble")
                for i, word in enumerate(st.words):
                    at = st.address + 4 * i
                    if at in labels:
                        if labels[at] in self.globals:
                            yield f"\t.globl {labels[at]}"
                        yield f"{labels[at]}:"
                    if st.text is None:
                        yield f"\t.word {word:#010x}" + (f"  # {st.note}" if st.note else "")
                if st.text is not None:
                    yield f"\t{st.text}"
            tail = len(chunk.data) % 4
            if tail:
                yield f"\t.byte {', '.join(f'{b:#04x}' for b in chunk.data[-tail:])}"

    def _labels(self, chunk: Chunk) -> Mapping[int, str]:
        return self.symbols if chunk.labels is None else chunk.labels

    def _statements(self, chunk: Chunk, names: Mapping[int, str]) -> Iterator[_Statement]:
        """Each instruction or bundle with the text that assembles back to
        it (None: list it as .word), and each other word."""
        first: tuple[int, int, str | None] | None = None
        for address, word, kind, text in self.items(chunk):
            exact = self._exact(word, names) if kind not in ("data", "wide", "payload") else None
            if kind == "wide":
                first = (address, word, None)
            elif kind == "payload" and first is not None:
                yield _Statement(first[0], (first[1], word), self._exact(first[1] | word << 32, names), None)
                first = None
            elif kind == "first":
                first = (address, word, exact)
            elif kind == "second" and first is not None:
                refused = self._refused_pair(first[1], word)
                both = f"{{ {first[2]} ; {exact} }}" if first[2] and exact and not refused else None
                yield _Statement(first[0], (first[1], word), both, refused)
                first = None
            else:
                yield _Statement(address, (word,), exact, text if kind == "data" else None)

    def _refused_pair(self, first: int, second: int) -> str | None:
        """Why the assembler would refuse this decodable pair (its halves
        write a register in common), or None."""
        a, b = self.decoder.decode(first), self.decoder.decode(second)
        if a is None or b is None:
            return None
        problems = bundle_problems([(a.row, list(a.operands)), (b.row, list(b.operands))], 0)
        return f"a pair the assembler refuses: {problems[0]}" if problems else None

    def _repeat_size(self, st: _Statement) -> int | None:
        """The number of bundles in the body of an rpt this statement holds."""
        for inst in self._instructions(st) if st.text is not None else ():
            if inst is not None and inst.mnemonic == "rpt":
                return inst.operands[1] + 1
        return None

    def _instructions(self, st: _Statement) -> list[Instruction | None]:
        """The instruction(s) of a statement: a two-word one, or each word's."""
        if len(st.words) == 2 and self.decoder.wide(st.words[0]):
            return [self.decoder.decode(st.words[0] | st.words[1] << 32)]
        return [self.decoder.decode(w) for w in st.words]

    def _controls(self, st: _Statement) -> bool:
        return any(i is None or i.row.group in (Group.CONTROL, Group.SYSTEM) for i in self._instructions(st))

    def _exact(self, word: int, names: Mapping[int, str]) -> str | None:
        """The text that assembles back to ``word`` (cached: reading it
        back is the slow part), or None."""
        if word in self._exact_texts:
            return self._exact_texts[word]
        inst = self.decoder.decode(word)
        text = self.syntax.exact_text(inst, names) if inst is not None else None
        self._exact_texts[word] = text
        return text
