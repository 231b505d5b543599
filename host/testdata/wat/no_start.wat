;; A reactor-style module with no _start: not a command, cannot be run.
(module
  (memory (export "memory") 1)
  (func (export "work")))
