;; spinloop is the compute-heavy guest of the interruption benchmark: one
;; run.input call to learn N (the run input's 8 bytes, little-endian, as
;; in loop.wat), then a tight loop of N iterations that never calls the
;; host, its result stored in memory.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a0")
  (func (export "_start")
    (local $r i64) (local $n i64) (local $acc i64)
    (local.set $r (call $call (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 1024)))
    (local.set $n (i64.load (i32.add (i32.const 1016) (i32.wrap_i64 (local.get $r)))))
    (block $done
      (loop $again
        (br_if $done (i64.eqz (local.get $n)))
        (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 31)) (local.get $n)))
        (local.set $n (i64.sub (local.get $n) (i64.const 1)))
        (br $again)))
    (i64.store (i32.const 8) (local.get $acc))))
