;; spawner is the parent of the sub-agent benchmarks (figure 21). It imports
;; agentrt:run and agentrt:agent (call) and nothing else.
;;
;; Its input is an agent.spawn request (the canonical CBOR of
;; abi.SpawnRequest, built by the harness), then the request's length (4
;; bytes, little-endian), then N (8 bytes, little-endian). It makes one
;; run.input call, then N agent.spawn calls with that request, each
;; starting one child; it awaits none of them. Any status but ok traps. A
;; run makes N+1 import calls.
(module
  (import "agentrt:run" "call" (func $run_call (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:agent" "call" (func $agent_call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)

  ;; offset 0: the request of run.input (abi.Empty)
  (data (i32.const 0) "\a0")

  (func (export "_start")
    (local $r i64)
    (local $end i32)
    (local $len i32)
    (local $req i32)
    (local $n i64)
    (local $i i64)
    ;; run.input is op 1 of agentrt:run; its response (a CBOR byte
    ;; string of the input) goes to offset 1024, at most 64 KiB.
    (local.set $r (call $run_call (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 65536)))
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 0)) (then unreachable))
    (local.set $end (i32.add (i32.const 1024) (i32.wrap_i64 (local.get $r))))
    (local.set $n (i64.load (i32.sub (local.get $end) (i32.const 8))))
    (local.set $len (i32.load (i32.sub (local.get $end) (i32.const 12))))
    (local.set $req (i32.sub (i32.sub (local.get $end) (i32.const 12)) (local.get $len)))
    (block $done
      (loop $again
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        ;; agent.spawn is op 1 of agentrt:agent; its response goes to
        ;; offset 100000.
        (local.set $r (call $agent_call (i32.const 1) (local.get $req) (local.get $len) (i32.const 100000) (i32.const 4096)))
        (if (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))) (then unreachable))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $again))))
)
