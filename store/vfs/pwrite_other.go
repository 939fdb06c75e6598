//go:build !linux

package vfs

import (
	"os"
)

// pwrite is f.WriteAt here (see pwrite_linux.go).
func pwrite(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

// pwriteZeros is one WriteAt of b and the zeros here.
func pwriteZeros(f *os.File, b []byte, zeros int, off int64) (int, error) {
	return f.WriteAt(append(b[:len(b):len(b)], zeroBuf[:zeros]...), off)
}
