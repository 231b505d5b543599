//go:build !linux

package mcp

func hostileMain() {}
