//go:build !linux

// Command tryescape is the Linux escape suite's probe; see main.go.
package main

import "os"

func main() {
	os.Stderr.WriteString("tryescape: Linux only\n")
	os.Exit(2)
}
