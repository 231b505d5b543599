;; fib is the compute-heavy guest of the interruption benchmark without a
;; loop: one run.input call to learn N (as in loop.wat), then naive
;; recursive fib(N), its result stored in memory.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a0")
  (func $fib (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else (i64.add (call $fib (i64.sub (local.get $n) (i64.const 1)))
                     (call $fib (i64.sub (local.get $n) (i64.const 2)))))))
  (func (export "_start")
    (local $r i64)
    (local.set $r (call $call (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 1024)))
    (i64.store (i32.const 8) (call $fib (i64.load (i32.add (i32.const 1016) (i32.wrap_i64 (local.get $r))))))))
