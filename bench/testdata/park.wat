;; park is the guest of the parked-run benchmarks (figure 16). It imports
;; agentrt:run, agentrt:timer and agentrt:approval (call only).
;;
;; It makes one run.input call to learn what to wait for: the run input is
;; 8 bytes, the last 8 of the CBOR InputResponse. All zero: it asks for an
;; approval (approval.request, action "bench", group "bench"). Otherwise
;; they are a duration in ns, big-endian, of at least 2^32 (so that CBOR's
;; shortest form of it takes all 8 bytes), and it sleeps for that long
;; (timer.sleep {"for": ns}). Either call parks the run. When it is
;; answered, the run makes one run.log call ("woke"), the live call the
;; wake latency is timed to, and ends. Any status but ok traps.
(module
  (import "agentrt:run" "call" (func $run (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:timer" "call" (func $timer (param i32 i32 i32 i32 i32) (result i64)))
  (import "agentrt:approval" "call" (func $approval (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)

  ;; offset 0: the request of run.input (abi.Empty)
  (data (i32.const 0) "\a0")
  ;; offset 16: timer.sleep's request, {"for": <8 bytes>}: 6 bytes of
  ;; header, the duration copied in at offset 22 (14 bytes in all)
  (data (i32.const 16) "\a1\63for\1b")
  ;; offset 64: approval.request's request, {"group": "bench", "action": "bench"} (26 bytes)
  (data (i32.const 64) "\a2\65group\65bench\66action\65bench")
  ;; offset 128: run.log's request, {"msg": "woke", "level": 1} (17 bytes)
  (data (i32.const 128) "\a2\63msg\64woke\65level\01")

  ;; the response buffer: [1024, 2048)
  (func $ok (param $r i64)
    (if (i64.ne (i64.shr_u (local.get $r) (i64.const 32)) (i64.const 0)) (then unreachable)))

  (func (export "_start")
    (local $r i64)
    (local $for i64)
    (local.set $r (call $run (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 1024)))
    (call $ok (local.get $r))
    (if (i32.lt_u (i32.wrap_i64 (local.get $r)) (i32.const 8)) (then unreachable))
    ;; the input: the last 8 bytes of the response, as they are
    (local.set $for (i64.load (i32.add (i32.const 1016) (i32.wrap_i64 (local.get $r)))))
    (if (i64.eqz (local.get $for))
      (then
        (call $ok (call $approval (i32.const 1) (i32.const 64) (i32.const 26) (i32.const 1024) (i32.const 1024))))
      (else
        (i64.store (i32.const 22) (local.get $for))
        (call $ok (call $timer (i32.const 1) (i32.const 16) (i32.const 14) (i32.const 1024) (i32.const 1024)))))
    (call $ok (call $run (i32.const 3) (i32.const 128) (i32.const 17) (i32.const 1024) (i32.const 1024))))
)
