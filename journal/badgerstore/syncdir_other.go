//go:build !unix

package badgerstore

// syncDir does nothing where a directory cannot be opened to sync it
// (Windows: NTFS makes a created file's name durable with its metadata).
func syncDir(string) error { return nil }
