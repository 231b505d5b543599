;; Calls run.input with a request buffer far outside its one page of memory.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $call (i32.const 1) (i32.const 0x7ffffff0) (i32.const 64) (i32.const 0) (i32.const 16)))))
