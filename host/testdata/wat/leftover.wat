;; Looks for what an earlier instance left in its memory: grows its memory
;; from 4 to 8 pages, counts the bytes past its own 64 that are not zero,
;; sets the output to the count (4 bytes, little-endian), then writes 0xa5
;; over all of its memory past those 64 bytes, as a secret the next run of
;; the host must not find.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 4)
  ;; {"output": h'<4 bytes>'}
  (data (i32.const 0) "\a1\66output\44")
  (func (export "_start")
    (local $p i32)
    (local $n i32)
    (drop (memory.grow (i32.const 4)))
    (local.set $p (i32.const 64))
    (block $end
      (loop $next
        (br_if $end (i32.ge_u (local.get $p) (i32.const 0x80000)))
        (if (i32.load8_u (local.get $p))
          (then (local.set $n (i32.add (local.get $n) (i32.const 1)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (i32.store (i32.const 9) (local.get $n))
    (drop (call $call (i32.const 2) (i32.const 0) (i32.const 13) (i32.const 64) (i32.const 0)))
    (memory.fill (i32.const 64) (i32.const 0xa5) (i32.const 0x7ffc0))))
