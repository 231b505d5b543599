;; Makes three run.log calls, then computes forever without calling the
;; host again: a guest that cannot be stopped at a call.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; {"msg": "x", "level": 1}
  (data (i32.const 0) "\a2\63msg\61x\65level\01")
  (func (export "_start")
    (local $i i32)
    (loop $log
      (drop (call $call (i32.const 3) (i32.const 0) (i32.const 14) (i32.const 128) (i32.const 64)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $log (i32.lt_u (local.get $i) (i32.const 3))))
    (loop $spin
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $spin))))
