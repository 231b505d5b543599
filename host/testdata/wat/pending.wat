;; A response left pending is dropped by the next call on the module: take
;; after an intervening call finds nothing. Traps (unreachable) otherwise.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:run" "take" (func $take (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; {"msg": "x", "level": 1}
  (data (i32.const 0) "\a2\63msg\61x\65level\01")
  (func (export "_start")
    (local $r i64)
    ;; run.input with no room for the response: pending (status 1).
    (local.set $r (call $call (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 256) (i32.const 0)))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 1)) (then unreachable))
    ;; take with a buffer one byte too small: buffer_too_small (10), still pending.
    (local.set $r (call $take (i32.const 256) (i32.sub (i32.wrap_i64 (local.get $r)) (i32.const 1))))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 10)) (then unreachable))
    ;; run.log, whose empty response fits.
    (local.set $r (call $call (i32.const 3) (i32.const 0) (i32.const 14) (i32.const 256) (i32.const 64)))
    (if (i64.ne (local.get $r) (i64.const 0)) (then unreachable))
    ;; The input's response is gone: no_pending (9).
    (local.set $r (call $take (i32.const 256) (i32.const 4096)))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 9)) (then unreachable))))
