;; Grows its table by 2^31 elements at once, then its table and memory one
;; element and one page at a time until they fail, and sets the output to
;; the counts: 4 bytes each, little-endian, of the one-shot table.grow's
;; result, the elements and the pages it ended with. Without limits this
;; drives the host out of memory.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (table $t 0 funcref)
  ;; {"output": h'<12 bytes>'}
  (data (i32.const 0) "\a1\66output\4c")
  (func (export "_start")
    (i32.store (i32.const 9) (table.grow $t (ref.null func) (i32.const 0x80000000)))
    (block $full
      (loop $more
        (br_if $full (i32.eq (table.grow $t (ref.null func) (i32.const 1)) (i32.const -1)))
        (br $more)))
    (i32.store (i32.const 13) (table.size $t))
    (block $full
      (loop $more
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $more)))
    (i32.store (i32.const 17) (memory.size))
    (drop (call $call (i32.const 2) (i32.const 0) (i32.const 21) (i32.const 64) (i32.const 0)))))
