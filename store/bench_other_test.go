//go:build !linux

package store

import (
	"os"
	"testing"
	"time"
)

// dropCaches needs Linux (fadvise, mincore): cold-read benchmarks skip.
func dropCaches(b *testing.B, _ *Store) float64 {
	b.Skip("store: cold reads need Linux")
	return 0
}

// evictFile needs Linux (fadvise).
func evictFile(b *testing.B, _ *os.File) { b.Skip("store: cold reads need Linux") }

// processCPU is not measured off Linux (benchmarks report wall time only).
func processCPU() time.Duration { return 0 }
