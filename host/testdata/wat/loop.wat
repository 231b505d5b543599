;; Calls run.log n times with a fixed request, then sets an output: a
;; minimal guest with no language runtime, for journal and replay tests.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; {"msg": "x", "level": 1}: canonical CBOR (shorter key first).
  (data (i32.const 0) "\a2\63msg\61x\65level\01")
  ;; {"output": h'6f6b'}
  (data (i32.const 32) "\a1\66output\42ok")
  (func (export "_start")
    (local $i i32)
    (loop $again
      (drop (call $call (i32.const 3) (i32.const 0) (i32.const 14) (i32.const 128) (i32.const 64)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 300))))
    (drop (call $call (i32.const 2) (i32.const 32) (i32.const 11) (i32.const 128) (i32.const 64)))))
