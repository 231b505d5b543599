;; Logs 60 000-byte messages forever (run.log, the default capability): a
;; guest that fills the disk and the event log unless quotas stop it.
(module
  (import "agentrt:run" "call" (func $call (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)
  ;; {"msg": "aaa...a" (60 000 of them), "level": 1}
  (data (i32.const 0) "\a2\63msg\79\ea\60")
  (data (i32.const 60008) "\65level\01")
  (func (export "_start")
    (memory.fill (i32.const 8) (i32.const 97) (i32.const 60000))
    (loop $again
      (drop (call $call (i32.const 3) (i32.const 0) (i32.const 60015) (i32.const 65536) (i32.const 64)))
      (br $again))))
