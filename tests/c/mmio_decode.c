/* The compatibility library's instruction decoders (native/src/
 * compat_decode.c) against vectors: x86-64 forms gcc and rustc/LLVM emit
 * for volatile accesses (assembled by hand from the SDM's encodings) and
 * arm64 loads and stores (from the Arm ARM's encodings), both decoded on
 * whatever machine runs this. Prints one line per failure and "ok N". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../native/src/compat_decode.h"

static int failures, checks;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("FAIL line %d: ", __LINE__);                                \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

struct x86_case {
    const char *text;
    uint8_t bytes[16];
    int ok, kind, op, width, length, reg, high, dest, sign, reversed;
    int64_t imm;
};

static const struct x86_case X86[] = {
    {"mov eax, [rdi+0x20]", {0x8b, 0x47, 0x20}, 1, MMIO_LOAD, OP_MOV, 4, 3, 0, 0, 4, 0, 0, 0},
    {"mov [rdi+0xc], edx", {0x89, 0x57, 0x0c}, 1, MMIO_STORE, OP_MOV, 4, 3, 2, 0, 0, 0, 0, 0},
    {"mov dword [rdi+0x24], 6", {0xc7, 0x47, 0x24, 6, 0, 0, 0}, 1, MMIO_STORE, OP_MOV, 4, 7, -1, 0, 0, 0, 0, 6},
    {"mov dword [rdi+rsi+0x30024], 6", {0xc7, 0x84, 0x37, 0x24, 0x00, 0x03, 0x00, 6, 0, 0, 0}, 1, MMIO_STORE, OP_MOV,
     4, 11, -1, 0, 0, 0, 0, 6},
    {"cmp dword [rdi+0x14], 0", {0x83, 0x7f, 0x14, 0x00}, 1, MMIO_COMPARE, OP_CMP, 4, 4, -1, 0, 0, 0, 0, 0},
    {"or [rdi+rsi], edx", {0x09, 0x14, 0x37}, 1, MMIO_RMW, OP_OR, 4, 3, 2, 0, 0, 0, 0, 0},
    {"mov r8d, [rdi+8]", {0x44, 0x8b, 0x47, 0x08}, 1, MMIO_LOAD, OP_MOV, 4, 4, 8, 0, 4, 0, 0, 0},
    {"mov rax, [rdi]", {0x48, 0x8b, 0x07}, 1, MMIO_LOAD, OP_MOV, 8, 3, 0, 0, 8, 0, 0, 0},
    {"mov [rdi], ax", {0x66, 0x89, 0x07}, 1, MMIO_STORE, OP_MOV, 2, 3, 0, 0, 0, 0, 0, 0},
    {"movzx eax, byte [rdi+0x20]", {0x0f, 0xb6, 0x47, 0x20}, 1, MMIO_LOAD, OP_MOV, 1, 4, 0, 0, 4, 0, 0, 0},
    {"movsx rax, word [rdi]", {0x48, 0x0f, 0xbf, 0x07}, 1, MMIO_LOAD, OP_MOV, 2, 4, 0, 0, 8, 1, 0, 0},
    {"mov ah, [rdi+1]", {0x8a, 0x67, 0x01}, 1, MMIO_LOAD, OP_MOV, 1, 3, 4, 1, 1, 0, 0, 0},
    {"mov spl... with REX: mov [rdi], sil", {0x40, 0x88, 0x37}, 1, MMIO_STORE, OP_MOV, 1, 3, 6, 0, 0, 0, 0, 0},
    {"test byte [rdi+0x20], 8", {0xf6, 0x47, 0x20, 0x08}, 1, MMIO_COMPARE, OP_TEST, 1, 4, -1, 0, 0, 0, 0, 8},
    {"test [rdi], ecx", {0x85, 0x0f}, 1, MMIO_COMPARE, OP_TEST, 4, 2, 1, 0, 0, 0, 0, 0},
    {"cmp eax, [rdi]", {0x3b, 0x07}, 1, MMIO_COMPARE, OP_CMP, 4, 2, 0, 0, 0, 0, 1, 0},
    {"add eax, [rdi]", {0x03, 0x07}, 1, MMIO_ALU, OP_ADD, 4, 2, 0, 0, 0, 0, 1, 0},
    {"and dword [rdi], 0xfffffffe", {0x83, 0x27, 0xfe}, 1, MMIO_RMW, OP_AND, 4, 3, -1, 0, 0, 0, 0, -2},
    {"mov eax, [rip+0x10]", {0x8b, 0x05, 0x10, 0, 0, 0}, 1, MMIO_LOAD, OP_MOV, 4, 6, 0, 0, 4, 0, 0, 0},
    {"mov eax, gs:[0x28]", {0x65, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}, 1, MMIO_LOAD, OP_MOV, 4, 8, 0, 0, 4, 0, 0, 0},
    {"lock or [rdi], eax", {0xf0, 0x09, 0x07}, 1, MMIO_RMW, OP_OR, 4, 3, 0, 0, 0, 0, 0, 0},
    {"mov eax, eax (no memory)", {0x89, 0xc0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"movups xmm0, [rdi]", {0x0f, 0x10, 0x07}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

struct arm_case {
    const char *text;
    uint32_t word;
    int ok, kind, width, reg, base, dest, sign, writeback;
    int64_t offset;
};

static const struct arm_case ARM[] = {
    {"ldr w1, [x0, #8]", 0xB9400801u, 1, MMIO_LOAD, 4, 1, 0, 4, 0, 0, 0},
    {"str w1, [x0, #36]", 0xB9002401u, 1, MMIO_STORE, 4, 1, 0, 0, 0, 0, 0},
    {"str wzr, [x0, #16]", 0xB900101Fu, 1, MMIO_STORE, 4, 31, 0, 0, 0, 0, 0},
    {"ldr x2, [x3]", 0xF9400062u, 1, MMIO_LOAD, 8, 2, 3, 8, 0, 0, 0},
    {"ldrb w4, [x5, #1]", 0x394004A4u, 1, MMIO_LOAD, 1, 4, 5, 4, 0, 0, 0},
    {"ldrh w4, [x5, #2]", 0x794004A4u, 1, MMIO_LOAD, 2, 4, 5, 4, 0, 0, 0},
    {"ldrsw x6, [x7, #4]", 0xB98004E6u, 1, MMIO_LOAD, 4, 6, 7, 8, 1, 0, 0},
    {"ldrsh w6, [x7]", 0x79C000E6u, 1, MMIO_LOAD, 2, 6, 7, 4, 1, 0, 0},
    {"ldr w1, [x0, x2]", 0xB8626801u, 1, MMIO_LOAD, 4, 1, 0, 4, 0, 0, 0},
    {"ldur w1, [x0, #-4]", 0xB85FC001u, 1, MMIO_LOAD, 4, 1, 0, 4, 0, 0, 0},
    {"str w1, [x0], #4", 0xB8004401u, 1, MMIO_STORE, 4, 1, 0, 0, 0, 1, 4},
    {"str w1, [x0, #-8]!", 0xB81F8C01u, 1, MMIO_STORE, 4, 1, 0, 0, 0, 1, -8},
    {"ldar w1, [x0]", 0x88DFFC01u, 1, MMIO_LOAD, 4, 1, 0, 4, 0, 0, 0},
    {"stlr w1, [x0]", 0x889FFC01u, 1, MMIO_STORE, 4, 1, 0, 0, 0, 0, 0},
    {"ldr s0, [x0] (SIMD)", 0xBD400000u, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"prfm pldl1keep, [x0]", 0xF9800000u, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"ldp w1, w2, [x0]", 0x29400801u, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

int main(void)
{
    for (size_t k = 0; k < sizeof X86 / sizeof X86[0]; k++) {
        const struct x86_case *c = &X86[k];
        struct mmio_insn i;
        int ok = mmio_decode_x86(c->bytes, &i);
        CHECK(ok == c->ok, "%s: decoded %d", c->text, ok);
        if (!ok || !c->ok)
            continue;
        CHECK((int)i.kind == c->kind && (int)i.op == c->op && i.width == c->width && i.length == c->length
                  && i.reg == c->reg && i.high_byte == c->high && i.sign == c->sign && i.reversed == c->reversed,
              "%s: kind %d op %d width %d length %d reg %d high %d sign %d reversed %d", c->text, i.kind, i.op,
              i.width, i.length, i.reg, i.high_byte, i.sign, i.reversed);
        CHECK(c->kind != MMIO_LOAD || i.dest_width == c->dest, "%s: dest_width %d", c->text, i.dest_width);
        CHECK(c->reg >= 0 || i.imm == c->imm, "%s: imm %lld", c->text, (long long)i.imm);
    }
    for (size_t k = 0; k < sizeof ARM / sizeof ARM[0]; k++) {
        const struct arm_case *c = &ARM[k];
        struct mmio_insn i;
        int ok = mmio_decode_arm64(c->word, &i);
        CHECK(ok == c->ok, "%s: decoded %d", c->text, ok);
        if (!ok || !c->ok)
            continue;
        CHECK((int)i.kind == c->kind && i.width == c->width && i.reg == c->reg && i.base == c->base
                  && i.sign == c->sign && i.writeback == c->writeback && i.offset == c->offset,
              "%s: kind %d width %d reg %d base %d sign %d writeback %d offset %lld", c->text, i.kind, i.width,
              i.reg, i.base, i.sign, i.writeback, (long long)i.offset);
        CHECK(c->kind != MMIO_LOAD || i.dest_width == c->dest, "%s: dest_width %d", c->text, i.dest_width);
    }
    /* Flags as the processor sets them (CF 0x1, PF 0x4, AF 0x10, ZF 0x40, SF 0x80, OF 0x800). */
    uint64_t f = 0;
    CHECK(mmio_alu(OP_CMP, 4, 5, 5, &f) == 0 && f == 0x44, "cmp 5, 5: flags 0x%llx", (unsigned long long)f);
    f = 0;
    mmio_alu(OP_CMP, 4, 0, 1, &f);
    CHECK(f == 0x95, "cmp 0, 1: flags 0x%llx", (unsigned long long)f);
    f = 0;
    CHECK(mmio_alu(OP_ADD, 4, 0xFFFFFFFF, 1, &f) == 0 && f == 0x55, "add: flags 0x%llx", (unsigned long long)f);
    f = 0x801;
    CHECK(mmio_alu(OP_OR, 4, 0x40000000, 2, &f) == 0x40000002 && f == 0, "or: flags 0x%llx", (unsigned long long)f);
    f = 1;
    CHECK(mmio_alu(OP_ADC, 1, 0x7F, 0, &f) == 0x80 && f == 0x890, "adc: flags 0x%llx", (unsigned long long)f);
    f = 0;
    CHECK(mmio_alu(OP_TEST, 4, 0x8, 0x8, &f) == 8 && f == 0, "test: flags 0x%llx", (unsigned long long)f);
    printf("%s %d\n", failures ? "failed" : "ok", checks);
    return failures != 0;
}
