;; Imports a capability that does not exist and a module that is not agentrt's.
(module
  (import "agentrt:teleport" "call" (func (param i32 i32 i32 i32 i32) (result i64)))
  (import "env" "now" (func (result i64)))
  (memory (export "memory") 1)
  (func (export "_start")))
