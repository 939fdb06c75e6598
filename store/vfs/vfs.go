// Package vfs is the file layer under the store: every file the store
// creates, writes, allocates, syncs, lists or removes goes through an FS,
// so tests can put a layer that fails chosen calls (Faulty) or simulates a
// small disk between the store and the operating system. Default is the
// operating system's.
//
// Mapped files are mapped from File.Fd; loads and stores through a mapping
// are not calls of this package and cannot be failed here (the store
// allocates a file's blocks through Allocate before it writes through its
// mapping, and syncs mapped writes through File.Msync).
package vfs

import (
	"errors"
	"io"
	"os"
)

// FS is the file system the store uses.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(path string) error
	// Rename renames (moves) oldpath to newpath, replacing it.
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm os.FileMode) error
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// Statfs reports the space of the file system holding path.
	Statfs(path string) (Space, error)
}

// Space is a file system's size, the bytes still available to the
// store's user (Avail) and the bytes not allocated (Free: Avail plus the
// blocks reserved for root; 0 when not known, taken as Avail).
type Space struct {
	Total, Avail, Free uint64
}

// Usable returns the bytes an unprivileged writer can ever hold: those
// in use and those available (df's Used + Avail), Total without the
// reserved blocks.
func (s Space) Usable() uint64 {
	free := max(s.Free, s.Avail)
	if free > s.Total {
		return s.Total
	}
	return s.Total - free + s.Avail
}

// Used returns the used fraction (0..1) of Usable, as df's Use% reads
// it: 1 when nothing is available; 0 for an unknown size. Reserved
// blocks count neither way (counted as used, a file system with 5 % or
// more reserved read 5 % fuller than df says, and reached the full mark
// that much earlier).
func (s Space) Used() float64 {
	u := s.Usable()
	if u == 0 {
		return 0
	}
	return 1 - float64(s.Avail)/float64(u)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Name() string
	// Fd is the descriptor, for mmap.
	Fd() uintptr
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Datasync makes the file's data durable (fdatasync), including what
	// was written through a shared mapping.
	Datasync() error
	// Allocate reserves the blocks of [off, off+n) (fallocate, mode 0),
	// so that later writes there need no new space. ErrNotSupported where
	// the file system cannot.
	Allocate(off, n int64) error
	// WriteBack writes [off, off+n) out and waits for it
	// (sync_file_range); ErrNotSupported where unavailable.
	WriteBack(off, n int64) error
	// Msync makes the bytes of b, a range of this file's shared mapping,
	// durable (msync MS_SYNC).
	Msync(b []byte) error
	// WriteAtZeros writes b at off followed by zeros zero bytes, in one
	// call (pwritev), as a WriteAt of b with the zeros appended would;
	// zeros is at most MaxZeros.
	WriteAtZeros(b []byte, zeros int, off int64) (int, error)
}

// MaxZeros bounds File.WriteAtZeros's zeros.
const MaxZeros = len(zeroBuf)

// zeroBuf is what WriteAtZeros writes its zeros from.
var zeroBuf [64 << 10]byte

// ErrNotSupported is returned by Allocate and WriteBack where the file
// system or the platform lacks them.
var ErrNotSupported = errors.New("vfs: not supported")

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (osFS) Statfs(path string) (Space, error)            { return statfs(path) }

type osFile struct{ *os.File }

// WriteAt is a raw pwrite on Linux (pwrite_linux.go).
func (f osFile) WriteAt(b []byte, off int64) (int, error) { return pwrite(f.File, b, off) }

func (f osFile) Datasync() error              { return datasync(f.File) }
func (f osFile) Allocate(off, n int64) error  { return allocate(f.File, off, n) }
func (f osFile) WriteBack(off, n int64) error { return writeBack(f.File, off, n) }
func (f osFile) Msync(b []byte) error         { return msync(b) }
func (f osFile) WriteAtZeros(b []byte, zeros int, off int64) (int, error) {
	return pwriteZeros(f.File, b, zeros, off)
}
