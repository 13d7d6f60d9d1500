# The semantic table: one Rule per instruction encoding (by the variant
# name of ipufs/model/isa/rows.py), joined from the tables of each group.
# An encoding without a rule is not executed: running it raises the tile
# exception NOT_EXECUTABLE naming the instruction, never an approximation.
# NOT_PUBLIC lists the families whose semantics no public source gives,
# so that docs and messages can say which reason applies.
from __future__ import annotations

from ipufs.model.executor import alu, control, exchange_ops, fp, memory_ops, native, system
from ipufs.model.executor.rule import Rule

SEMANTICS: dict[str, Rule] = {**alu.RULES, **memory_ops.RULES, **control.RULES, **system.RULES, **fp.RULES,
                              **exchange_ops.RULES}
for _rule in SEMANTICS.values():
    if _rule.native:
        native.code(_rule.native)  # a form or kind the C loop lacks fails here, when the tables load

#: mnemonic prefixes or names whose behaviour is not public (docs/execution.md)
NOT_PUBLIC: dict[str, str] = {
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
    "class": "the class numbers are not public (beyond NaN's, 0 to 2: Graphcore's IsNaN vertex)",
    "exp": "the accuracy of its approximation is not public",
    "ln": "the accuracy of its approximation is not public",
    "log2": "the accuracy of its approximation is not public",
    "sigm": "the accuracy of its approximation is not public",
    "tanh": "the accuracy of its approximation is not public",
    "oox": "the accuracy of its approximation is not public",
    "oorx": "the accuracy of its approximation is not public",
    "f16v2maxc": "where its one f16 result lands in the register is not public",
    "f8v": "the f8 formats are not public",
    "tof8": "the f8 formats are not public",
    "ldb8": "the instruction is not described publicly",
    "ldb16b16": "which packed delta steps by 2 and which by the mini-delta, and the mini-delta's unit, are not public",
}


def why_not(mnemonic: str) -> str:
    """Why an instruction without a rule is not executed."""
    for key, reason in NOT_PUBLIC.items():
        if key in mnemonic:
            return f"{mnemonic}: {reason}"
    return f"{mnemonic}: not executed by ipufs yet (docs/execution.md lists what is)"
