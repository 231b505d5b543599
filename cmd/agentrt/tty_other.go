//go:build !linux && !darwin && !windows

package main

import "os"

// discardInput does nothing here: typeahead stays.
func discardInput(*os.File) {}
