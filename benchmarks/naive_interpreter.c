/* The yardstick of the executor's speed (docs/executor-speed.md): a naive
 * interpreter of the benchmark's counted loop, written as the simplest C
 * interpreter would be: fetch the word at the PC, pick the rule by its
 * opcode bits, take the operands from their fields, execute, count. It
 * knows two rules, those of the loop's words,
 *
 *     loop: add $mD, $mS, imm16      0x22 in bits 30..24 (add_mmmn_si)
 *           brnzdec $mR, loop        0x13 in bits 30..24, bit 19 set (brnzdec_mmmn_zi)
 *
 * and stops at any other word. The words come from the command line, as
 * ipufs's assembler encodes them, so both run the same program:
 *
 *     naive_interpreter BASE COUNT WORD...   # prints instructions per second of CPU time
 *
 * $m1 holds COUNT at the start (the loop's counter). Built and run by
 * benchmarks/execution_daemon.py in the same run as the figures it is
 * compared with. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s BASE COUNT WORD...\n", argv[0]);
        return 2;
    }
    uint32_t base = (uint32_t)strtoul(argv[1], NULL, 0);
    uint32_t count = (uint32_t)strtoul(argv[2], NULL, 0);
    int n = argc - 3;
    uint32_t *memory = calloc((size_t)n, sizeof *memory);
    if (!memory)
        return 1;
    for (int i = 0; i < n; i++)
        memory[i] = (uint32_t)strtoul(argv[3 + i], NULL, 0);
    uint32_t m[16] = { 0 };
    m[1] = count;
    uint32_t pc = base;
    uint64_t retired = 0;
    double start = cpu_seconds();
    for (;;) {
        uint32_t index = (pc - base) >> 2;
        if (index >= (uint32_t)n)
            break;
        uint32_t word = memory[index];
        uint32_t next = pc + 4;
        switch (word >> 24 & 0x7F) {
        case 0x22: {  /* add $mD, $mS, imm16 */
            uint32_t d = word >> 16 & 15, s = word >> 20 & 15;
            uint32_t v = m[s] + (uint32_t)(int32_t)(int16_t)(word & 0xFFFF);
            if (d != 15)
                m[d] = v;
            break;
        }
        case 0x13:  /* brnzdec $mR, target */
            if (word & 0x80000) {
                uint32_t r = word >> 20 & 15;
                if (m[r] != 0) {
                    if (r != 15)
                        m[r] = m[r] - 1;
                    next = (word & 0x7FFFF) << 2;
                }
                break;
            }
            goto done;
        default:
            goto done;
        }
        pc = next;
        retired++;
    }
done:;
    double seconds = cpu_seconds() - start;
    printf("%" PRIu64 " %.6f %.1f\n", retired, seconds, (double)retired / seconds);
    return m[2] == 0xFFFFFFFFu;  /* the result is used */
}
