//go:build !linux

package testutil

import (
	"errors"
	"time"
)

// CPUSample is what a process had used of the CPU at one moment (read
// from /proc on Linux; not available elsewhere).
type CPUSample struct{}

// ProcessCPU is only available on Linux.
func ProcessCPU(pid int) (CPUSample, error) {
	return CPUSample{}, errors.New("process CPU time is read from /proc: Linux only")
}

// Since returns the CPU time used from earlier to s.
func (s CPUSample) Since(earlier CPUSample) time.Duration { return 0 }
