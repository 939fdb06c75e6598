package store

import (
	"errors"
	"fmt"
)

// Sentinel errors of the store package. Callers test them with errors.Is.
var (
	// ErrClosed is returned by every operation on a closed store.
	ErrClosed = errors.New("store: closed")

	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("store: invalid options")

	// ErrLocked means another process (or another Store in this process)
	// holds the lock file of the root directory.
	ErrLocked = errors.New("store: root is locked by another store")

	// ErrBadRoot means the root path cannot be used (it is a file, or a
	// directory that cannot be created or written).
	ErrBadRoot = errors.New("store: unusable root directory")

	// ErrSegmentSize means the commitlog segments on disk were written with a
	// different segment size (or consume-queue files with a different entry
	// count) than the options ask for. The store refuses to open rather than
	// misread the files.
	ErrSegmentSize = errors.New("store: segment size differs from the files on disk")

	// ErrMessageTooLarge means a body exceeds Options.MaxMessageSize, or
	// its record the room beside it (Options.sizeError).
	ErrMessageTooLarge = errors.New("store: message too large")

	// ErrIllegalMessage means a message cannot be encoded (topic too long,
	// properties too long, invalid host address, ...). It wraps the record
	// package error as well.
	ErrIllegalMessage = errors.New("store: illegal message")

	// ErrDiskFull means disk usage is above Options.DiskFullRatio and writes
	// are refused until retention frees space.
	ErrDiskFull = errors.New("store: disk full")

	// ErrWriteFailed is the sticky fail-stop error: after a write or fsync
	// error the store refuses further writes instead of acknowledging what it
	// may not keep. The original error is wrapped too.
	ErrWriteFailed = errors.New("store: write failed, store is read-only")

	// ErrCorrupt is wrapped by every *CorruptError: bytes on disk failed
	// validation. Recovery cuts (never skips silently) at the first bad byte.
	ErrCorrupt = errors.New("store: corrupt data")

	// ErrNotFound means no record exists at the given physical offset (below
	// the commitlog minimum, at or beyond its end, or not a record start).
	ErrNotFound = errors.New("store: no message at offset")

	// ErrBadOffset means AppendRaw was given an offset other than the current
	// end of the commitlog, or raw bytes that cross a segment end.
	ErrBadOffset = errors.New("store: offset does not match the commitlog end")
)

// CorruptError describes damaged bytes on disk: which file, where, and why.
// It wraps ErrCorrupt (and the underlying decoder error if any).
type CorruptError struct {
	File   string // path of the damaged file
	Offset int64  // byte offset within File
	Reason string // what failed
	Err    error  // underlying error (e.g. a record.CorruptError), may be nil
}

// Error implements error.
func (e *CorruptError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("store: corrupt %s at offset %d: %s: %v", e.File, e.Offset, e.Reason, e.Err)
	}
	return fmt.Sprintf("store: corrupt %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying decoder error.
func (e *CorruptError) Unwrap() error { return e.Err }
