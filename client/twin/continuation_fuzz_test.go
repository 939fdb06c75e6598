package twin

import (
	"errors"
	"testing"
)

// FuzzTwinContinuation: a continuation token comes from the HTTP client
// (x-ms-continuation), so any string must decode or be refused with
// ErrBadContinuation, never panic; a TOP token that decodes gives a
// position the plain decoder takes for its shard count and 1..top left.
func FuzzTwinContinuation(f *testing.F) {
	tok := encodeContinuation(8, 3, "dev-42")
	f.Add(tok, 8, 10)
	f.Add(topContinuation(tok, 5), 8, 10)
	f.Add("", 1, 1)
	f.Add("AggDBmRldi00MgX_", 8, 3)
	f.Fuzz(func(t *testing.T, tok string, shards, top int) {
		if shards < 1 || shards > 1<<16 || top < 1 || top > 1<<20 {
			return
		}
		if shard, _, err := decodeContinuation(tok, shards); err != nil {
			if !errors.Is(err, ErrBadContinuation) {
				t.Fatalf("decode %q: %v", tok, err)
			}
		} else if shard < 0 || shard >= shards {
			t.Fatalf("decode %q: shard %d of %d", tok, shard, shards)
		}
		pos, left, err := splitTopContinuation(tok, top)
		if err != nil {
			if !errors.Is(err, ErrBadContinuation) {
				t.Fatalf("TOP %q: %v", tok, err)
			}
			return
		}
		if left < 1 || left > top {
			t.Fatalf("TOP %q: %d left of %d", tok, left, top)
		}
		if _, _, err := decodeContinuation(pos, shards); err != nil && !errors.Is(err, ErrBadContinuation) {
			t.Fatalf("TOP %q: position %q: %v", tok, pos, err)
		}
	})
}
