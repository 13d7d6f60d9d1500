/* Decoding the instruction that faulted on a trapped register page
 * (compat_mmio.c), and finishing it once the access is done. The decoders
 * are pure functions of the instruction's bytes, for both machines on
 * either (tests/c/mmio_decode.c checks them with vectors); applying the
 * result to a signal's context is the running machine's only. */
#ifndef IPUFS_COMPAT_DECODE_H
#define IPUFS_COMPAT_DECODE_H

#include <stdint.h>

/* What the instruction does with memory. */
enum mmio_kind {
    MMIO_LOAD,    /* a register gets the value (extended) */
    MMIO_STORE,   /* memory gets a register's value or an immediate */
    MMIO_RMW,     /* x86: memory = memory OP operand, with flags */
    MMIO_ALU,     /* x86: register = register OP memory, with flags */
    MMIO_COMPARE, /* x86: flags of memory OP operand (cmp, test) */
};

/* x86 ALU operations, in the order of the opcode's bits 3..5, then TEST. */
enum mmio_op { OP_ADD, OP_OR, OP_ADC, OP_SBB, OP_AND, OP_SUB, OP_XOR, OP_CMP, OP_TEST, OP_MOV };

struct mmio_insn {
    enum mmio_kind kind;
    enum mmio_op op;
    int width;         /* bytes of memory accessed: 1, 2, 4 or 8 */
    int length;        /* bytes of the instruction */
    int reg;           /* the register operand (-1: an immediate) */
    int high_byte;     /* x86: reg 4..7 without REX is AH, CH, DH, BH */
    int reversed;      /* x86 compare: memory is the second operand (cmp r, m) */
    int64_t imm;       /* the immediate, sign-extended to the operation's width */
    int dest_width;    /* a load's register: 1 or 2 merge, 4 zero-extends to 64 bits, 8 whole */
    int sign;          /* a load sign-extends the value to dest_width */
    int writeback;     /* arm64 pre/post-index: base += offset */
    int base;          /* arm64: the base register (31: sp) */
    int64_t offset;    /* arm64: what writeback adds */
};

/* Decoders: 1 and *out filled for a form the library emulates, else 0. */
int mmio_decode_x86(const uint8_t *code, struct mmio_insn *out);
int mmio_decode_arm64(uint32_t word, struct mmio_insn *out);

/* An x86 ALU operation on ``width`` bytes with the flags it sets
 * (CF PF AF ZF SF OF, as RFLAGS holds them); ``flags`` gives CF in for
 * ADC and SBB and comes back with the new ones. */
uint64_t mmio_alu(enum mmio_op op, int width, uint64_t a, uint64_t b, uint64_t *flags);

/* On the running machine, given the signal's context (a ucontext_t *). */
struct mmio_access {
    enum mmio_kind kind;
    int width;
    struct mmio_insn insn;
};
int mmio_decode(void *uc, struct mmio_access *acc);
uint64_t mmio_pc(void *uc);
/* Finish the instruction: for a load or ALU, ``*value`` is what memory
 * held; for a store or RMW it comes back with what memory gets. Returns 1
 * when memory must be written, then resumes the context after it. */
int mmio_complete(void *uc, struct mmio_access *acc, uint64_t *value);

#endif
