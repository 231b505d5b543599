;; Makes 50 kv.put calls of {"key": "k", "value": h'01'}: 50 durable
;; commits, for tests of concurrent runs on one store.
(module
  (import "agentrt:kv" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a2\63key\61k\65value\41\01")
  (func (export "_start")
    (local $i i32)
    (loop $again
      (if (i64.ne (call $call (i32.const 2) (i32.const 0) (i32.const 15) (i32.const 128) (i32.const 64)) (i64.const 0))
        (then unreachable))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 50))))))
