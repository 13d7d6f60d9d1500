# hello.s: each tile's supervisor starts a worker and waits for it to
# exit, then puts 0xe110 ("hello") and its tile id in DBG_DATA and syncs
# with the host (GS1: the host gets signal 46).
    .supervisor
    .globl _start
_start:
    setzi $m1, worker & 0xfffff         # the worker's address, low 20 bits
    or    $m1, $m1, worker & 0xfff00000 # and the rest
    run   $m1, $m15, 0                  # start a worker there
    sync  2                             # wait until the workers have exited
    get   $m0, $TILE_ID
    setzi $m2, 3
wait:
    brnzdec $m2, wait                   # a short count down
    call  $m10, greet
    put   $DBG_DATA, $m0
    sync  4                             # GS1 with the host
spin:
    bri   spin
greet:
    or    $m0, $m0, 0xe1100000          # the top 12 bits: 0xe11
    br    $m10

    .worker
    .align 8
worker:
    { nop ; setzi $a0, 1.0h }           # a bundle: both pipelines at once
    exitz $m15
