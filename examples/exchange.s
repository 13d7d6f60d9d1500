# exchange.s: logical tile 0 sends the four words at `message` to logical
# tile 1, which stores them at `inbox`; both then branch to 0, which ends
# a supervisor (it goes inactive). Each tile counts exchange events from
# the sync 3 that opens the phase. Tile 1 (physical tile 2) sees a word
# that tile 0 (physical 0) sends at its event e at its own event e - 28,
# and stores it 52 events later: so tile 0 waits 28 events, then sends,
# and tile 1 names tile 0 on its multiplexer for the events the words
# arrive at (docs/execution.md, "Exchange"). The data lie in a memory
# element of their own, away from the code: a send from, or a store into,
# the element a tile fetches code from is an exchange error. Needs a GC200
# (ipu2, ipu21); run it on two tiles: ipufs exec exchange.elf --tiles 0-1.
    .text 0x4c000                       # where a GC200's tile memory starts
    .supervisor
    .globl _start
_start:
    setzi $m1, inbox & 0xfffff
    or    $m1, $m1, inbox & 0xfff00000
    put   $INCOMING_BASE, $m1           # where received words go (plus $INCOMING_DELTA, 0 after the sync)
    put   $OUTGOING_BASE, $m15          # sends name absolute word addresses
    get   $m2, $TILE_ID                 # the physical tile: 0 sends, 2 receives
    brnz  $m2, receive
    sync  3                             # event 0 of the phase
    delay 27                            # events 1-28
    send  3, message >> 2, 1            # events 29-32: one word each, direction 1
    br    $m15                          # done: branch to 0
receive:
    setzi $m3, 0x640                    # the multiplexer's neutral value
    sync  3
    put   $INCOMING_MUX, $m15           # from event 1: listen to physical tile 0
    delay 3                             # events 1-4: the words arrive
    put   $INCOMING_MUX, $m3            # from event 5: listen to nobody
    delay 60                            # events 5-65: they are stored at 53-56
    br    $m15

    .data 0x60000
message:
    .word 0x11111111, 0x22222222, 0x33333333, 0x44444444
inbox:
    .space 16
