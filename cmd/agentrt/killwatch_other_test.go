//go:build !linux

package main

import "errors"

// killOnCreate needs inotify; elsewhere the kills are timed only.
func killOnCreate(string, string, func()) (<-chan struct{}, func(), error) {
	return nil, nil, errors.New("no inotify")
}
