/* Every x86-64 instruction form the compatibility library emulates on a
 * trapped register page, run for real on the mapped SCRATCH register of
 * /dev/ipu0 (plain read-write, on the page of ipufs's own registers, so
 * trapped) and on ordinary memory: the registers and flags each leaves,
 * and what memory holds after, must agree (the processor is the oracle).
 * Also a C compiler's volatile accesses (gcc -O0/-O2 build this file).
 * Prints one line per form and "ok N" (exit 0) or "FAIL ..." lines. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../native/include/ipufs/ipu.h"

#define FLAGS 0x8D5ull /* CF PF AF ZF SF OF */

struct outcome {
    uint64_t rax, rdx, flags;
    uint32_t memory;
};

/* One form: memory at %rdi holds `start`; rax and rdx start as given. */
#define FORM(name, insn)                                                                     \
    static struct outcome name(volatile uint32_t *m, uint32_t start, uint64_t rax, uint64_t rdx) \
    {                                                                                        \
        struct outcome o;                                                                    \
        *m = start;                                                                          \
        __asm__ volatile("xor %%ecx, %%ecx\n\t" insn "\n\tpushfq\n\tpopq %%rcx"                 \
                         : "+a"(rax), "+d"(rdx), "=c"(o.flags)                               \
                         : "D"(m)                                                            \
                         : "memory", "cc");                                                  \
        o.rax = rax;                                                                         \
        o.rdx = rdx;                                                                         \
        o.flags &= FLAGS;                                                                    \
        o.memory = *m;                                                                       \
        return o;                                                                            \
    }

FORM(load, "movl (%%rdi), %%eax")
FORM(load64, "movq (%%rdi), %%rax")
FORM(store, "movl %%edx, (%%rdi)")
FORM(store_imm, "movl $0x12345678, (%%rdi)")
FORM(store16, "movw %%dx, (%%rdi)")
FORM(store8, "movb %%dl, 1(%%rdi)")
FORM(load_zx8, "movzbl 1(%%rdi), %%eax")
FORM(load_sx16, "movswq 2(%%rdi), %%rax")
FORM(load_ah, "movb 1(%%rdi), %%ah")
FORM(or_reg, "orl %%edx, (%%rdi)")
FORM(and_imm8, "andl $-2, (%%rdi)")
FORM(add_imm32, "addl $0x10000, (%%rdi)")
FORM(sub_reg, "subl %%edx, (%%rdi)")
FORM(xor_to_reg, "xorl (%%rdi), %%eax")
FORM(add_to_reg, "addl (%%rdi), %%eax")
FORM(cmp_zero, "cmpl $0, (%%rdi)")
FORM(cmp_reg, "cmpl %%edx, (%%rdi)")
FORM(cmp_reversed, "cmpl (%%rdi), %%edx")
FORM(test_byte, "testb $8, (%%rdi)")
FORM(test_reg, "testl %%edx, (%%rdi)")
FORM(adc_imm8, "stc\n\tadcl $1, (%%rdi)")

typedef struct outcome (*form)(volatile uint32_t *, uint32_t, uint64_t, uint64_t);

int main(void)
{
    static const struct { const char *name; form f; } forms[] = {
        {"movl load", load}, {"movq load", load64}, {"movl store", store}, {"movl store imm", store_imm},
        {"movw store", store16}, {"movb store", store8}, {"movzbl", load_zx8}, {"movswq", load_sx16},
        {"movb to ah", load_ah}, {"orl r, m", or_reg}, {"andl imm8, m", and_imm8}, {"addl imm32, m", add_imm32},
        {"subl r, m", sub_reg}, {"xorl m, r", xor_to_reg}, {"addl m, r", add_to_reg}, {"cmpl $0, m", cmp_zero},
        {"cmpl r, m", cmp_reg}, {"cmpl m, r", cmp_reversed}, {"testb imm, m", test_byte}, {"testl r, m", test_reg},
        {"adcl imm8, m", adc_imm8},
    };
    static const uint32_t starts[] = {0, 8, 0x80000000u, 0xFFFFFFFFu, 0x12345678u};
    int fd = open("/dev/ipu0", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        perror("open /dev/ipu0");
        return 2;
    }
    volatile uint32_t *bar = mmap(NULL, 0x4000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    /* 8 bytes: SCRATCH and the plain word after it (movq reads both). */
    volatile uint32_t *scratch = bar + IPU_REG_SCRATCH / 4;
    static volatile uint32_t plain[2];
    int failures = 0, checks = 0;
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
            scratch[1] = plain[1] = 0x55AA55AAu;
            struct outcome want = forms[k].f(plain, starts[s], 0x1111111122222222ull, 0x3333333380000001ull);
            struct outcome got = forms[k].f(scratch, starts[s], 0x1111111122222222ull, 0x3333333380000001ull);
            checks++;
            if (memcmp(&want, &got, sizeof want) != 0) {
                failures++;
                printf("FAIL %s from 0x%x: rax %llx/%llx rdx %llx/%llx flags %llx/%llx memory %x/%x\n",
                       forms[k].name, starts[s], (unsigned long long)got.rax, (unsigned long long)want.rax,
                       (unsigned long long)got.rdx, (unsigned long long)want.rdx, (unsigned long long)got.flags,
                       (unsigned long long)want.flags, got.memory, want.memory);
            }
        }
    }
    /* What a C compiler makes of volatile accesses. */
    scratch[0] = 7;
    scratch[0] |= 0x100;
    checks++;
    if (scratch[0] != 0x107 || bar[IPU_REG_VENDOR_ID / 4] != 0x1d95) {
        failures++;
        printf("FAIL C volatile: scratch 0x%x vendor 0x%x\n", scratch[0], bar[IPU_REG_VENDOR_ID / 4]);
    }
    /* A store to a read-only register is undone before the next load sees it. */
    bar[IPU_REG_VENDOR_ID / 4] = 0;
    checks++;
    if (bar[IPU_REG_VENDOR_ID / 4] != 0x1d95) {
        failures++;
        printf("FAIL read-only: vendor 0x%x after a store\n", bar[IPU_REG_VENDOR_ID / 4]);
    }
    printf("%s %d\n", failures ? "failed" : "ok", checks);
    return failures != 0;
}
