package fileread_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/fileread"
)

// TestRefusesWhatIsNotARegularFile gives the reader what a hostile or
// careless command line may name: /dev/zero (endless), a symlink to it, a
// FIFO with no writer (a read would block forever), a directory. Each is
// refused at once, before a byte is read, naming the file and what it is.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/zero or FIFOs")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "module.wasm")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "bundle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, what string }{
		{"/dev/zero", "a character device"},
		{link, "a character device"},
		{fifo, "a FIFO"},
		{dir, "a directory"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := fileread.Read(c.path, fileread.Module)
			done <- err
		}()
		select {
		case err := <-done:
			var fe *fileread.Error
			if !errors.Is(err, fileread.ErrNotRegular) || !errors.As(err, &fe) || fe.Path != c.path ||
				!strings.Contains(err.Error(), c.what) || !strings.Contains(err.Error(), "module") {
				t.Fatalf("%s: %v, want refused as %s", c.path, err, c.what)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the read blocked", c.path)
		}
	}
}

func TestRefusesAFileOverItsLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(file, make([]byte, fileread.Checkpoint.Limit+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := fileread.Read(file, fileread.Checkpoint)
	if !errors.Is(err, fileread.ErrTooLarge) || !strings.Contains(err.Error(), "4097 bytes, more than the 4096 bytes a checkpoint may have") {
		t.Fatalf("%v", err)
	}
	// A sparse file of 2 GiB: refused from its size, without reading it.
	sparse := filepath.Join(t.TempDir(), "sparse.wasm")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	if _, err := fileread.Read(sparse, fileread.Module); !errors.Is(err, fileread.ErrTooLarge) || time.Since(start) > time.Second {
		t.Fatalf("a 2 GiB module: %v after %v", err, time.Since(start))
	}
}

func TestReadsARegularFileWhole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	want := []byte(strings.Repeat("agentrt ", 1000))
	if err := os.WriteFile(file, want, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{int64(len(want)), int64(len(want)) + 1} {
		got, err := fileread.Read(file, fileread.Kind{Name: "x", Limit: limit})
		if err != nil || string(got) != string(want) {
			t.Fatalf("limit %d: %d bytes, %v", limit, len(got), err)
		}
	}
	if _, err := fileread.Read(file, fileread.Kind{Name: "x", Limit: int64(len(want)) - 1}); !errors.Is(err, fileread.ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
	if _, err := fileread.Read(filepath.Join(t.TempDir(), "absent"), fileread.Grant); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absent: %v", err)
	}
}
