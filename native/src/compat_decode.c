/* The instruction forms the compatibility library emulates on trapped
 * register pages (compat_decode.h): what gcc (-O0, -O2) and rustc/LLVM
 * emit for volatile integer loads and stores, including LLVM's folding of
 * a volatile load into a compare or a read-modify-write (`cmpl $0, (m)`,
 * `orl %r, (m)`).
 *
 * x86-64: MOV (88, 89, 8A, 8B, C6 /0, C7 /0), MOVZX and MOVSX (0F B6, B7,
 * BE, BF), MOVSXD (63), the ALU group with a memory operand (00..3B low
 * forms, 80, 81, 83 /op), TEST (84, 85, F6 /0, F7 /0); prefixes 66, 67,
 * F0, segment overrides and REX; any ModRM/SIB/displacement addressing
 * (the address itself comes from the fault).
 *
 * arm64: LDR/STR of bytes, halves, words and doublewords, sign-extending
 * LDRSB/LDRSH/LDRSW, with an unsigned offset, a register offset, an
 * unscaled offset (LDUR/STUR), pre- and post-index; LDAR/STLR. */
#define _GNU_SOURCE
#include "compat_decode.h"

#include <signal.h>
#include <string.h>
#include <ucontext.h>

/* --- x86-64 ---------------------------------------------------------------- */
/* The length of a ModRM operand from the ModRM byte on: ModRM, SIB,
 * displacement; -1 when it names a register (no memory: never ours). */
static int modrm_length(const uint8_t *p)
{
    int mod = p[0] >> 6, rm = p[0] & 7, n = 1;
    if (mod == 3)
        return -1;
    if (rm == 4) { /* SIB */
        n++;
        if (mod == 0 && (p[1] & 7) == 5)
            n += 4;
    } else if (mod == 0 && rm == 5) {
        n += 4; /* RIP-relative */
    }
    if (mod == 1)
        n += 1;
    else if (mod == 2)
        n += 4;
    return n;
}

static int64_t imm_at(const uint8_t *p, int size)
{
    switch (size) {
    case 1: return (int8_t)p[0];
    case 2: return (int16_t)(p[0] | p[1] << 8);
    default: return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    }
}

int mmio_decode_x86(const uint8_t *code, struct mmio_insn *out)
{
    const uint8_t *p = code;
    int osize = 0, rex = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 14; i++, p++) { /* legacy prefixes */
        if (*p == 0x66)
            osize = 1;
        else if (!(*p == 0x67 || *p == 0xF0 || *p == 0x2E || *p == 0x3E || *p == 0x26 || *p == 0x36 || *p == 0x64
                   || *p == 0x65))
            break;
    }
    if ((*p & 0xF0) == 0x40)
        rex = *p++;
    int w = (rex & 8) ? 8 : osize ? 2 : 4; /* the operation's width, for the full-size forms */
    int op = *p++, two = 0;
    if (op == 0x0F) {
        two = 1;
        op = *p++;
    }
    int reg = ((p[0] >> 3) & 7) | ((rex & 4) ? 8 : 0), ext = (p[0] >> 3) & 7;
    int ml = modrm_length(p);
    if (ml < 0)
        return 0;
    const uint8_t *imm = p + ml;
    int immsize = 0;
    out->reg = reg;
    out->op = OP_MOV;
    if (two) {
        if (op != 0xB6 && op != 0xB7 && op != 0xBE && op != 0xBF)
            return 0;
        out->kind = MMIO_LOAD;
        out->width = (op & 1) ? 2 : 1;
        out->sign = op >= 0xBE;
        out->dest_width = w;
    } else if (op == 0x8B || op == 0x8A) {
        out->kind = MMIO_LOAD;
        out->width = out->dest_width = op == 0x8A ? 1 : w;
    } else if (op == 0x63) { /* MOVSXD r64, r/m32 */
        out->kind = MMIO_LOAD;
        out->width = 4;
        out->dest_width = w;
        out->sign = 1;
    } else if (op == 0x89 || op == 0x88) {
        out->kind = MMIO_STORE;
        out->width = op == 0x88 ? 1 : w;
    } else if ((op == 0xC7 || op == 0xC6) && ext == 0) {
        out->kind = MMIO_STORE;
        out->width = op == 0xC6 ? 1 : w;
        out->reg = -1;
        immsize = op == 0xC6 ? 1 : w == 2 ? 2 : 4;
    } else if (op < 0x40 && (op & 7) < 4) { /* ADD..CMP with a register */
        out->op = (enum mmio_op)(op >> 3);
        out->width = (op & 1) ? w : 1;
        int to_memory = !(op & 2);
        out->kind = out->op == OP_CMP ? MMIO_COMPARE : to_memory ? MMIO_RMW : MMIO_ALU;
        out->reversed = !to_memory; /* cmp r, m: memory is the second operand */
    } else if (op == 0x80 || op == 0x81 || op == 0x83) { /* ADD..CMP with an immediate */
        out->op = (enum mmio_op)ext;
        out->width = op == 0x80 ? 1 : w;
        out->kind = out->op == OP_CMP ? MMIO_COMPARE : MMIO_RMW;
        out->reg = -1;
        immsize = op == 0x81 ? (w == 2 ? 2 : 4) : 1;
    } else if (op == 0x84 || op == 0x85) {
        out->op = OP_TEST;
        out->kind = MMIO_COMPARE;
        out->width = op == 0x85 ? w : 1;
    } else if ((op == 0xF6 || op == 0xF7) && ext == 0) {
        out->op = OP_TEST;
        out->kind = MMIO_COMPARE;
        out->width = op == 0xF7 ? w : 1;
        out->reg = -1;
        immsize = op == 0xF6 ? 1 : w == 2 ? 2 : 4;
    } else {
        return 0;
    }
    if (immsize)
        out->imm = imm_at(imm, immsize);
    out->high_byte = out->reg >= 4 && out->reg < 8 && !rex && (out->width == 1 || out->dest_width == 1)
                     && !(two && out->kind == MMIO_LOAD);
    out->length = (int)(imm + immsize - code);
    return 1;
}

static uint64_t mask_of(int width)
{
    return width >= 8 ? ~0ull : (1ull << (8 * width)) - 1;
}

#define F_CF 0x001ull
#define F_PF 0x004ull
#define F_AF 0x010ull
#define F_ZF 0x040ull
#define F_SF 0x080ull
#define F_OF 0x800ull
#define F_ARITH (F_CF | F_PF | F_AF | F_ZF | F_SF | F_OF)

uint64_t mmio_alu(enum mmio_op op, int width, uint64_t a, uint64_t b, uint64_t *flags)
{
    uint64_t m = mask_of(width), sign = 1ull << (8 * width - 1), r, f = 0;
    unsigned carry_in = (unsigned)(*flags & F_CF);
    a &= m;
    b &= m;
    switch (op) {
    case OP_ADD:
    case OP_ADC: {
        unsigned c = op == OP_ADC ? carry_in : 0;
        unsigned __int128 full = (unsigned __int128)a + b + c;
        r = (uint64_t)full & m;
        if (width >= 8 ? (full >> 64) != 0 : (full >> (8 * width)) != 0)
            f |= F_CF;
        if ((a ^ r) & (b ^ r) & sign)
            f |= F_OF;
        break;
    }
    case OP_SUB:
    case OP_SBB:
    case OP_CMP: {
        unsigned c = op == OP_SBB ? carry_in : 0;
        r = (a - b - c) & m;
        if ((unsigned __int128)a < (unsigned __int128)b + c)
            f |= F_CF;
        if ((a ^ b) & (a ^ r) & sign)
            f |= F_OF;
        break;
    }
    case OP_OR: r = a | b; break;
    case OP_AND:
    case OP_TEST: r = a & b; break;
    case OP_XOR: r = a ^ b; break;
    default: r = b; break;
    }
    if (op != OP_OR && op != OP_AND && op != OP_TEST && op != OP_XOR && ((a ^ b ^ r) & 0x10))
        f |= F_AF;
    if (r == 0)
        f |= F_ZF;
    if (r & sign)
        f |= F_SF;
    if (!__builtin_parity((unsigned)(r & 0xFF)))
        f |= F_PF;
    *flags = (*flags & ~F_ARITH) | f;
    return r;
}

/* --- arm64 ------------------------------------------------------------------ */
int mmio_decode_arm64(uint32_t word, struct mmio_insn *out)
{
    memset(out, 0, sizeof *out);
    out->length = 4;
    out->reg = (int)(word & 31);
    out->base = (int)((word >> 5) & 31);
    out->op = OP_MOV;
    int size = (int)(word >> 30), opc;
    if ((word & 0x3FFFFC00u) == 0x08DFFC00u || (word & 0x3FFFFC00u) == 0x089FFC00u) { /* LDAR, STLR */
        out->width = 1 << size;
        out->kind = (word & (1u << 22)) ? MMIO_LOAD : MMIO_STORE;
        out->dest_width = size == 3 ? 8 : 4;
        return 1;
    }
    if ((word & 0x3F000000u) == 0x39000000u) { /* unsigned offset (V = 0: not SIMD) */
        opc = (int)((word >> 22) & 3);
    } else if ((word & 0x3F200C00u) == 0x38200800u) { /* register offset */
        opc = (int)((word >> 22) & 3);
    } else if ((word & 0x3F200000u) == 0x38000000u && ((word >> 10) & 3) != 2) { /* unscaled, post, pre */
        opc = (int)((word >> 22) & 3);
        int kind = (int)((word >> 10) & 3);
        if (kind == 1 || kind == 3) {
            out->writeback = 1;
            out->offset = (int32_t)(word << 11) >> 23; /* imm9, sign-extended */
        }
    } else {
        return 0;
    }
    out->width = 1 << size;
    if (opc == 0) {
        out->kind = MMIO_STORE;
    } else if (opc == 1) {
        out->kind = MMIO_LOAD;
        out->dest_width = size == 3 ? 8 : 4;
    } else if (size == 3 || (size == 2 && opc == 3)) {
        return 0; /* PRFM, and no LDRSW into a W register */
    } else {
        out->kind = MMIO_LOAD;
        out->sign = 1;
        out->dest_width = opc == 2 ? 8 : 4;
    }
    if (out->writeback && out->base == out->reg && out->reg != 31)
        return 0; /* unpredictable */
    return 1;
}

/* --- the running machine ------------------------------------------------------ */
static uint64_t loaded(const struct mmio_insn *i, uint64_t value, uint64_t old)
{
    uint64_t m = mask_of(i->width);
    value &= m;
    if (i->sign && (value & (1ull << (8 * i->width - 1))))
        value |= ~m;
    switch (i->dest_width) {
    case 1: return (old & ~0xFFull) | (value & 0xFF);
    case 2: return (old & ~0xFFFFull) | (value & 0xFFFF);
    case 4: return value & 0xFFFFFFFFull;
    default: return value;
    }
}

#if defined(__x86_64__)
static const int GREG[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                             REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

uint64_t mmio_pc(void *uc)
{
    return (uint64_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
}

int mmio_decode(void *uc, struct mmio_access *acc)
{
    if (!mmio_decode_x86((const uint8_t *)mmio_pc(uc), &acc->insn))
        return 0;
    acc->kind = acc->insn.kind;
    acc->width = acc->insn.width;
    return 1;
}

static uint64_t reg_value(greg_t *g, const struct mmio_insn *i)
{
    if (i->reg < 0)
        return (uint64_t)i->imm;
    if (i->high_byte)
        return ((uint64_t)g[GREG[i->reg - 4]] >> 8) & 0xFF;
    return (uint64_t)g[GREG[i->reg]];
}

int mmio_complete(void *ucv, struct mmio_access *acc, uint64_t *value)
{
    ucontext_t *uc = ucv;
    greg_t *g = uc->uc_mcontext.gregs;
    const struct mmio_insn *i = &acc->insn;
    int write = 0;
    uint64_t flags = (uint64_t)g[REG_EFL];
    switch (i->kind) {
    case MMIO_LOAD:
        if (i->high_byte) {
            uint64_t old = (uint64_t)g[GREG[i->reg - 4]];
            g[GREG[i->reg - 4]] = (greg_t)((old & ~0xFF00ull) | (*value & 0xFF) << 8);
        } else {
            g[GREG[i->reg]] = (greg_t)loaded(i, *value, (uint64_t)g[GREG[i->reg]]);
        }
        break;
    case MMIO_STORE:
        *value = reg_value(g, i) & mask_of(i->width);
        write = 1;
        break;
    case MMIO_RMW:
        *value = mmio_alu(i->op, i->width, *value, reg_value(g, i), &flags);
        write = 1;
        break;
    case MMIO_COMPARE:
        if (i->reversed)
            mmio_alu(i->op, i->width, reg_value(g, i), *value, &flags);
        else
            mmio_alu(i->op, i->width, *value, reg_value(g, i), &flags);
        break;
    case MMIO_ALU: {
        struct mmio_insn as_load = *i;
        uint64_t r = mmio_alu(i->op, i->width, reg_value(g, i), *value, &flags);
        as_load.dest_width = i->width;
        if (i->high_byte)
            g[GREG[i->reg - 4]] = (greg_t)(((uint64_t)g[GREG[i->reg - 4]] & ~0xFF00ull) | (r & 0xFF) << 8);
        else
            g[GREG[i->reg]] = (greg_t)loaded(&as_load, r, (uint64_t)g[GREG[i->reg]]);
        break;
    }
    }
    g[REG_EFL] = (greg_t)flags;
    g[REG_RIP] += i->length;
    return write;
}

#elif defined(__aarch64__)
uint64_t mmio_pc(void *uc)
{
    return ((ucontext_t *)uc)->uc_mcontext.pc;
}

int mmio_decode(void *uc, struct mmio_access *acc)
{
    if (!mmio_decode_arm64(*(const uint32_t *)mmio_pc(uc), &acc->insn))
        return 0;
    acc->kind = acc->insn.kind;
    acc->width = acc->insn.width;
    return 1;
}

int mmio_complete(void *ucv, struct mmio_access *acc, uint64_t *value)
{
    mcontext_t *m = &((ucontext_t *)ucv)->uc_mcontext;
    const struct mmio_insn *i = &acc->insn;
    int write = i->kind == MMIO_STORE;
    if (write)
        *value = i->reg == 31 ? 0 : m->regs[i->reg] & mask_of(i->width);
    else if (i->reg != 31)
        m->regs[i->reg] = loaded(i, *value, 0);
    if (i->writeback) {
        if (i->base == 31)
            m->sp += (uint64_t)i->offset;
        else
            m->regs[i->base] += (uint64_t)i->offset;
    }
    m->pc += 4;
    return write;
}

#else
uint64_t mmio_pc(void *uc)
{
    (void)uc;
    return 0;
}

int mmio_decode(void *uc, struct mmio_access *acc)
{
    (void)uc;
    (void)acc;
    return 0; /* another machine: nothing is emulated, the fault is the program's */
}

int mmio_complete(void *uc, struct mmio_access *acc, uint64_t *value)
{
    (void)uc;
    (void)acc;
    (void)value;
    return 0;
}
#endif
