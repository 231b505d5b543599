;; Makes three kv.put calls, of the keys "new/a", "new/b" and "old/c"
;; (value h'01'), then ends: a writer for the kv triggers' tests.
(module
  (import "agentrt:kv" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; {"key": "new/a", "value": h'01'} and the like: canonical CBOR, 19 bytes.
  (data (i32.const 0) "\a2\63key\65new/a\65value\41\01")
  (data (i32.const 32) "\a2\63key\65new/b\65value\41\01")
  (data (i32.const 64) "\a2\63key\65old/c\65value\41\01")
  (func (export "_start")
    (if (i64.ne (call $call (i32.const 2) (i32.const 0) (i32.const 19) (i32.const 128) (i32.const 64)) (i64.const 0))
      (then unreachable))
    (if (i64.ne (call $call (i32.const 2) (i32.const 32) (i32.const 19) (i32.const 128) (i32.const 64)) (i64.const 0))
      (then unreachable))
    (if (i64.ne (call $call (i32.const 2) (i32.const 64) (i32.const 19) (i32.const 128) (i32.const 64)) (i64.const 0))
      (then unreachable))))
