;; Computes fib(90) by naive recursion: no loop, about 10^19 calls, so it
;; never ends; a guest that an engine checking only loops cannot stop.
(module
  (memory (export "memory") 1)
  (func $fib (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else (i64.add (call $fib (i64.sub (local.get $n) (i64.const 1)))
                     (call $fib (i64.sub (local.get $n) (i64.const 2)))))))
  (func (export "_start")
    (drop (call $fib (i64.const 90)))))
