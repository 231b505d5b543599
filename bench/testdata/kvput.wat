;; kvput is the guest of the durable-call benchmarks. It imports agentrt:run
;; and agentrt:kv (call, take) and nothing else.
;;
;; It makes one run.input call to learn its loop count N (the last 8 bytes of
;; the response, as in loop.wat), then N kv.put calls, each an effect whose
;; intent is durable before the write. Call i writes key "k%08x" (i) with a
;; 100-byte value; the 123-byte request is the canonical CBOR of
;; abi.KVPutRequest, patched in place. Any status but ok traps. A run makes
;; N+1 import calls, N of them durable.
(module
  (import "agentrt:run" "call" (func $run_call (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:run" "take" (func $run_take (param i32 i32) (result i64)))
  (import "agentrt:kv" "call" (func $kv_call (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:kv" "take" (func $kv_take (param i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; offset 0: the request of run.input (abi.Empty)
  (data (i32.const 0) "\a0")
  ;; offset 64: {"key": "k00000000", "value": h'76...76' (100 bytes)}
  ;;   64 a2 | 65 63 "key" | 69 69 "k" | 71..78 hex digits | 79 65 "value" |
  ;;   85 58 64 | 87..186 value
  (data (i32.const 64) "\a2\63key\69k00000000\65value\58\64")
  (data (i32.const 87) "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv")

  ;; $key writes i as 8 lower-case hex digits at offset 71.
  (func $key (param $i i32)
    (local $k i32)
    (local $d i32)
    (loop $digit
      (local.set $d (i32.and
        (i32.shr_u (local.get $i) (i32.sub (i32.const 28) (i32.shl (local.get $k) (i32.const 2))))
        (i32.const 15)))
      (i32.store8 (i32.add (i32.const 71) (local.get $k))
        (select
          (i32.add (local.get $d) (i32.const 48))
          (i32.add (local.get $d) (i32.const 87))
          (i32.lt_u (local.get $d) (i32.const 10))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $digit (i32.lt_u (local.get $k) (i32.const 8)))))

  (func (export "_start")
    (local $r i64)
    (local $n i64)
    (local $i i32)
    (local.set $r (call $run_call (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 1024)))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 0)) (then unreachable))
    (if (i32.lt_u (i32.wrap_i64 (local.get $r)) (i32.const 8)) (then unreachable))
    (local.set $n (i64.load (i32.add (i32.const 1016) (i32.wrap_i64 (local.get $r)))))
    (block $done
      (loop $again
        (br_if $done (i64.ge_u (i64.extend_i32_u (local.get $i)) (local.get $n)))
        (call $key (local.get $i))
        ;; kv.put is op 2 of agentrt:kv
        (local.set $r (call $kv_call (i32.const 2) (i32.const 64) (i32.const 123) (i32.const 1024) (i32.const 1024)))
        (if (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (then unreachable))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $again))))
)
