# The Python path: a tile's turns taken one at a time (a delay stalls; a
# context a breakpoint applies to is watched: RBRK, IBRK, DBRK), each
# instruction (or bundle) decoded once by the instruction table's decoder
# and kept with its semantic rule(s); the checks of where an instruction
# may run (the context, an rpt body, bundle alignment); the bundle's two
# halves reading the registers as they were before it; the rpt loop's turn
# back to the body. Also what the native loop learns of a word (its
# forms) and which words the TDI may inject. docs/execution.md.
from __future__ import annotations

from collections.abc import Callable

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import csr, native
from ipufs.model.executor.access import TileAccess
from ipufs.model.executor.exchange import Exchange
from ipufs.model.executor.ports import Machine, TileBreaks
from ipufs.model.executor.rule import Rule
from ipufs.model.executor.semantics import SEMANTICS, why_not
from ipufs.model.executor.state import MASK, Context, Etype, Status, TileFault, TileState
from ipufs.model.executor.syncs import Syncs
from ipufs.model.isa import Arch, Bundle, Context as Contexts, Decoder, Group, Instruction

#: a decoded word (or pair): the instruction or bundle, its rule(s), and
#: which contexts may run it (bit 0 the supervisor, bit 1 workers); or why not
Decoded = tuple[Instruction, Rule | None, int] | tuple[Bundle, Rule | None, Rule | None, int] | str
#: what the native loop learns of a word: who may run it, each half's form, kind and operands
Learned = tuple[int, list[tuple[int, int, tuple[int, ...]]]]
_SUPERVISOR_BIT, _WORKER_BIT = native.SUPERVISOR_BIT, native.WORKER_BIT
_PYTHON: Learned = (0, [(native.PYTHON_FORM, 0, ())])
_UNSEQUENCED = (Group.CONTROL, Group.SYSTEM)
#: the decode cache's bound (about 0.5 KiB an entry: 8 MiB per IPU at most)
CACHE_ENTRIES = 1 << 14


def _who(inst: Instruction) -> int:
    ctx = inst.row.context
    return (_SUPERVISOR_BIT if ctx & Contexts.SUPERVISOR else 0) | (_WORKER_BIT if ctx & Contexts.WORKER else 0)


#: how a context takes an exception (Execution.fault)
Fault = Callable[[TileState, Context, TileFault], None]


class Interpreter:
    """Takes the turns of one IPU's tiles on the Python path, for
    ``machine``, whose faults ``fault`` raises."""

    def __init__(self, arch: Arch, access: TileAccess, machine: Machine, syncs: Syncs, exchange: Exchange,
                 fault: Fault) -> None:
        self.decoder = Decoder.of(arch)
        self.access = access
        self.machine = machine
        self.syncs = syncs
        self.exchange = exchange
        self.fault = fault
        #: a supervisor that branches to 0 halts (where 0 is no code: every bounded profile)
        self._zero_halts = not access.executable(0)
        #: tile -> its breakpoints, for tiles where some break is enabled (the debug unit's)
        self.breaks: dict[int, TileBreaks] = {}
        self.retired = 0  # instructions retired on this path since reset
        self._cache: dict[int, Decoded] = {}
        #: decoded words held at most: beyond, the cache starts again empty
        self.cache_entries = CACHE_ENTRIES

    def run_tile(self, t: TileState, turns: int) -> int:
        """Up to ``turns`` turns of ``t``; returns those taken."""
        n = 0
        while n < turns:
            c = t.next_runnable()
            if c is None:
                if not self.syncs.release_local(t):
                    break
                continue
            n += 1
            self.turn(t, c)
        return n

    def turn(self, t: TileState, c: Context) -> None:
        """One turn of context ``c`` of ``t`` (none if the tile must stand
        still for an exchange word another tile has yet to send)."""
        f = c.fields
        if not f[native.DELAY] and self.exchange.receiving(t.tile) and not self.exchange.ready(t, c):
            return
        t.fields[native.TURNS] += 1  # the arrays in place: this runs per turn
        if f[native.DELAY]:
            f[native.DELAY] -= 1
            return
        try:
            if f[native.BREAK]:
                self._watched_issue(t, c)
            else:
                self.retired += self.issue(t, c)
        except TileFault as fault:
            self.fault(t, c, fault)

    def _watched_issue(self, t: TileState, c: Context) -> None:
        """A turn of a context a breakpoint applies to, or that runall
        doomed (docs/debugging.md, "Breakpoints"): RBRK pending from its
        last instruction, then IBRK at the PC, then break on sync, then the
        instruction with DBRK watching its accesses; a context the host
        just resumed ignores IBRK, BOS and DBRK for one instruction."""
        b = self.breaks.get(t.tile)
        resumed, c.resumed = c.resumed, False
        pc = c.pc
        access = self.access
        if b is not None:
            if c.retired_break:
                c.retired_break = False
                if b.retirement(c):
                    raise TileFault(Etype.RBRK, ExceptionCause.BREAKPOINT, pc, f"retirement break before 0x{pc:x}")
            if not resumed and b.instruction(c, pc):
                c.csrs[csr.DBG_BRK_ID] = csr.IBRK_CHANNEL
                raise TileFault(Etype.IBRK, ExceptionCause.BREAKPOINT, pc, f"instruction break at 0x{pc:x}")
            if not resumed and b.on_sync(c) and self._is_sync(t, pc):
                raise TileFault(Etype.BOS, ExceptionCause.BREAKPOINT, pc, f"break on sync at 0x{pc:x}")
            access.watch, access.watcher = None if resumed else b.watch(c), c
        try:
            self.retired += self.issue(t, c)
        finally:
            access.watch = None
        if c.doomed:  # A hover/runall.md: it raises an exception as this instruction retires
            c.doomed = False
            c.fields[native.BREAK] = b is not None and b.applies(c.number)
            raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, pc,
                            f"runall while this worker was active (exception at 0x{pc:x} as it retired)")
        if b is not None and c.status is Status.ACTIVE and b.retirement(c):
            c.retired_break = True

    def _is_sync(self, t: TileState, pc: int) -> bool:
        decoded = self.decode(t, pc)
        return not isinstance(decoded, str) and len(decoded) == 3 and decoded[0].mnemonic == "sync"

    def decode(self, t: TileState, pc: int) -> Decoded:
        fetch = self.access.fetch
        word = fetch(t, pc)
        if not word & 0x80000000:
            key = word
        else:
            if pc % 8:
                raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, pc,
                                f"bundle at 0x{pc:x} is not 8-byte aligned")
            key = word | fetch(t, pc + 4) << 32
        cache = self._cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= self.cache_entries:  # code that keeps writing new words: start again
                cache.clear()
            found = cache[key] = self.decode_key(key)
        return found

    def forget(self) -> None:
        """Drop every decoded word (a reset)."""
        self._cache.clear()

    def cached(self) -> int:
        """The decoded words held."""
        return len(self._cache)

    def decode_key(self, key: int) -> Decoded:
        if key <= MASK:
            inst = self.decoder.decode(key)
            if inst is None:
                return f"0x{key:08x} is not an instruction"
            return inst, SEMANTICS.get(inst.row.variant), _who(inst)
        pair = self.decoder.decode_bundle(key)
        if isinstance(pair, str):
            return pair
        if isinstance(pair, Instruction):  # one instruction of two words (sendpicp)
            return pair, SEMANTICS.get(pair.row.variant), _who(pair)
        return (pair, SEMANTICS.get(pair.main.row.variant), SEMANTICS.get(pair.aux.row.variant),
                _who(pair.main) & _who(pair.aux))

    def learn(self, key: int) -> Learned:
        """What the native loop does with ``key``, a word or a bundle's two:
        who may run it and each half's form, kind and operands, from the
        decoder and the rules' native column; the Python form otherwise."""
        found = self.decode_key(key)
        if isinstance(found, str):
            return _PYTHON
        if len(found) == 3:
            inst, rule, who = found
            pairs = [(inst, rule)]
        else:
            bundle, main_rule, aux_rule, who = found
            pairs = [(bundle.main, main_rule), (bundle.aux, aux_rule)]
        if any(rule is None or not rule.native for _, rule in pairs):
            return _PYTHON
        if len(pairs) == 2 and all(inst.row.group not in _UNSEQUENCED for inst, _ in pairs):
            who |= native.BODY_BIT  # may be in an rpt body
        return who, [(*native.code(rule.native), inst.operands) for inst, rule in pairs if rule is not None]

    def injectable(self, context: int, word: int) -> tuple[Instruction, Rule] | None:
        """The instruction and rule of ``word`` if the TDI may inject it into
        ``context`` (a solo instruction with a rule, not sync or rpt)."""
        inst = self.decoder.decode(word & MASK)
        if inst is None or inst.coissue or inst.mnemonic in ("sync", "rpt"):
            return None
        rule = SEMANTICS.get(inst.row.variant)
        if rule is None or not inst.row.context & (Contexts.WORKER if context else Contexts.SUPERVISOR):
            return None
        return inst, rule

    @staticmethod
    def _check(c: Context, inst: Instruction, rule: Rule | None, who: int) -> Rule:
        if rule is not None and who & (_WORKER_BIT if c.number else _SUPERVISOR_BIT):
            return rule
        if not inst.row.context & (Contexts.WORKER if c.is_worker else Contexts.SUPERVISOR):
            runner = "a worker" if c.is_worker else "the supervisor"
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, c.pc,
                            f"{inst.mnemonic} cannot run on {runner}")
        if rule is None:
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc, why_not(inst.mnemonic))
        return rule

    def halt(self, t: TileState, c: Context) -> None:
        """The supervisor branched to address 0: it stops, inactive, as a
        C600's runtime ends its program (ours: osmarks/ipu-stack's
        hardware test sees such a supervisor inactive; docs/execution.md)."""
        self.syncs.leaves(t)
        c.stop()
        self.machine.event(t, "exit", 0, 0, "branched to 0: halted")

    def issue(self, t: TileState, c: Context) -> int:
        """Issue ``c``'s next instruction or bundle; returns how many
        instructions retired (raises TileFault)."""
        f = c.fields
        pc = f[native.PC]
        if not pc and not c.number and self._zero_halts:
            self.halt(t, c)
            return 0
        if pc % 4:
            raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, pc, f"PC 0x{pc:x} is not 4-byte aligned")
        decoded = self.decode(t, pc)
        if isinstance(decoded, str):
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc, decoded)
        in_body = f[native.REPEAT] and f[native.REPEAT_FIRST] <= pc < f[native.REPEAT_END]
        machine = self.machine
        if len(decoded) == 3:
            inst, rule, who = decoded
            if in_body:
                raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc,
                                f"{inst.mnemonic}: a solo instruction in an rpt body")
            rule = self._check(c, inst, rule, who)
            c.next_pc = pc + inst.row.size
            rule.handler(machine, t, c, inst.operands)
            retired = 1
        else:
            bundle, main_rule, aux_rule, who = decoded
            if in_body and any(i.row.group in _UNSEQUENCED for i in (bundle.main, bundle.aux)):
                raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc,
                                "a control or system instruction in an rpt body")
            main_rule = self._check(c, bundle.main, main_rule, who)
            aux_rule = self._check(c, bundle.aux, aux_rule, who)
            c.next_pc = pc + 8
            # Both halves read the registers as they were before the bundle
            # (ours: the public record does not say); the aux half runs on
            # a copy of $a taken before the main half wrote it.
            a = c.a
            before = a.tolist()
            main_rule.handler(machine, t, c, bundle.main.operands)
            after_main = a.tolist()
            for i in range(16):
                a[i] = before[i]
            aux_rule.handler(machine, t, c, bundle.aux.operands)
            for i in range(16):
                if after_main[i] != before[i]:
                    a[i] = after_main[i]
            retired = 2
        if f[native.REPEAT] and c.next_pc == f[native.REPEAT_END] and f[native.REPEAT_FIRST] <= pc:
            if f[native.REPEAT_LEFT]:  # the body again
                f[native.REPEAT_LEFT] -= 1
                c.next_pc = f[native.REPEAT_FIRST]
            else:
                c.repeat = None
        f[native.PC] = c.next_pc & MASK
        t.fields[native.INSTRUCTIONS] += retired
        return retired
