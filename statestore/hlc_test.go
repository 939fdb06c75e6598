package statestore

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestStateStoreHLCParse(t *testing.T) {
	good := []struct {
		in   string
		want HLC
		out  string
	}{
		{"001696374425000:00001:StateStore", HLC{1696374425000, 1, "StateStore"}, "001696374425000:00001:StateStore"},
		{"1696374425000:0:Client1", HLC{1696374425000, 0, "Client1"}, "001696374425000:00000:Client1"},
		{"001795324964139:00000:01a201b4-ecff-7be4-923c-711a2b80d410", HLC{1795324964139, 0, "01a201b4-ecff-7be4-923c-711a2b80d410"}, ""},
		{"0:0:x", HLC{0, 0, "x"}, "000000000000000:00000:x"},
		{"1:123456:n", HLC{1, 123456, "n"}, "000000000000001:123456:n"},
		{"9223372036854775807:18446744073709551615:n", HLC{math.MaxInt64, math.MaxUint64, "n"}, "9223372036854775807:18446744073709551615:n"},
		{"1:2:" + strings.Repeat("a", 255), HLC{1, 2, strings.Repeat("a", 255)}, ""},
		{"1:2: spaces are fine ", HLC{1, 2, " spaces are fine "}, ""},
	}
	for _, c := range good {
		h, err := ParseHLC(c.in)
		if err != nil || h != c.want {
			t.Errorf("ParseHLC(%q) = %+v, %v; want %+v", c.in, h, err, c.want)
			continue
		}
		if c.out != "" && h.String() != c.out {
			t.Errorf("String(%q) = %q, want %q", c.in, h.String(), c.out)
		}
		if back, err := ParseHLC(h.String()); err != nil || back != h {
			t.Errorf("round trip of %q: %+v, %v", c.in, back, err)
		}
	}
	bad := []string{
		"", ":", "::", "1:2", "1:2:", ":2:n", "1::n", "1:2:a:b", "a:2:n", "1:b:n", "-1:2:n", "+1:2:n", "1:-2:n",
		" 1:2:n", "1: 2:n", "1.0:2:n", "0x1:2:n", "9223372036854775808:0:n", "1:18446744073709551616:n",
		"1:2:" + strings.Repeat("a", 256), "１:2:n",
	}
	for _, in := range bad {
		if h, err := ParseHLC(in); !errors.Is(err, ErrBadHLC) {
			t.Errorf("ParseHLC(%q) = %+v, %v; want ErrBadHLC", in, h, err)
		}
	}
}

func TestStateStoreHLCCompare(t *testing.T) {
	ordered := []HLC{
		{}, {0, 0, "a"}, {0, 1, "a"}, {1, 0, "A"}, {1, 0, "B"}, {1, 0, "a"}, {1, 0, "ab"}, {1, 1, ""}, {1, 99999, "z"}, {1, 100000, "a"}, {2, 0, "a"},
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ordered[i].Compare(ordered[j]); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if !(HLC{}).IsZero() || (HLC{Node: "x"}).IsZero() {
		t.Error("IsZero")
	}
}

// The update rule of the SDKs, and the seed's example: a request at
// 1696374425000:0:Client1 against an identical store clock gives
// 1696374425000:1:StateStore.
func TestStateStoreHLCUpdate(t *testing.T) {
	const T = 1696374425000
	cases := []struct {
		local, remote HLC
		wall          int64
		want          HLC
	}{
		{HLC{}, HLC{T, 0, "Client1"}, T, HLC{T, 1, "S"}},            // the seed's example
		{HLC{}, HLC{T, 0, "Client1"}, T + 5, HLC{T + 5, 0, "S"}},    // wall ahead of both
		{HLC{T, 7, "S"}, HLC{T, 3, "c"}, T, HLC{T, 8, "S"}},         // equal stamps: max counter + 1
		{HLC{T, 3, "S"}, HLC{T, 7, "c"}, T, HLC{T, 8, "S"}},         // equal stamps, remote counter larger
		{HLC{T + 9, 2, "S"}, HLC{T, 7, "c"}, T, HLC{T + 9, 3, "S"}}, // local ahead
		{HLC{T, 2, "S"}, HLC{T + 9, 7, "c"}, T, HLC{T + 9, 8, "S"}}, // remote ahead (within the skew)
		{HLC{T, MaxIssuedCounter, "S"}, HLC{}, T, HLC{T + 1, 0, "S"}},
		{HLC{}, HLC{T, math.MaxUint64, "c"}, T, HLC{T + 1, 0, "S"}},
	}
	for _, c := range cases {
		got := hlcUpdate(c.local, c.remote, c.wall, "S")
		if got != c.want {
			t.Errorf("hlcUpdate(%v, %v, %d) = %v, want %v", c.local, c.remote, c.wall, got, c.want)
		}
		if got.Compare(c.local) <= 0 || got.Compare(c.remote) <= 0 {
			t.Errorf("hlcUpdate(%v, %v) = %v is not newer than both", c.local, c.remote, got)
		}
	}
}

// TestStateStoreHLCStringDigits pins String's digits and padding against
// fmt's at the widths' edges (appendPadded writes them itself).
func TestStateStoreHLCStringDigits(t *testing.T) {
	walls := []int64{0, 1, 9, 10, 99999, 100000, 999999999999999, 1000000000000000, 1764277000123, math.MaxInt64}
	counters := []uint64{0, 7, 9999, 99999, 100000, math.MaxInt32, math.MaxUint64}
	for _, w := range walls {
		for _, c := range counters {
			h := HLC{Wall: w, Counter: c, Node: "node-1"}
			if got, want := h.String(), fmt.Sprintf("%015d:%05d:node-1", w, c); got != want {
				t.Errorf("HLC{%d, %d}.String() = %q, want %q", w, c, got, want)
			}
			if got := string(h.AppendText([]byte("x"))); got != "x"+h.String() {
				t.Errorf("AppendText after x = %q", got)
			}
		}
	}
}
