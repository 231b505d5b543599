// Command guest-go is the reference Go guest of the WASI vectors: a plain
// GOOS=wasip1 program, without the agentrt SDK, that uses what Go programs
// use of WASI (its runtime's start-up, arguments, environment, both
// clocks, a sleep, randomness, the standard streams, a file it cannot
// open). host/wasi_trace_test.go records the WASI calls it makes as
// ../trace.guest-go.txt.
package main

import (
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"time"
)

func main() {
	fmt.Println("args:", os.Args, "environment:", len(os.Environ()))
	start := time.Now()
	time.Sleep(2 * time.Millisecond)
	fmt.Println("now:", start.UnixNano(), "slept at least 2ms:", time.Since(start) >= 2*time.Millisecond)
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	fmt.Printf("crypto/rand: %x math/rand: %d\n", b, mrand.IntN(1000))
	in, err := io.ReadAll(os.Stdin)
	fmt.Println("stdin:", len(in), err)
	_, err = os.ReadFile("/etc/hostname")
	fmt.Println("open:", err)
	fmt.Fprintln(os.Stderr, "to stderr")
}
