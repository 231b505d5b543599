// Command gen writes guest-sdk/abi from abi/ (go generate ./internal/guestabi)
// and removes generated files whose source is gone.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrt/agentrt/internal/guestabi"
)

func main() {
	// go generate runs this in internal/guestabi.
	root := filepath.Join("..", "..")
	if err := write(root); err != nil {
		fmt.Fprintln(os.Stderr, "guestabi:", err)
		os.Exit(1)
	}
}

func write(root string) error {
	files, err := guestabi.Generate(filepath.Join(root, "abi"))
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "guest-sdk", "abi")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && guestabi.IsGenerated(b) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
