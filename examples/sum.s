# sum.s: each tile adds up the numbers the host wrote at `input` (a count,
# then that many 32-bit words, at most 64), puts the sum in DBG_DATA and
# at `sum`, and syncs with the host (GS1: the host gets signal 46).
# Runs on every architecture: no address is written in it.
    .supervisor
    .globl _start
_start:
    setzi $m2, input & 0xfffff          # input's address, low 20 bits
    or    $m2, $m2, input & 0xfff00000  # and the rest (tile memory may lie past 1 MiB)
    ld32  $m3, $m2, $m15, 0             # the count
    setzi $m4, 0                        # the sum
    setzi $m5, 4                        # the values start a word in
    brz   $m3, done
    add   $m3, $m3, -1                  # brnzdec runs the loop count times
loop:
    ld32step $m6, $m2, $m5+=, 1
    add   $m4, $m4, $m6
    brnzdec $m3, loop
done:
    put   $DBG_DATA, $m4
    st32  $m4, $m2, $m15, 65            # sum is 65 words after input
    sync  4                             # GS1 with the host
spin:
    bri   spin

    .data
input:
    .word 0                             # the count
    .space 256                          # up to 64 values
sum:
    .word 0
