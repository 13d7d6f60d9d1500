# The semantic table: one Rule per instruction encoding (by the variant
# name of ipufs/model/isa/rows.py), joined from the tables of each group.
# An encoding without a rule is not executed: running it raises the tile
# exception NOT_EXECUTABLE naming the instruction, never an approximation.
# NOT_PUBLIC lists the families whose semantics no public source gives,
# so that docs and messages can say which reason applies.
from __future__ import annotations

from ipufs.model.executor import alu, control, fp, memory_ops, native, system
from ipufs.model.executor.rule import Rule

SEMANTICS: dict[str, Rule] = {**alu.RULES, **memory_ops.RULES, **control.RULES, **system.RULES, **fp.RULES}
for _rule in SEMANTICS.values():
    if _rule.native:
        native.code(_rule.native)  # a form or kind the C loop lacks fails here, when the tables load

#: mnemonic prefixes or names whose behaviour is not public (docs/execution.md)
NOT_PUBLIC: dict[str, str] = {
    "send": "exchange packets are not public",
    "sans": "exchange syncs are not public",
    "amp": "the accumulator unit (AMP) is not public",
    "slic": "the accumulator unit (SLIC) is not public",
    "acc": "the accumulators are not public",
    "gina": "the accumulators are not public",
    "mac": "the accumulators are not public",
    "aop": "the accumulators are not public",
    "axpy": "works through the accumulators, which are not public",
    "mix": "works through the accumulators, which are not public",
    "rand": "the random number generator is not public",
    "rmask": "the random number generator is not public",
    "pace": "the packed address formats are not public",
    "tapack": "the packed address formats are not public",
    "putcs": "the common compute configuration space is not public",
    "sort": "the lane mapping is not public",
    "shuf": "the lane mapping is not public",
    "roll": "the lane mapping is not public",
    "swap8": "the lane mapping is not public",
    "movz": "which operand is the gate is not public",
    "sufromui": "the symmetric conversion's exact rounding is not public",
}


def why_not(mnemonic: str) -> str:
    """Why an instruction without a rule is not executed."""
    for key, reason in NOT_PUBLIC.items():
        if key in mnemonic:
            return f"{mnemonic}: {reason}"
    return f"{mnemonic}: not executed by ipufs yet (docs/execution.md lists what is)"
