;; loop is the guest of the import round-trip and journaled-pure-call
;; benchmarks. It imports agentrt:run (call, take) and nothing else.
;;
;; It makes one run.input call to learn its loop count N (the run input is
;; 8 bytes, N little-endian, so it is the last 8 bytes of the CBOR
;; InputResponse), then N more run.input calls with the same 1-byte request
;; (0xa0, the empty CBOR map). Any status but ok traps. So a run makes N+1
;; import calls.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:run" "take" (func $take (param i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; offset 0: the request of run.input (abi.Empty)
  (data (i32.const 0) "\a0")

  ;; the response buffer: [1024, 2048)
  (func $input (result i64)
    (call $call (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 1024)))

  (func (export "_start")
    (local $r i64)
    (local $n i64)
    (local.set $r (call $input))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 0)) (then unreachable))
    (if (i32.lt_u (i32.wrap_i64 (local.get $r)) (i32.const 8)) (then unreachable))
    ;; N = the last 8 bytes of the response: 1024 + len - 8
    (local.set $n (i64.load (i32.add (i32.const 1016) (i32.wrap_i64 (local.get $r)))))
    (block $done
      (loop $again
        (br_if $done (i64.eqz (local.get $n)))
        (local.set $r (call $input))
        (if (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (then unreachable))
        (local.set $n (i64.sub (local.get $n) (i64.const 1)))
        (br $again))))
)
