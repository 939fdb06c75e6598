//go:build !linux

package vfs

import "os"

// pwrite is f.WriteAt here (see pwrite_linux.go).
func pwrite(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }
