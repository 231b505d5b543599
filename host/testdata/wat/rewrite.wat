;; Refers to its functions in every way the rewrite renumbers: call,
;; call_indirect through an active segment, ref.func in a passive segment
;; and in a global, the start section. compute(n) sums, for i < n, one of
;; four functions of i picked through the table, the square of i and a
;; global the start function set. For the reader's tests (wasmmod_test.go).
(module
  (type $t (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (table $tab 4 funcref)
  (elem (table $tab) (i32.const 0) func $double $square)
  (elem $passive funcref (ref.func $inc))
  (global $g (mut i32) (i32.const 0))
  (global $fr funcref (ref.func $inc))
  (func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $square (param i32) (result i32) (i32.mul (local.get 0) (local.get 0)))
  (func $inc (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $init (global.set $g (i32.const 7)))
  (start $init)
  (func (export "compute") (param $n i32) (result i64)
    (local $i i32) (local $acc i64)
    (table.init $tab $passive (i32.const 2) (i32.const 0) (i32.const 1))
    (table.set $tab (i32.const 3) (global.get $fr))
    (loop $l
      (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u
        (i32.add (i32.add (call_indirect (type $t) (local.get $i) (i32.rem_u (local.get $i) (i32.const 4)))
                          (call $square (local.get $i)))
                 (global.get $g)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $acc)))
