package vfs

import (
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Op names a call Faulty can fail.
type Op int

const (
	OpOpen      Op = iota // OpenFile
	OpWrite               // File.WriteAt
	OpSync                // File.Datasync
	OpAllocate            // File.Allocate
	OpWriteBack           // File.WriteBack
	OpMsync               // File.Msync
	OpTruncate            // File.Truncate
	OpRemove              // Remove, RemoveAll
	numOps
)

var opNames = [...]string{"open", "write", "sync", "allocate", "writeback", "msync", "truncate", "remove"}

// String names the call.
func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Rule fails calls of Op on files whose path contains Path (every file
// when empty): the first After matching calls pass, then Count calls fail
// with Err (Count 0: every later call fails).
type Rule struct {
	Op    Op
	Path  string
	After int
	Count int
	Err   error
}

type ruleState struct {
	Rule
	seen, failed int
}

// blockSize is the granularity of Faulty's space accounting.
const blockSize = 4096

// extents are the block ranges of one file that hold data, sorted and
// merged, in bytes (block aligned).
type extents [][2]int64

func (e extents) size() int64 {
	n := int64(0)
	for _, x := range e {
		n += x[1] - x[0]
	}
	return n
}

// missing returns how many bytes of [from, to) are not covered.
func (e extents) missing(from, to int64) int64 {
	n := to - from
	for _, x := range e {
		lo, hi := max(from, x[0]), min(to, x[1])
		if lo < hi {
			n -= hi - lo
		}
	}
	return n
}

func (e extents) add(from, to int64) extents {
	e = append(e, [2]int64{from, to})
	sort.Slice(e, func(i, j int) bool { return e[i][0] < e[j][0] })
	out := e[:1]
	for _, x := range e[1:] {
		if last := &out[len(out)-1]; x[0] <= last[1] {
			last[1] = max(last[1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

func (e extents) cut(at int64) extents {
	var out extents
	for _, x := range e {
		if x[0] >= at {
			break
		}
		out = append(out, [2]int64{x[0], min(x[1], at)})
	}
	return out
}

// Faulty is an FS over another that fails the calls its rules name, and
// can pretend the disk is small: with a capacity set, Statfs reports that
// capacity, and writes or allocations that need blocks beyond it fail
// with ENOSPC (no byte written), as a full disk does. Blocks are counted
// per file as the ranges written or allocated (files the store writes
// through a mapping are allocated first, so they are counted too); Fill
// stands for other users of the disk. Safe for concurrent use.
type Faulty struct {
	base FS

	mu       sync.Mutex
	rules    []*ruleState       // protected by mu
	capacity int64              // 0: the base's space; protected by mu
	others   int64              // bytes Fill added; protected by mu
	files    map[string]extents // protected by mu
	calls    [numOps]int        // protected by mu
	failed   [numOps]int        // protected by mu
}

// NewFaulty returns a Faulty over base (Default when nil) with no rules
// and no capacity of its own.
func NewFaulty(base FS) *Faulty {
	if base == nil {
		base = Default
	}
	return &Faulty{base: base, files: make(map[string]extents)}
}

// Inject adds a rule; the returned function removes it.
func (f *Faulty) Inject(r Rule) (remove func()) {
	st := &ruleState{Rule: r}
	f.mu.Lock()
	f.rules = append(f.rules, st)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == st {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every rule.
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// SetCapacity makes the disk n bytes large (0: the base's space again).
func (f *Faulty) SetCapacity(n int64) {
	f.mu.Lock()
	f.capacity = n
	f.mu.Unlock()
}

// Fill marks n more bytes used by someone else (negative n frees them).
func (f *Faulty) Fill(n int64) {
	f.mu.Lock()
	f.others = max(0, f.others+n)
	f.mu.Unlock()
}

// Used returns the bytes counted as used: the files' blocks and Fill's.
func (f *Faulty) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usedLocked()
}

func (f *Faulty) usedLocked() int64 {
	n := f.others
	for _, e := range f.files {
		n += e.size()
	}
	return n
}

// Calls returns how many calls of op were made; Failed how many of them
// failed because of a rule or the capacity.
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Failed returns how many calls of op Faulty failed.
func (f *Faulty) Failed(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed[op]
}

// check counts a call and returns the error a rule gives it.
func (f *Faulty) check(op Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checkLocked(op, path)
}

func (f *Faulty) checkLocked(op Op, path string) error {
	f.calls[op]++
	for _, r := range f.rules {
		if r.Op != op || !strings.Contains(path, r.Path) {
			continue
		}
		r.seen++
		if r.seen <= r.After || (r.Count > 0 && r.failed >= r.Count) {
			continue
		}
		r.failed++
		f.failed[op]++
		return r.Err
	}
	return nil
}

// claim accounts the blocks of [off, off+n) of path, or fails with ENOSPC
// when the capacity cannot hold the new ones.
func (f *Faulty) claim(op Op, path string, off, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(op, path); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	from, to := off/blockSize*blockSize, (off+n+blockSize-1)/blockSize*blockSize
	e := f.files[path]
	if f.capacity > 0 && f.usedLocked()+e.missing(from, to) > f.capacity {
		f.failed[op]++
		return &os.PathError{Op: op.String(), Path: path, Err: syscall.ENOSPC}
	}
	f.files[path] = e.add(from, to)
	return nil
}

func (f *Faulty) forget(path string, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.files {
		if p == path || (all && strings.HasPrefix(p, path+string(os.PathSeparator))) {
			delete(f.files, p)
		}
	}
}

// OpenFile implements FS.
func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&os.O_TRUNC != 0 {
		f.forget(name, false)
	}
	return &faultyFile{File: file, fs: f, path: name}, nil
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	if err := f.base.Remove(name); err != nil {
		return err
	}
	f.forget(name, false)
	return nil
}

// RemoveAll implements FS.
func (f *Faulty) RemoveAll(path string) error {
	if err := f.check(OpRemove, path); err != nil {
		return &os.PathError{Op: "removeall", Path: path, Err: err}
	}
	if err := f.base.RemoveAll(path); err != nil {
		return err
	}
	f.forget(path, true)
	return nil
}

// Rename implements FS; it fails as a Remove of newpath would.
func (f *Faulty) Rename(oldpath, newpath string) error {
	if err := f.check(OpRemove, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if err := f.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.forget(oldpath, false)
	f.forget(newpath, false)
	return nil
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(path string, perm os.FileMode) error { return f.base.MkdirAll(path, perm) }

// ReadDir implements FS.
func (f *Faulty) ReadDir(name string) ([]os.DirEntry, error) { return f.base.ReadDir(name) }

// Stat implements FS.
func (f *Faulty) Stat(name string) (os.FileInfo, error) { return f.base.Stat(name) }

// Statfs implements FS: the capacity and what is left of it, when set.
func (f *Faulty) Statfs(path string) (Space, error) {
	f.mu.Lock()
	c, used := f.capacity, f.usedLocked()
	f.mu.Unlock()
	if c == 0 {
		return f.base.Statfs(path)
	}
	return Space{Total: uint64(c), Avail: uint64(max(0, c-used))}, nil
}

type faultyFile struct {
	File
	fs   *Faulty
	path string
}

func (f *faultyFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.claim(OpWrite, f.path, off, int64(len(b))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *faultyFile) WriteAtZeros(b []byte, zeros int, off int64) (int, error) {
	if err := f.fs.claim(OpWrite, f.path, off, int64(len(b)+zeros)); err != nil {
		return 0, err
	}
	return f.File.WriteAtZeros(b, zeros, off)
}

func (f *faultyFile) Allocate(off, n int64) error {
	if err := f.fs.claim(OpAllocate, f.path, off, n); err != nil {
		return err
	}
	return f.File.Allocate(off, n)
}

func (f *faultyFile) Datasync() error {
	if err := f.fs.check(OpSync, f.path); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *faultyFile) WriteBack(off, n int64) error {
	if err := f.fs.check(OpWriteBack, f.path); err != nil {
		return err
	}
	return f.File.WriteBack(off, n)
}

func (f *faultyFile) Msync(b []byte) error {
	if err := f.fs.check(OpMsync, f.path); err != nil {
		return err
	}
	return f.File.Msync(b)
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.path); err != nil {
		return err
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.mu.Lock()
	if e, ok := f.fs.files[f.path]; ok {
		f.fs.files[f.path] = e.cut((size + blockSize - 1) / blockSize * blockSize)
	}
	f.fs.mu.Unlock()
	return nil
}
